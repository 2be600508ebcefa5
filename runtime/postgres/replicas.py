"""Read replicas: searches and record reads on a standby, writes on the primary.

`DATABASE_REPLICA_URLS` (settings) adds one alias per streaming standby
(replica1, replica2, ...) and installs `ReplicaRouter`; without it there is
no router and every query goes to "default", as before.

Where a read goes (`read_alias`):

- reads pinned to one alias (search.db.reads_from) stay there: search.db
  pins each search to one database, its raw SQL and its ORM reads alike;
- the primary, when this unit of work must see its own writes: it wrote a
  record through the ORM, or it is an unsafe HTTP request (POST, PUT,
  PATCH, DELETE: it reads the rows it is about to change), or it is inside
  a transaction on the primary;
- else a replica no more than DATABASE_REPLICA_MAX_LAG seconds behind,
  picked at random among those that are; else the primary.

Only the records' and the index's apps are replicated reads. Sessions,
users and tokens, and the cache table, are read from the primary, and the
rate limit counts on the primary's connection itself (search.ratelimit):
a login or a count must see the write just made, even if it was made by
another request a millisecond ago.

How far behind a replica is, is asked at most every LAG_CHECK_SECONDS per
process (`lag`): two small queries, not one per request.
"""

import logging
import math
import random
import time
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from search import db

logger = logging.getLogger(__name__)

PRIMARY = DEFAULT_DB_ALIAS
REPLICATED_APPS = frozenset({"backlog", "search"})
LAG_CHECK_SECONDS = 1.0

_primary_only: ContextVar[bool] = ContextVar("replicas_primary_only", default=False)
_checked: dict[str, tuple[float, bool]] = {}  # alias -> (when asked, fresh enough)


class ReplicaRouter:
    def db_for_read(self, model, **hints):
        return read_alias() if model._meta.app_label in REPLICATED_APPS else PRIMARY

    def db_for_write(self, model, **hints):
        if model._meta.app_label in REPLICATED_APPS:
            # From here on this request (or, outside one, this thread) reads its own writes.
            _primary_only.set(True)
        return PRIMARY

    def allow_relation(self, obj1, obj2, **hints):
        return True  # the replicas are copies of the primary: one database

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == PRIMARY  # a standby takes its schema from the primary's WAL


def read_alias() -> str:
    """The alias a read goes to now (the module's docstring has the rules)."""
    if pinned := db.pinned():
        return pinned
    if _primary_only.get() or connections[PRIMARY].in_atomic_block:
        return PRIMARY
    fresh = [alias for alias in settings.DATABASE_REPLICAS if _fresh(alias)]
    return random.choice(fresh) if fresh else PRIMARY


@contextmanager
def request_reads(method: str):
    """One HTTP request's reads: from the primary throughout when its method
    may write, or once it has written; the next request starts afresh."""
    token = _primary_only.set(method not in ("GET", "HEAD", "OPTIONS", "TRACE"))
    try:
        yield
    finally:
        _primary_only.reset(token)


def _fresh(alias: str) -> bool:
    at, fresh = _checked.get(alias, (-math.inf, True))
    if time.monotonic() - at < LAG_CHECK_SECONDS:
        return fresh
    was, behind = fresh, lag(alias)
    fresh = behind is not None and behind <= settings.DATABASE_REPLICA_MAX_LAG
    if fresh != was:  # said when it changes, not at every check
        if behind is None:
            logger.warning("Replica %s does not answer as a standby: reading from the primary", alias)
        elif not fresh:
            logger.warning("Replica %s is %.1f s behind the primary: reading from the primary", alias, behind)
        else:
            logger.warning("Replica %s has caught up: reading from it again", alias)
    _checked[alias] = (time.monotonic(), fresh)
    return fresh


def lag(alias: str) -> float | None:
    """Seconds `alias` is behind the primary; None if it cannot say (down,
    or not a standby: a promoted one no longer follows the primary).

    0 when it has replayed all the primary had written when asked (the
    LSNs). Otherwise the age of the last transaction it replayed: while the
    primary writes steadily that is the lag itself; after a quiet spell it
    overstates it until the replica catches up (one check later), which
    sends reads to the primary a moment too long, never to a stale replica.
    """
    try:
        with connections[PRIMARY].cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()")
            written = cursor.fetchone()[0]
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn() >= %s::pg_lsn, "
                "extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())",
                [written],
            )
            standby, caught_up, age = cursor.fetchone()
    except DatabaseError:
        logger.info("Replica %s did not answer", alias, exc_info=True)
        return None
    if not standby:
        return None
    return 0.0 if caught_up else float(age if age is not None else math.inf)
