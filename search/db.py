"""The database a search reads: chosen once per call, used by every statement.

Most of search's SQL runs through raw cursors, which no database router
sees. So service opens each operation with `reading()`, which takes the
router's choice for a read of the index (a replica that is caught up, or
the primary: runtime.postgres.replicas, installed as Django's router when
there are replicas) and pins the call to it (`reads_from`): every statement
here (`cursor()`, `atomic()`) and every ORM read of the call run on that
one database, as the router sends pinned reads there too. Without read
replicas, and for a caller that skips service (search_eval, a shell), it
is the primary, "default".

Per-database caches (search.ranking.statistics, search.indexing.health) are keyed by `alias()`.
"""

from contextlib import contextmanager
from contextvars import ContextVar

from django.db import DEFAULT_DB_ALIAS, connections, router, transaction

from search.models import Document

_pinned: ContextVar[str | None] = ContextVar("replicas_pinned", default=None)


def reading(alias: str | None = None):
    """Pin the block's reads to `alias`, or to where a read goes now; a block
    already pinned keeps its database."""
    return reads_from(alias or pinned() or router.db_for_read(Document))


@contextmanager
def reads_from(alias: str):
    """Every read in the block on `alias`: the ORM's (through the router)
    and raw SQL that asks `pinned()`."""
    token = _pinned.set(alias)
    try:
        yield alias
    finally:
        _pinned.reset(token)


def pinned() -> str | None:
    return _pinned.get()


def alias() -> str:
    return pinned() or DEFAULT_DB_ALIAS


def connection():
    return connections[alias()]


def cursor():
    return connection().cursor()


def atomic():
    """A transaction on the search's database: for settings local to it (SET LOCAL)."""
    return transaction.atomic(using=alias())
