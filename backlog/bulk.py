"""Bulk reads by key and the bulk upsert that import uses: the raw SQL, in one place.

Django's PostgreSQL backend binds parameters on the client, so `key__in`
with ten thousand keys, or `bulk_create` of ten thousand rows, spends most of
its time quoting values in Python. Here the keys travel as one array
parameter bound by the server, and rows arrive by COPY into a temporary
table, followed by one `INSERT ... SELECT ... ON CONFLICT (upper(key)) DO UPDATE`
(the shape Wagtail uses for its index upsert). Same transaction as the
caller: these run on Django's connection.
"""

from collections.abc import Iterable, Sequence

import psycopg
from django.db import connection
from psycopg import sql
from psycopg.types.json import Jsonb

# Rows an import writes in one statement, and an export reads in one fetch.
BATCH_SIZE = 5000


def _cursor() -> psycopg.Cursor:
    connection.ensure_connection()
    # A plain psycopg cursor binds on the server (Django's is a ClientCursor).
    return psycopg.Cursor(connection.connection)


def select_by_keys(query: str, keys: Sequence[str]) -> list[tuple]:
    """Run `query`, whose one parameter is the array of keys (`= ANY(%s)`)."""
    with _cursor() as cursor:
        cursor.execute(query, [list(keys)])
        return cursor.fetchall()


def duplicate_chains(ids: Sequence[int]) -> dict[int, tuple[str, int | None]]:
    """The bugs on the duplicate_of chains that start at `ids`: id -> (key,
    the id it is a duplicate of). One statement; UNION (not UNION ALL) stops
    at a row already found, so even a circle that two racing writes stored
    ends the walk."""
    query = """
        WITH RECURSIVE chain(id, key, duplicate_of_id) AS (
            SELECT id, key, duplicate_of_id FROM backlog_bug WHERE id = ANY(%s)
            UNION
            SELECT b.id, b.key, b.duplicate_of_id FROM backlog_bug b JOIN chain c ON b.id = c.duplicate_of_id
        )
        SELECT id, key, duplicate_of_id FROM chain
    """
    with _cursor() as cursor:
        cursor.execute(query, [list(ids)])
        return {pk: (key, target) for pk, key, target in cursor.fetchall()}


def set_links(table: str, column: str, pairs: Sequence[tuple[int, int]]) -> None:
    """Set `column` of the rows of `table` whose id is each pair's first
    value to its second: one statement for all of them."""
    ids, targets = zip(*pairs, strict=True) if pairs else ((), ())
    with _cursor() as cursor:
        cursor.execute(
            sql.SQL(
                "UPDATE {table} t SET {column} = v.target FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, target) "
                "WHERE t.id = v.id"
            ).format(table=sql.Identifier(table), column=sql.Identifier(column)),
            [list(ids), list(targets)],
        )


def upsert(
    table: str, columns: Sequence[str], rows: Iterable[Sequence], json_columns: Iterable[str] = ()
) -> dict[str, tuple[int, bool]]:
    """Insert or update `rows` by `key` (the first column); return key ->
    (id, whether this statement inserted the row rather than updated it).

    Columns not named keep their stored values on update (and their
    defaults on insert). Inserted or updated is what happened, not what was
    planned: a concurrent import may have inserted the row first (then ON
    CONFLICT waits for it and updates).
    """
    assert columns[0] == "key"
    json_columns = set(json_columns)
    json_positions = [i for i, name in enumerate(columns) if name in json_columns]
    staging = sql.Identifier(f"_import_{table}")
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    updates = sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name)) for name in columns[1:])
    with _cursor() as cursor:
        cursor.execute(
            sql.SQL("CREATE TEMP TABLE {staging} ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA").format(
                staging=staging, names=names, table=sql.Identifier(table)
            )
        )
        with cursor.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(staging, names)) as copy:
            for row in rows:
                if json_positions:
                    row = list(row)
                    for position in json_positions:
                        row[position] = Jsonb(row[position])
                copy.write_row(row)
        cursor.execute(
            sql.SQL(
                "INSERT INTO {table} ({names}) SELECT {names} FROM {staging} "
                # xmax is 0 on a row version this statement inserted.
                # upper(key): the table's one unique index on keys (models.unique_key).
                # With a second one, an insert racing another import's could
                # fail on the index ON CONFLICT does not watch.
                "ON CONFLICT (upper(key)) DO UPDATE SET {updates} RETURNING key, id, xmax = 0"
            ).format(table=sql.Identifier(table), names=names, staging=staging, updates=updates)
        )
        ids = {key: (pk, inserted) for key, pk, inserted in cursor.fetchall()}
        cursor.execute(sql.SQL("DROP TABLE {}").format(staging))
    return ids
