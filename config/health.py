"""Health endpoints for a load balancer or an orchestrator.

`/healthz`: the process answers (liveness; touches nothing else).
`/readyz`: it can serve searches: the database answers (within
READYZ_DATABASE_SECONDS, so a hung server reads as unreachable) and is migrated,
and the embedding model can run (without it searches fall back to
keyword, `degraded` says so). It also reports, without failing on them,
how much of the index has vectors (one figure counted now, the same from
every worker) and whether the scheduled sources are synced. Neither needs
a login, so neither says anything of the records: no counts, no keys.
"""

from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from backlog.db import database_unavailable
from runtime.postgres import deadline

# The most /readyz waits on the database, connecting included: a probe's own
# timeout is commonly 5 s, and a frozen server must read as not ready within it.
READYZ_DATABASE_SECONDS = 3.0

# Once every migration is applied, the migration graph (read from every
# migration file) is not read again on each probe: a running process does
# not see its own code's migrations change.
_migrated = False


@never_cache
@require_safe
def healthz(request):
    return JsonResponse({"status": "alive"})


def embeddings_check() -> str:
    """How much of the index has vectors, as a share (readyz answers anyone: no
    counts), the same figure from every worker. Partial is reported, never a
    reason to be not ready: keyword search finds every record meanwhile."""
    from search.indexing.health import coverage_now, coverage_text

    coverage = coverage_now()
    if coverage >= 1:
        return "complete"
    return (
        f"partial: {coverage_text(coverage)} of records have a vector; results by meaning are partial "
        "until the embedding worker catches up (every record is found by its words)"
    )


def sources_check() -> str:
    """Whether the scheduled sources synced within their schedule: a count, no
    names (readyz answers anyone). Reported, never a reason to be not ready."""
    from connectors.models import overdue_sources

    overdue, scheduled = overdue_sources()
    if not scheduled:
        return "none scheduled"
    return "ok" if not overdue else f"{overdue} of {scheduled} scheduled source(s) not synced within their schedule"


def cluster_check() -> str | None:
    """On a Citus coordinator, whether every worker answers; None on one server.
    A worker down fails the searches that need its shards (a 503 saying the
    cluster is degraded) but not the others, so it is reported, not unready."""
    from search import citus
    from search.ranking import layout

    if not layout.distributed():  # learned once a minute; on one server a setting read, nothing more
        return None
    with transaction.atomic(), connection.cursor() as cursor:
        down = citus.unreachable_workers(cursor)
    return f"degraded: worker {', '.join(down)} not reachable" if down else "ok"


@never_cache
@require_safe
def readyz(request):
    from search.indexing.embeddings import unavailable_reason
    from search.indexing.health import worker_health

    global _migrated
    checks = {}
    try:
        with deadline.within(READYZ_DATABASE_SECONDS):
            if not _migrated:
                executor = MigrationExecutor(connection)
                pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
                _migrated = not pending
            worker = worker_health(0)  # a query: it asks the database every time
            checks["database"] = "ok" if _migrated else f"{len(pending)} migration(s) not applied: run migrate"
            checks["embedding_worker"] = worker.state if worker else "not supervised"
            if (cluster := cluster_check()) is not None:
                checks["cluster"] = cluster
            if _migrated:  # their tables may not be there yet
                # Coverage reads the index, whose shards a worker down leaves incomplete.
                degraded = cluster not in (None, "ok")
                checks["embeddings"] = "unknown while the cluster is degraded" if degraded else embeddings_check()
                checks["sources"] = sources_check()
    except DatabaseError as exc:
        checks["database"] = "unreachable" if database_unavailable(exc) else "failing"
    checks["embedding_model"] = unavailable_reason() or "ok"
    ready = checks["database"] == "ok"
    return JsonResponse({"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503)
