"""Facets: how many of the matches are of each kind, product, status and severity.

Counted in SQL over a match set (`FACETS_SQL`), as plain dicts while the
arms and fusion add them up (`{"kind": {"bug": 3}, "product": {"12": 3}}`,
products by id), and turned into the contract's `Facets`, products by key,
once, for the response.
"""

from search import db
from search.contract import FacetCount, Facets
from search.ranking import layout

Counts = dict[str, dict[str, int]]
NAMES = ("kind", "product", "status", "severity")

# One pass over `source` (columns kind, product_id, status, severity), one
# group per value of each column. GROUPING(column) is 0 in the groups of
# that column, which names the facet; rows without a status or severity
# form a NULL group, which is no facet value.
FACETS_SQL = """
    SELECT json_agg(json_build_array(g.facet, g.value, g.c))
    FROM (SELECT CASE WHEN GROUPING(kind) = 0 THEN 'kind' WHEN GROUPING(product_id) = 0 THEN 'product'
                      WHEN GROUPING(status) = 0 THEN 'status' ELSE 'severity' END AS facet,
                 coalesce(kind, product_id::text, status, severity) AS value, count(*) AS c
          FROM {source} GROUP BY GROUPING SETS ((kind), (product_id), (status), (severity))) g
"""


def grouped(rows) -> list[tuple[str, str, int]]:
    """FACETS_SQL's rows, counted here from the (kind, product_id, status,
    severity) `rows` themselves: for rows gathered from a distributed
    table's shards, which Citus would otherwise group in a step of its own."""
    counts: dict[tuple[str, str], int] = {}
    for kind, product_id, status, severity in rows:
        for facet, value in (("kind", kind), ("product", product_id), ("status", status), ("severity", severity)):
            if value is not None:
                counts[facet, str(value)] = counts.get((facet, str(value)), 0) + 1
    return [(facet, value, count) for (facet, value), count in counts.items()]


def empty() -> Counts:
    return {name: {} for name in NAMES}


def from_rows(rows, scale: float = 1.0) -> Counts:
    """FACETS_SQL's array as Counts, each count multiplied by `scale` (a sample's)."""
    counts = empty()
    for facet, value, count in rows or []:
        if value is not None:
            counts[facet][value] = round(count * scale)
    return counts


def add(counts: Counts, kind: str, product_id: int, status: str | None, severity: str | None) -> None:
    """Count one row (the semantic arm counts its rows in Python)."""
    for facet, value in (("kind", kind), ("product", str(product_id)), ("status", status), ("severity", severity)):
        if value:
            counts[facet][value] = counts[facet].get(value, 0) + 1


def merged(counts: Counts, more: Counts) -> Counts:
    """`counts` with `more` added in."""
    for facet, values in more.items():
        for value, count in values.items():
            counts[facet][value] = counts[facet].get(value, 0) + count
    return counts


def of_rows(ids: list[int]) -> Counts:
    """Facets of the given index rows."""
    if not ids:
        return empty()
    rows = "SELECT kind, product_id, status, severity FROM search_document WHERE id = ANY(%(ids)s)"
    with db.cursor() as cursor:
        if layout.distributed():  # the rows, grouped here (Citus would group them in a subplan of its own)
            cursor.execute(rows, {"ids": ids})
            return from_rows(grouped(cursor.fetchall()))
        cursor.execute(f"WITH x AS MATERIALIZED ({rows}) {FACETS_SQL.format(source='x')}", {"ids": ids})
        return from_rows(cursor.fetchone()[0])


def response(counts: Counts) -> Facets:
    """The contract's Facets: values with a count, most first; products by key."""
    product_ids = [int(p) for p in counts["product"]]
    with db.cursor() as cursor:
        cursor.execute("SELECT id, key FROM backlog_product WHERE id = ANY(%(ids)s)", {"ids": product_ids})
        keys = {str(pk): key for pk, key in cursor.fetchall()}

    def listed(values: dict[str, int], names=None) -> list[FacetCount]:
        items = [FacetCount(value=(names or {}).get(v, v), count=c) for v, c in values.items() if c > 0]
        return sorted(items, key=lambda f: (-f.count, f.value))

    return Facets(
        kind=listed(counts["kind"]),
        product=listed(counts["product"], keys),
        status=listed(counts["status"]),
        severity=listed(counts["severity"]),
    )
