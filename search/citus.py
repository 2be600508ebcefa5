"""Citus: the same schema, laid out across a cluster by product.

On a plain PostgreSQL nothing here runs. On a Citus coordinator (the
`citus` extension installed in the database), `migrate` calls `distribute()`
(migration 0017), and `manage.py distribute` does the same for a database
that was migrated before it moved onto a cluster. What it does, and why:

- `search_document`, the one large table, is distributed by `product_id`
  (Citus' multi-tenant layout, the product as tenant): the access scope and
  the product filter name products, so Citus prunes a search to the shards
  that hold them, and a one-product search is routed to one shard.
- Citus wants every primary key and unique constraint of a distributed
  table to hold the distribution column. The primary key becomes
  `(id, product_id)`; `unique(kind, record_id)` gives way to the
  `unique(kind, record_id, product_id)` that every server has (the index
  triggers' upsert arbiter, search.indexing.sql); `unique(key)` becomes a
  plain index: keys stay unique in the record tables, the source of truth.
- The record tables (products, features, tests, bugs), the product teams
  and every other table stay local on the coordinator: they are small,
  their foreign keys and the importer stay as they are, and Citus refuses a
  reference table with triggers (the index triggers are on them). A search
  that joins one of them gets it as a small intermediate result.
- The shard count is chosen here once (`CITUS_SHARD_COUNT`; default two a
  worker, at least four): every statement that is not pruned to a few
  shards asks every shard, so fewer, larger shards answer faster, and
  Citus cannot change the count later of a table with an identity column.
"""

import contextlib
from dataclasses import dataclass, field

from django.conf import settings

TABLE = "search_document"
COLUMN = "product_id"
# SQL any statement may carry, costing nothing: whether the Citus library is loaded
# (it defines citus.version); only then is there anything to ask of Citus' catalogs.
LOADED = "current_setting('citus.version', true) IS NOT NULL"
NEW_KEY = "search_document_id_product"  # the new primary key's index, built ahead by `manage.py distribute`


@dataclass
class Layout:
    """What `distribute()` found and did, in words `migrate` prints."""

    done: list[str] = field(default_factory=list)

    def __str__(self):
        return "; ".join(self.done) or "nothing to do"


def installed(cursor) -> bool:
    """Whether this database is a Citus coordinator (the extension is installed in it)."""
    cursor.execute("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    return cursor.fetchone()[0]


def distributed(cursor, table: str = TABLE) -> bool:
    cursor.execute("SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s))", [table])
    return cursor.fetchone()[0]


def shard_count(cursor) -> int:
    """CITUS_SHARD_COUNT, or two shards a worker (at least four)."""
    if settings.CITUS_SHARD_COUNT:
        return settings.CITUS_SHARD_COUNT
    cursor.execute("SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND shouldhaveshards")
    return max(4, 2 * cursor.fetchone()[0])


def _constraints(cursor, table: str) -> dict[str, tuple[str, list[str]]]:
    """The table's primary key and unique constraints: name -> (type, columns)."""
    cursor.execute(
        """SELECT c.conname, c.contype, array_agg(a.attname ORDER BY k.n)
             FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY k(attnum, n), pg_attribute a
            WHERE c.conrelid = to_regclass(%s) AND c.contype IN ('p', 'u')
              AND a.attrelid = c.conrelid AND a.attnum = k.attnum
            GROUP BY c.conname, c.contype""",
        [table],
    )
    return {name: (kind, list(columns)) for name, kind, columns in cursor.fetchall()}


def distribute(cursor, step=None) -> Layout:
    """Lay `search_document` out across the cluster (idempotent: a table
    already distributed is left as it is). create_distributed_table copies
    rows already there into the shards.

    `step`: a context manager each of the three steps runs in (the caller's
    transaction when None). `manage.py distribute` gives each its own
    transaction, so that only the copy blocks writes, and nothing blocks
    reads for long: the constraints change in a moment; the copy runs
    without the HNSW index (a graph built row by row as rows arrive cost
    six times the copy), which is built on the shards afterwards, while
    searches go on without it (their semantic arm then reads each shard's
    rows, slower but whole)."""
    layout = Layout()
    if not installed(cursor):
        return layout
    if distributed(cursor):
        layout.done.append(f"{TABLE} is distributed by {COLUMN} already")
        propagate_settings(cursor)
        return layout
    concurrently = step is not None  # autocommit between the steps: indexes made and dropped blocking no one
    if concurrently:
        cursor.execute(f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {NEW_KEY} ON {TABLE} (id, {COLUMN})")
    step = step or contextlib.nullcontext
    with step():
        _relax_constraints(cursor, layout)
    vector_indexes = _vector_indexes(cursor)
    for name in vector_indexes:  # ahead of the copy: a DROP INDEX in its transaction would block reads to the end
        cursor.execute(f'DROP INDEX {"CONCURRENTLY " if concurrently else ""}"{name}"')
    with step():
        shards = shard_count(cursor)
        cursor.execute("SELECT create_distributed_table(%s, %s, shard_count := %s)", [TABLE, COLUMN, shards])
        # The rows already there were copied into the shards; the coordinator's own copy goes.
        cursor.execute("SELECT truncate_local_data_after_distributing_table(%s)", [TABLE])
        cursor.execute(
            "SELECT count(DISTINCT nodename || ':' || nodeport) FROM citus_shards WHERE table_name = to_regclass(%s)",
            [TABLE],
        )
        nodes = cursor.fetchone()[0]
        layout.done.append(f"{TABLE} distributed by {COLUMN}: {shards} shards on {nodes} node(s)")
        layout.done.append("every other table local on the coordinator")
    with step():
        for definition in vector_indexes.values():
            cursor.execute(definition)
        propagate_settings(cursor)
        layout.done.append("SET LOCAL reaches the workers (citus.propagate_set_commands = local)")
    return layout


def _relax_constraints(cursor, layout: Layout) -> None:
    """The primary key and unique constraints with the distribution column, as Citus wants them."""
    for name, (kind, columns) in _constraints(cursor, TABLE).items():
        if COLUMN in columns:
            continue
        if kind == "p":
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [NEW_KEY])
            built = cursor.fetchone()[0] and columns == ["id"]
            new = f"USING INDEX {NEW_KEY}" if built else f"({', '.join(columns)}, {COLUMN})"
            cursor.execute(f'ALTER TABLE {TABLE} DROP CONSTRAINT "{name}", ADD CONSTRAINT "{name}" PRIMARY KEY {new}')
            layout.done.append(f"primary key ({', '.join(columns)}) -> ({', '.join(columns)}, {COLUMN})")
        elif columns == ["key"]:
            cursor.execute(f'ALTER TABLE {TABLE} DROP CONSTRAINT "{name}"')
            layout.done.append("unique (key) -> the plain index on upper(key) (keys are unique in the record tables)")
        else:  # unique (kind, record_id): the (kind, record_id, product_id) beside it holds the rows
            cursor.execute(f'ALTER TABLE {TABLE} DROP CONSTRAINT "{name}"')
            layout.done.append(f"unique ({', '.join(columns)}) dropped: unique (..., {COLUMN}) holds it")


def _vector_indexes(cursor) -> dict[str, str]:
    """The table's HNSW indexes: name -> the statement that makes it again."""
    cursor.execute(
        """SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x
             JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
            WHERE x.indrelid = to_regclass(%s) AND a.amname = 'hnsw'""",
        [TABLE],
    )
    return dict(cursor.fetchall())


def propagate_settings(cursor) -> None:
    """SET LOCAL on the coordinator passed on to the shards' transactions, in this
    session and every later one: the semantic arm's hnsw.ef_search and
    hnsw.iterative_scan and the typo probe's pg_trgm threshold are SET LOCAL,
    and without this the workers would search with their defaults."""
    cursor.execute("SET citus.propagate_set_commands = 'local'")
    cursor.execute("SELECT current_database()")
    database = cursor.fetchone()[0].replace('"', '""')
    cursor.execute(f"ALTER DATABASE \"{database}\" SET citus.propagate_set_commands = 'local'")


def unreachable_workers(cursor) -> list[str]:
    """The workers that do not answer now, as host:port (readyz names them).
    Each is given two seconds to connect: a stopped one refuses at once."""
    cursor.execute("SET LOCAL citus.node_connection_timeout = 2000")
    cursor.execute(
        "SELECT nodename || ':' || nodeport FROM run_command_on_workers('SELECT 1') WHERE NOT success ORDER BY 1"
    )
    return [row[0] for row in cursor.fetchall()]
