"""Index health: how complete the vector index is, and how its worker fares.

Every search response carries it (`index`), and the dashboard shows it.
"""

import hashlib
import logging
import math
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
HEALTH_TTL_SECONDS = 5.0
# No figure older than this is shown: past it a search counts itself (a
# background recount that never came back is given up and started again).
HEALTH_MAX_AGE_SECONDS = 60.0
LARGE_INDEX = 2_000
# Which figures this process last found above LARGE_INDEX, by cache key: those
# are read from the shared cache; the others counted on every call.
_large: dict[str, bool] = {}


def index_health(products: tuple[int, ...] | None = None) -> IndexHealth:
    """How complete the vector index is for the active model: over the
    records of `products` when given (a user who sees only those: no figure
    counts a record they cannot see), else over all records. One figure for
    every process: /readyz, the search page, REST and MCP all call this.

    Counting is a scan of the whole index table (about 50 ms at 100,000
    records, 7 ms at 10,000: half of a keyword search there). Up to
    LARGE_INDEX documents every call counts. Above it the figure is kept in
    the shared cache (settings.CACHES, a table of the database), so every
    worker and every app server shows the same one, never one process's
    older count: a call reads it (one indexed row) and, once it is
    HEALTH_TTL_SECONDS old, one process counts again in a background thread
    (stale while revalidating). No search waits for the scan, and the figure
    may lag the embedding worker by a few seconds, never by more than
    HEALTH_MAX_AGE_SECONDS; writes of vectors or records drop it
    (forget_coverage).
    """
    model_id = active_model_id()
    key = _health_key(model_id, products)
    if _large.get(key):
        kept = cache.get(key)
        if kept:
            counted_at, health = kept
            age = time.time() - counted_at
            if age < HEALTH_MAX_AGE_SECONDS:
                if age >= HEALTH_TTL_SECONDS:
                    _recount_in_background(key, model_id, products)
                return health
            logger.warning("The index health figure is %.0f s old; counting it in this request", age)
    return _count_and_keep(key, model_id, products)


def _health_key(model_id: str | None, products: tuple[int, ...] | None) -> str:
    scope = "all" if products is None else hashlib.sha256(repr(products).encode()).hexdigest()[:16]
    return f"search:health:{model_id}:{scope}"


def _count_and_keep(key: str, model_id: str | None, products: tuple[int, ...] | None) -> IndexHealth:
    health = _count_health(model_id, products)
    _large[key] = health.documents > LARGE_INDEX
    if _large[key]:
        cache.set(key, (time.time(), health), 2 * HEALTH_MAX_AGE_SECONDS)
    return health


def coverage_now() -> float:
    """The share of all records with a current vector: /readyz's figure, the search page's."""
    return index_health().coverage


def coverage_text(coverage: float) -> str:
    """A coverage as a percentage that never rounds an incomplete figure up to 100%,
    written the same wherever it is shown (/readyz, the pages)."""
    return f"{math.floor(coverage * 1000) / 10:.1f}%" if coverage < 1 else "100%"


def forget_coverage() -> None:
    """After vectors or records were written: the next call counts all records again
    (a figure over some products is counted again within HEALTH_TTL_SECONDS)."""
    cache.delete(_health_key(active_model_id(), None))


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


def _recount_in_background(key: str, model_id: str | None, products: tuple[int, ...] | None) -> None:
    # One process at a time: the mark expires, so a recount that never came back is started again.
    if not cache.add(f"{key}:recounting", True, HEALTH_MAX_AGE_SECONDS):
        return

    def recount() -> None:
        try:
            _count_and_keep(key, model_id, products)
        except Exception:  # the last figure stays; the next search tries again
            logger.warning("Counting the embedded records failed", exc_info=True)
        finally:
            try:
                cache.delete(f"{key}:recounting")
            finally:
                connections.close_all()  # this thread's own connections

    try:
        threading.Thread(target=recount, name="search-index-health", daemon=True).start()
    except RuntimeError:  # no thread to be had: the next search tries again
        logger.warning("Could not start the index health recount", exc_info=True)
        cache.delete(f"{key}:recounting")
