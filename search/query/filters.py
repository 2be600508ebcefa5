"""The filters, defined once: their names on every surface, and the one SQL they become.

A filter is a request parameter (`status=open,fixed` in REST, MCP and the
staff UI), a field of a `simple` query (`status:open`, search.query.fields),
and a query parameter of the REST record lists (api/filters.py, over the
ORM). The first two compile here, to conditions of a Scope
(search.query.scope); the lists take their names from FILTERS (a test holds
them to it).

kind, status and severity are tokens in search_markers (search.indexing.sql),
answered inside the GIN index the words use; products and features are keys;
dates are bounds.
"""

from dataclasses import dataclass
from datetime import datetime

from search import db
from search.indexing.sql import tokens_for, tokens_tsquery
from search.ranking import layout


@dataclass(frozen=True)
class Filter:
    param: str  # the request parameter
    field: str  # its name in a simple query (`kind:bug`)
    column: str  # the search_document column it narrows
    kind: str  # "token" (search_markers), "key" (a product's or feature's key), "after" or "before" (a time)


FILTERS = {
    f.param: f
    for f in (
        Filter("entities", "kind", "kind", "token"),
        Filter("status", "status", "status", "token"),
        Filter("severity", "severity", "severity", "token"),
        Filter("products", "product", "product_id", "key"),
        Filter("feature", "feature", "feature_id", "key"),
        Filter("created_after", "created", "created_at", "after"),
        Filter("created_before", "created", "created_at", "before"),
        Filter("updated_after", "updated", "updated_at", "after"),
        Filter("updated_before", "updated", "updated_at", "before"),
    )
}
_KEY_TABLES = {"product_id": "backlog_product", "feature_id": "backlog_feature"}


def narrowed(scope, chosen: dict[tuple[str, bool], list], prefix: str):
    """`scope` and every filter in `chosen`, (param, excluded) -> values: the
    values of one filter are alternatives (a time filter's all hold), filters
    all hold; an excluded filter leaves its records out. The token filters kept
    are one tsquery (one probe of the GIN index); `prefix` names the parameters."""
    groups = tuple(
        tokens_for(FILTERS[param].column, values)
        for (param, exclude), values in chosen.items()
        if FILTERS[param].kind == "token" and not exclude
    )
    if groups:
        query = " & ".join(f"({tokens_tsquery(group)})" for group in groups)
        scope = scope.narrowed(
            f"d.search_markers @@ %({prefix}_tokens)s::tsquery", groups, **{f"{prefix}_tokens": query}
        )
    for number, ((param, exclude), values) in enumerate(chosen.items()):
        spec, name = FILTERS[param], f"{prefix}_{number}"
        if spec.kind == "token":
            if exclude:
                tokens = tokens_tsquery(tokens_for(spec.column, values))
                scope = scope.narrowed(f"NOT (d.search_markers @@ %({name})s::tsquery)", **{name: tokens})
        elif spec.kind == "key":
            if layout.distributed():
                condition, params = _by_id(spec.column, list(values), name, exclude)
            else:
                table = _KEY_TABLES[spec.column]
                condition = f"d.{spec.column} IN (SELECT id FROM {table} WHERE key = ANY(%({name})s))"
                params = {name: list(values)}
                if exclude:
                    condition = f"NOT coalesce({condition}, false)"
            scope = scope.narrowed(condition, **params)
        else:  # times that all hold (never excluded)
            operator = ">=" if spec.kind == "after" else "<="
            times = {f"{name}_{i}": _time(value) for i, value in enumerate(values)}
            scope = scope.narrowed(" AND ".join(f"d.{spec.column} {operator} %({t})s" for t in times), **times)
    return scope


def _by_id(column: str, keys: list[str], name: str, exclude: bool) -> tuple[str, dict]:
    """A product or feature filter on a distributed index: the keys' ids read
    first (the record tables stay on the coordinator), so that the filter is
    a condition on the index's own columns. A subquery of a local table
    would be a subplan of its own in every statement, and its products
    would prune no shard; a feature's product prunes them too."""
    product = "id" if column == "product_id" else "product_id"
    with db.cursor() as cursor:
        cursor.execute(f"SELECT id, {product} FROM {_KEY_TABLES[column]} WHERE key = ANY(%s)", [keys])
        rows = cursor.fetchall()
    ids, products = [row[0] for row in rows], sorted({row[1] for row in rows})
    condition = f"d.{column} = ANY(%({name})s::bigint[])"
    if exclude:
        return f"NOT coalesce({condition}, false)", {name: ids}
    if column == "product_id":
        return condition, {name: ids}
    within = f"d.product_id = ANY(%({name}_products)s::bigint[])"
    return f"{condition} AND {within}", {name: ids, f"{name}_products": products}


def _time(value) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)
