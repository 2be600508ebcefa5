"""Which index rows a search may consider: the request's filters and the access rule.

A `Scope` is one SQL condition over `search_document d` with named
parameters. Every statement of every arm, count, facet and snippet adds it to
its own WHERE, so all of them see exactly the rows the user may see and the
filters keep. Filters and access only remove rows, never add them.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from backlog import access
from search import db
from search.contract import SearchError, SearchRequest
from search.query.filters import FILTERS, narrowed


@dataclass(frozen=True)
class Scope:
    where: str = "TRUE"
    params: dict = field(default_factory=dict)  # every name starts with "scope_"
    # No filter and no access rule: corpus-wide statistics may decide for it.
    everything: bool = True
    # The products the user may see (None: all). The keyword arm's statistics
    # (N, document frequencies) are counted over them, so that no score,
    # order or plan depends on records the user cannot see.
    products: tuple[int, ...] | None = None
    # Narrowed by the request's filters: the statistics (over all the user
    # may see) then overstate the matches in scope.
    filtered: bool = False
    # The filters on kind, status and severity as the tokens they keep
    # (search.indexing.sql.FILTER_PREFIXES), one group per filter: the share of the
    # records they keep is estimated from the column statistics
    # (search.ranking.statistics.filter_share).
    token_groups: tuple[tuple[str, ...], ...] = ()
    # Some filter is not a token (a feature, a date, a product): the share is unknown.
    untokened: bool = False

    def words(self, tsquery: str, alias: str = "d") -> str:
        """SQL: the row matches `tsquery` (SQL of a tsquery), asked of the index
        that holds only the words of the products this scope may see
        (words_match). Every statement that finds rows by their words uses it."""
        return words_match(tsquery, None if self.products is None else "%(scope_access)s::bigint[]", alias)

    def narrowed(self, condition: str, tokens: tuple[tuple[str, ...], ...] = (), **params) -> "Scope":
        """This scope and `condition` (its parameters named scope_*); `tokens`:
        the token groups `condition` keeps (none: a condition of another kind)."""
        return Scope(
            f"({self.where}) AND ({condition})",
            {**self.params, **params},
            everything=False,
            products=self.products,
            filtered=True,
            token_groups=self.token_groups + tokens,
            untokened=self.untokened or not tokens,
        )


def access_scope(user) -> Scope:
    """Rows the user may see: backlog.access's rule (the one the ORM readers
    use too, through `visible`) as a condition on the search index. A
    statement that matches words asks for them through `Scope.words`, on the
    index of the user's products' words alone."""
    product_ids = access.visible_product_ids(user)
    if product_ids is None:
        return Scope()
    return Scope(
        "d.product_id = ANY(%(scope_access)s)",
        {"scope_access": list(product_ids)},
        everything=False,
        products=tuple(product_ids),
    )


def words_match(tsquery: str, products: str | None, alias: str = "d") -> str:
    """SQL: the row `alias` matches `tsquery` (SQL of a tsquery). Over the
    records of `products` (SQL of a bigint[]; None: every product), it is
    asked of search_scoped, whose lexemes carry their product
    (search.indexing.sql): phrases, prefixes and weights match there as on
    search_vector, and the index holds nothing of other products' records to
    walk or to estimate from. The caller keeps the rule on product_id beside
    it: a negation (`!'crash'`) holds for other products' records too."""
    if products is None:
        return f"{alias}.search_vector @@ {tsquery}"
    return f"{alias}.search_scoped @@ search_scoped_query({tsquery}, {products})"


# Keys left out of every scope built in this context (search_eval: the report
# a query was taken from, as the judged-set format asks).
_left_out: ContextVar[tuple[str, ...]] = ContextVar("left_out", default=())


@contextmanager
def leaving_out(keys: Iterator[str]) -> Iterator[None]:
    """Within this block, every search scope leaves the records `keys` out:
    not ranked, not counted, not read by any arm (search_eval's `exclude`)."""
    token = _left_out.set(tuple(keys))
    try:
        yield
    finally:
        _left_out.reset(token)


NAMED_MAX = 20  # products an error lists by name


def named_keys(kind: str, values: list[str], products) -> tuple[list[str], str | None]:
    """The keys of the products or features named by key or name (either case)
    among those of `products` (None: all); and the first value that names
    none of them (None when every one does): a product the user may not see
    is named by no value, as one that does not exist."""
    table = "backlog_product" if kind == "product" else "backlog_feature"
    product = "id" if kind == "product" else "product_id"
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT v, r.key FROM unnest(%(values)s::text[]) v JOIN {table} r "
            "ON upper(r.key) = upper(v) OR lower(r.name) = lower(v) "
            f"WHERE %(visible)s::bigint[] IS NULL OR r.{product} = ANY(%(visible)s) ORDER BY r.key",
            {"values": values, "visible": list(products) if products is not None else None},
        )
        found = cursor.fetchall()
    named = {value for value, _ in found}
    unknown = next((value for value in values if value not in named), None)
    return list(dict.fromkeys(key for _, key in found)), unknown


def not_named(kind: str, value: str, products) -> str:
    """Why `value` names no product (or feature) the user may see, listing the products they may."""
    if kind == "feature":
        return (
            f'no feature you can see has the key or name "{value}"; give a feature\'s key (FEAT-12) or its whole '
            f"name in quotes, or search kind:feature {value} to find it"
        )
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT key, name FROM backlog_product WHERE %(visible)s::bigint[] IS NULL OR id = ANY(%(visible)s) "
            "ORDER BY key LIMIT %(most)s",
            {"visible": list(products) if products is not None else None, "most": NAMED_MAX + 1},
        )
        rows = cursor.fetchall()
    if not rows:
        return f'no product you can see has the key or name "{value}"; you can see no products'
    listed = [f"{key} ({name})" for key, name in rows[:NAMED_MAX]]
    more = " and more (see the product facet)" if len(rows) > NAMED_MAX else ""
    return f'"{value}" is not the key or name of a product you can see: {", ".join(listed)}{more}'


@dataclass(frozen=True)
class Filters:
    """The filters of a ranking that is not a SearchRequest (a draft, an evaluation):
    the names and meanings of SearchRequest's."""

    entities: tuple[str, ...] = ()
    products: tuple[str, ...] = ()
    feature: str | None = None
    created_before: datetime | None = None  # an evaluation's: only what existed then
    # What the caller's request calls a filter where its name differs (check_duplicates takes
    # one `product`): an error names the parameter the caller sent.
    names: tuple[tuple[str, str], ...] = ()


def build_scope(request: SearchRequest | Filters, user) -> Scope:
    """The access rule and the request's filters (search.query.filters: each
    of FILTERS the request sets)."""
    scope = access_scope(user)
    if left_out := _left_out.get():
        scope = scope.narrowed("d.key <> ALL(%(scope_left_out)s)", scope_left_out=list(left_out))
    chosen = {}
    for param in FILTERS:
        value = getattr(request, param, None)
        if not value:  # not given: None, or an empty list
            continue
        values = list(value) if isinstance(value, list | tuple) else [value]
        if param == "products":
            # By key or name, as `product:` in a query: one that names no product the user
            # may see (none, or another team's) is refused in the same words.
            values, unknown = named_keys("product", values, scope.products)
            if unknown is not None:
                named = dict(getattr(request, "names", ())).get(param, param)
                raise SearchError(f"{named}: {not_named('product', unknown, scope.products)}.")
        chosen[param, False] = values
    return narrowed(scope, chosen, "scope_filter")
