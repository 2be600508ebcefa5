"""How the database a search reads lays out search_document: one table, or Citus shards.

On a plain server (and on a Citus coordinator where the table is still
local) every statement of search/ runs as it always has. Where Citus
distributes search_document by product (search/citus.py), a few reads take
another form, each beside the plain one and named for why:

- nothing joins a catalog table (pg_class, pg_stats) to the distributed
  table: the coordinator's table is an empty shell, its statistics are the
  shards' (search.ranking.statistics gathers them), and Citus cannot run
  such a statement ("no binary output function available for type aclitem");
- settings a statement depends on are `SET LOCAL`, passed on to the
  workers' transactions (`citus.propagate_set_commands = 'local'`, set here
  in the same transaction rather than trusted to the database's default);
- counts of several words are one aggregate Citus pushes down to the
  shards, not one subquery each (each would gather its rows on the
  coordinator).

Which layout a database has is learned once per CHECK_SECONDS per database
(per `search.db` alias, as a replica is a database of its own). On a plain
server that costs no statement of its own where a search counts its corpus
anyway (statistics.corpus): that statement carries CITUS_LOADED, which
says the Citus library is not there; elsewhere it is one short statement.
"""

import time

from search import citus, db

CHECK_SECONDS = 60
# (alias, database name) -> (when learned, distributed)
_known: dict[tuple[str, str], tuple[float, bool]] = {}

CITUS_LOADED = citus.LOADED  # carried as a column by a statement that runs anyway


def _key() -> tuple[str, str]:
    return db.alias(), db.connection().settings_dict["NAME"]


def known() -> bool | None:
    """Whether search_document is distributed here, if learned in the last CHECK_SECONDS; else None."""
    at, distributed = _known.get(_key(), (0.0, False))
    return distributed if time.monotonic() - at < CHECK_SECONDS else None


def distributed() -> bool:
    """Whether search_document is a Citus distributed table on the search's database."""
    if (answer := known()) is not None:
        return answer
    with db.cursor() as cursor:
        cursor.execute(f"SELECT {CITUS_LOADED}")
        loaded = cursor.fetchone()[0]
    return note_citus(loaded)


def note_citus(loaded: bool) -> bool:
    """What a statement that carried CITUS_LOADED learned. Without the
    library nothing is distributed; with it, the Citus catalogs say (two
    statements, on a Citus server only, once per CHECK_SECONDS)."""
    if not loaded:
        return _remember(False)
    if (answer := known()) is not None:
        return answer
    with db.cursor() as cursor:  # loaded, but this database may have no Citus
        return _remember(citus.installed(cursor) and citus.distributed(cursor))


def _remember(distributed: bool) -> bool:
    _known[_key()] = (time.monotonic(), distributed)
    return distributed


def set_local(cursor, *settings: str) -> None:
    """`SET LOCAL` each of `settings` ("name = value") in one round trip
    (a statement without parameters may hold several). On a distributed
    table the workers get them too, in this transaction; a plain server
    gets exactly the SET LOCAL statements it always has."""
    statements = [f"SET LOCAL {setting}" for setting in settings]
    if distributed():
        statements.insert(0, "SET LOCAL citus.propagate_set_commands = 'local'")
    cursor.execute("; ".join(statements))
