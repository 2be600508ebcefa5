"""The database a search reads: chosen once per call, used by every statement.

Most of search's SQL runs through raw cursors, which no database router
sees. So service opens each operation with `reading()`, which takes the
router's choice for a read (a replica that is caught up, or the primary:
runtime.postgres.replicas) and pins the call to it: every statement here
(`cursor()`, `atomic()`) and every ORM read of the call run on that one
database. Without read replicas, and for a caller that skips service
(search_eval, a shell), it is the primary, "default".

Per-database caches (search.ranking.statistics, search.indexing.health) are keyed by `alias()`.
"""

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from runtime.postgres import replicas


def reading(alias: str | None = None):
    """Pin the block's reads to `alias`, or to where a read goes now; a block
    already pinned keeps its database."""
    return replicas.reads_from(alias or replicas.read_alias())


def alias() -> str:
    return replicas.pinned() or DEFAULT_DB_ALIAS


def connection():
    return connections[alias()]


def cursor():
    return connection().cursor()


def atomic():
    """A transaction on the search's database: for settings local to it (SET LOCAL)."""
    return transaction.atomic(using=alias())
