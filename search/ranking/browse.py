"""A query of fields alone (`severity:critical status:open`): the records its filters keep, newest first.

No words rank anything and no meaning can be compared, so the answer is a
listing of the scope, newest created first, in every mode and either sort:
the `depth` newest records (a walk down the created_at index), counted and
faceted exactly up to exact_limit and from a uniform sample beyond
(search.ranking.sampling over the kind tokens, which every record has), so a
listing visits a bounded number of rows however many records the filters keep.
"""

from search import db
from search.indexing.sql import tokens_for, tokens_tsquery
from search.models import Kind
from search.query.scope import Scope
from search.ranking import config, facets, layout, sampling, statistics
from search.ranking.rows import (
    GATHERED_COLUMNS,
    ArmResult,
    gather,
    info_columns,
    info_params,
    match_set,
    parse_ranked,
    ranked_json,
)

# Every record has one of these: a listing's "match everything" for the sampler.
ANY_KIND = tokens_tsquery(tokens_for("kind", Kind.values))


def newest(scope: Scope, depth: int) -> ArmResult:
    """The newest `depth` records of `scope`, newest first, with the count and facets of all of them.

    Up to exact_limit records, one pass over them counts, facets and
    orders them. Past it the records are many (M of N), so a walk down the
    created_at index meets the newest `depth` of them after about
    depth * N / M rows (at most depth * N / exact_limit): bitmap scans are
    off for that statement, as the planner, misjudging how many records a
    product or date keeps, would rather read every one of them and sort."""
    cap = config.current().exact_limit
    params = {**scope.params, **info_params(), "cap": cap, "depth": depth}
    created = "extract(epoch FROM d.created_at)::float8"
    everything = f"FROM search_document d WHERE {scope.where}"
    count, facet_rows, ranked, info, _ = match_set(created, everything, params, depth)
    if count <= cap:
        return ArmResult(_unscored(ranked), count, True, facets.from_rows(facet_rows), "", info)
    newest_rows = f"{everything} ORDER BY d.created_at DESC, d.id LIMIT %(depth)s"
    with db.atomic(), db.cursor() as cursor:
        layout.set_local(cursor, "enable_bitmapscan = off")
        if layout.distributed():
            _, _, ranked, info = gather(
                f"SELECT {GATHERED_COLUMNS}, {created} AS score, {info_columns('d')} {newest_rows}", params, depth
            )
        else:
            newest = f"SELECT d.id, {created} AS score, {info_columns('d')} {newest_rows}"
            cursor.execute(f"SELECT {ranked_json('r')} FROM ({newest}) r", params)
            ranked, info = parse_ranked(cursor.fetchone()[0])
    # No estimate of the records a product, feature or date keeps: the sample starts small and grows.
    share = statistics.filter_share(scope)
    n, _ = statistics.corpus(scope.products)
    expected = max(cap + 1, n * share) if share is not None else n
    total, counts, exact = sampling.sample_matches(ANY_KIND, scope, expected, column="search_markers")
    return ArmResult(_unscored(ranked), max(total, cap + 1), exact, counts, "", info)


def _unscored(ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The ranked ids: the order is the answer, and a creation time is no score to show."""
    return [(doc_id, 0.0) for doc_id, _ in ranked]
