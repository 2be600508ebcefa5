"""Index health: how complete the vector index is, and how its worker fares.

Every search response carries it (`index`), and the dashboard shows it.
"""

import logging
import threading
import time
from datetime import timedelta

from django.core.cache import cache
from django.db import connections
from django.utils import timezone

from search import db
from search.contract import IndexHealth, WorkerHealth
from search.indexing.embeddings import active_model_id
from search.indexing.worker import HEARTBEAT_SECONDS
from search.models import Worker, WorkerState

logger = logging.getLogger(__name__)

EMBEDDING_WORKER = "embed"  # the Worker row `serve`'s supervisor keeps
# (alias, database, model, products) -> (when counted, IndexHealth); the keys
# being refreshed. By alias: a replica's count may trail the primary's.
HealthKey = tuple[str, str, str | None, tuple[int, ...] | None]
_health_cache: dict[HealthKey, tuple[float, IndexHealth]] = {}
_health_refreshing: dict[HealthKey, float] = {}  # key -> when its background recount started
_health_lock = threading.Lock()
HEALTH_TTL_SECONDS = 5.0
# No figure older than this is shown: past it a search counts itself (a
# background recount that never came back is given up and started again).
HEALTH_MAX_AGE_SECONDS = 60.0
LARGE_INDEX = 2_000


def index_health(products: tuple[int, ...] | None = None) -> IndexHealth:
    """How complete the vector index is for the active model: over the
    records of `products` when given (a user who sees only those: no figure
    counts a record they cannot see), else over all records.

    Counting is a scan of the whole index table (about 50 ms at 100,000
    records, 7 ms at 10,000: half of a keyword search there). Up to
    LARGE_INDEX documents every call counts. Above it a
    process answers with its last count and, once that is HEALTH_TTL_SECONDS
    old, counts again in a background thread (stale while revalidating): no
    search waits for the scan, and the figure may lag the embedding worker
    by a few seconds, never by more than HEALTH_MAX_AGE_SECONDS.
    """
    key = (db.alias(), db.connection().settings_dict["NAME"], active_model_id(), products)
    cached = _health_cache.get(key)
    if cached:
        age = time.monotonic() - cached[0]
        if age < HEALTH_MAX_AGE_SECONDS:
            if age >= HEALTH_TTL_SECONDS:
                _recount_in_background(key)
            return cached[1]
        logger.warning("The index health figure is %.0f s old; counting it in this request", age)
    health = _count_health(key[2], products)
    if health.documents > LARGE_INDEX:
        _health_cache[key] = (time.monotonic(), health)
    return health


# /readyz's coverage: counted at most once a few seconds for every process (the
# shared cache table), so frequent probes from several balancers scan no more,
# and every worker reports the same figure; forgotten when vectors are written.
COVERAGE_SECONDS = 5


def _coverage_key() -> str:
    return f"search:coverage:{active_model_id()}"


def coverage_now() -> float:
    """The share of all records with a current vector, the same from every process."""
    return cache.get_or_set(_coverage_key(), lambda: _count_health(active_model_id(), None).coverage, COVERAGE_SECONDS)


def forget_coverage() -> None:
    """After vectors or records were written: the next coverage_now() counts again."""
    cache.delete(_coverage_key())


# The counts and the worker's row in one statement: (documents, embedded, then _WORKER_COLUMNS or NULLs).
_WORKER_COLUMNS = ("state", "restarts", "last_error", "last_error_at", "heartbeat_at")
COUNT_HEALTH_SQL = f"""
    SELECT c.documents, c.embedded, {", ".join(f"w.{column}" for column in _WORKER_COLUMNS)}
    FROM (SELECT count(*) AS documents,
                 count(*) FILTER (WHERE embedding_model = %(model)s AND embedding_hash = content_hash) AS embedded
          FROM search_document {{within}}) c
    LEFT JOIN search_worker w ON w.name = %(worker)s
"""


def _count_health(model_id: str | None, products: tuple[int, ...] | None) -> IndexHealth:
    within = "" if products is None else "WHERE product_id = ANY(%(products)s)"
    with db.cursor() as cursor:
        cursor.execute(
            COUNT_HEALTH_SQL.format(within=within),
            {"model": model_id, "products": list(products or ()), "worker": EMBEDDING_WORKER},
        )
        documents, embedded, *worker = cursor.fetchone()
    return IndexHealth(
        documents=documents,
        embedded=embedded,
        coverage=round(embedded / documents, 4) if documents else 1.0,
        model=model_id,
        worker=_worker_health(
            Worker(name=EMBEDDING_WORKER, **dict(zip(_WORKER_COLUMNS, worker, strict=True))) if worker[0] else None,
            documents - embedded,
        ),
    )


def worker_health(backlog: int) -> WorkerHealth | None:
    """The embedding worker as its supervisor last recorded it; None when no
    supervisor ever ran (`embed --watch` started by hand, or not at all)."""
    return _worker_health(Worker.objects.filter(name=EMBEDDING_WORKER).first(), backlog)


def _worker_health(worker: Worker | None, backlog: int) -> WorkerHealth | None:
    if worker is None:
        return None
    state = worker.state
    silent = timezone.now() - worker.heartbeat_at > timedelta(seconds=3 * HEARTBEAT_SECONDS)
    if state != WorkerState.STOPPED and silent:
        state = "unknown"  # its supervisor is gone without a word (killed)
    return WorkerHealth(
        state=state,
        restarts=worker.restarts,
        last_error=worker.last_error or None,
        last_error_at=worker.last_error_at,
        heartbeat_at=worker.heartbeat_at,
        backlog=backlog,
    )


def _recount_in_background(key: HealthKey) -> None:
    now = time.monotonic()
    with _health_lock:
        started = _health_refreshing.get(key)
        if started is not None and now - started < HEALTH_MAX_AGE_SECONDS:
            return
        if started is not None:
            logger.warning(
                "The index health recount started %.0f s ago never finished; starting another", now - started
            )
        _health_refreshing[key] = now

    def recount() -> None:
        alias, name, model_id, products = key
        try:
            with db.reading(alias):  # a thread starts unpinned: count where the search counted
                if db.connection().settings_dict["NAME"] != name:  # not this process's database: count on the next call
                    _health_cache.pop(key, None)
                    return
                _health_cache[key] = (time.monotonic(), _count_health(model_id, products))
        except Exception:  # the last figure stays; the next search tries again
            logger.warning("Counting the embedded records failed", exc_info=True)
        finally:
            connections.close_all()  # this thread's own connections
            done()

    def done() -> None:
        with _health_lock:
            if _health_refreshing.get(key) == now:  # not a later recount's mark
                del _health_refreshing[key]

    try:
        threading.Thread(target=recount, name="search-index-health", daemon=True).start()
    except RuntimeError:  # no thread to be had: the next search tries again
        logger.warning("Could not start the index health recount", exc_info=True)
        done()
