"""Total and facets of a broad match set, estimated from a uniform sample.

Each record's search_markers holds a sample bucket, a hash of its id into
SAMPLE_BUCKETS (search.indexing.sql). The GIN index over search_vector and
search_markers hands over the matches of the first b buckets without
visiting the other rows: a uniform sample of b / SAMPLE_BUCKETS of them.
"""

import math

from search import db
from search.indexing.sql import SAMPLE_BUCKETS, SAMPLE_PREFIX
from search.query.scope import Scope
from search.ranking import config, facets, layout

SAMPLE_GROWTH = 32  # at most this many times more buckets from one try to the next
TRIES = 4


def sample_matches(
    match_query: str, scope: Scope, expected: float, column: str = "search_vector"
) -> tuple[int, facets.Counts, bool]:
    """(total, facets, exact) of the matches of `match_query` in `scope`, from
    a sample of about sample_matches of them; `column`: the tsvector
    it matches (search_markers: the filter tokens, for a listing).

    The number of buckets is sized from `expected`, which can be wrong either
    way: a capped count or terms taken as independent can be far below the
    truth, and filters can leave far fewer matches than it says. So a sample
    stops reading at four times the target, and one that overflows is taken
    again with an eighth of the buckets; one that finds under a quarter of
    the target is taken again larger (at most SAMPLE_GROWTH times), up to
    every bucket, when the matches are counted. Each try reads a bounded
    number of rows, and the first one usually suffices."""
    target = config.current().sample_matches
    buckets = math.ceil(target * SAMPLE_BUCKETS / max(expected, 1))
    for _ in range(TRIES):
        buckets = max(1, min(buckets, SAMPLE_BUCKETS))
        count, facet_rows = _sample(match_query, scope, buckets, most=4 * target, column=column)
        used = buckets
        if count > 4 * target and used > 1:
            buckets = used // 8
        elif count < target / 4 and used < SAMPLE_BUCKETS:
            buckets = min(used * SAMPLE_GROWTH, math.ceil(used * target / max(count, 1)))
        else:
            break
    scale = SAMPLE_BUCKETS / used
    return round(count * scale), facets.from_rows(facet_rows, scale), used == SAMPLE_BUCKETS


def _sample(match_query: str, scope: Scope, buckets: int, most: int, column: str = "search_vector"):
    """Count and facet the matches in the first `buckets` buckets, reading at
    most `most` + 1 of them (all of one bucket: a sample gets no smaller)."""
    condition = scope.words("%(match)s::tsquery") if column == "search_vector" else f"d.{column} @@ %(match)s::tsquery"
    params = {"match": match_query, "most": most + 1}
    if buckets < SAMPLE_BUCKETS:
        condition += " AND d.search_markers @@ %(buckets)s::tsquery"
        params["buckets"] = " | ".join(f"'{SAMPLE_PREFIX}{i}'" for i in range(buckets))
    limit = "LIMIT %(most)s" if buckets > 1 else ""
    rows = f"""SELECT d.kind, d.product_id, d.status, d.severity FROM search_document d
               WHERE {condition} AND ({scope.where}) {limit}"""
    with db.cursor() as cursor:
        if layout.distributed():  # the sample's rows, counted and grouped here (facets.grouped)
            cursor.execute(rows, {**params, **scope.params})
            sample = cursor.fetchall()
            return len(sample), facets.grouped(sample)
        cursor.execute(
            f"""
            WITH s AS MATERIALIZED ({rows})
            SELECT (SELECT count(*) FROM s), ({facets.FACETS_SQL.format(source="s")})
            """,
            {**params, **scope.params},
        )
        return cursor.fetchone()
