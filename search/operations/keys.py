"""The keys of what index rows point to, read from the record tables by id.

One server joins them into the statement that reads the index rows. On a
distributed index (search.ranking.layout) the record tables stay on the
coordinator: Citus would send each one joined to every shard in a subplan
of its own, and refuses a subquery of one for each shard's row. So there
the rows come first and their keys after, in one statement.
"""

from search import db


def of(products=(), features=(), bugs=()) -> dict[str, dict[int, str]]:
    """{"product": id -> key, "feature": id -> key, "duplicate_of": bug id ->
    the key of the bug it duplicates} of the given ids (None among them: none)."""
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT 'product', id, key FROM backlog_product WHERE id = ANY(%(products)s) "
            "UNION ALL SELECT 'feature', id, key FROM backlog_feature WHERE id = ANY(%(features)s) "
            "UNION ALL SELECT 'duplicate_of', b.id, m.key FROM backlog_bug b "
            "JOIN backlog_bug m ON m.id = b.duplicate_of_id WHERE b.id = ANY(%(bugs)s)",
            {
                name: sorted({i for i in ids if i is not None})
                for name, ids in (("products", products), ("features", features), ("bugs", bugs))
            },
        )
        found: dict[str, dict[int, str]] = {"product": {}, "feature": {}, "duplicate_of": {}}
        for kind, pk, key in cursor.fetchall():
            found[kind][pk] = key
    return found


# The relations `of` reads, and the argument each takes its ids by.
_ARGUMENTS = {"product": "products", "feature": "features", "duplicate_of": "bugs"}


def name(rows, **fields: str) -> None:
    """In each of `rows` (dicts), the ids under `fields[relation]` (relation:
    product, feature or duplicate_of, which holds the bug's own id) replaced
    by the keys `of` reads for them, in one statement (none without rows)."""
    rows = list(rows)
    if not rows:
        return
    found = of(**{_ARGUMENTS[relation]: [row[field] for row in rows] for relation, field in fields.items()})
    for row in rows:
        for relation, field in fields.items():
            row[field] = found[relation].get(row[field])
