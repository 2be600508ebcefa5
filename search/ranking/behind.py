"""Kept statistics refreshed behind the request that finds them stale.

The corpus statistics (search.ranking.statistics) and a team member's common
words (search.ranking.counting.sample_words) are read every CACHE_SECONDS
from a sample of up to 20,000 records: about 230 ms at 30,000 records
(docs/benchmarks.md). The request that finds them stale answers with them as
they are, seconds old, and a thread of its own reads them again; one at a time
per figure. A refresh that fails forgets what was kept, so that the next
request reads the figures itself and meets the error as every statement does;
figures older than STALE_AT_MOST (a refresh that hangs on a server that went
silent) are read by the request itself again.
"""

import logging
import threading
from collections.abc import Callable, Hashable

from django.db import connections

from search import db

log = logging.getLogger(__name__)
_running: set[Hashable] = set()
_lock = threading.Lock()
STALE_AT_MOST = 300.0  # seconds: ten CACHE_SECONDS


def answer_stale(age: float, cache_seconds: float) -> bool | None:
    """For kept figures `age` seconds old: None while fresh; True when stale enough to be read
    again behind the request (it answers with them); False when too old to answer with."""
    if age < cache_seconds:
        return None
    return age < STALE_AT_MOST


def refresh(key: Hashable, alias: str, read: Callable[[], object], forget: Callable[[], None]) -> None:
    """Run `read` (which keeps what it reads) on a thread reading from `alias`, unless
    one runs for `key` already; on failure, `forget`."""
    with _lock:
        if key in _running:
            return
        _running.add(key)
    threading.Thread(target=_run, args=(key, alias, read, forget), name="statistics-refresh", daemon=True).start()


def _run(key: Hashable, alias: str, read: Callable[[], object], forget: Callable[[], None]) -> None:
    try:
        with db.reads_from(alias):
            read()
    except Exception:
        forget()
        log.warning("refreshing the search statistics failed; the next search reads them itself", exc_info=True)
    finally:
        connections[alias].close()  # this thread's own connection
        with _lock:
            _running.discard(key)


def running() -> bool:
    """Whether a refresh is under way (tests wait for it)."""
    with _lock:
        return bool(_running)
