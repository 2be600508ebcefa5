"""The keyword arm: which records match the query's words, and their order.

Ranking is BM25-shaped: for each query term t, idf(t) * ts_rank(weights,
search_vector, t), summed over the terms. ts_rank of a single term is a
saturating, field-weighted term frequency (title A counts most, environment
D least); idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)) (search.ranking.statistics).

Planning: all words must match; when fewer than relax_below records have
them all, any word may (rarest first). Ranking cost does not grow with the
number of matches: up to exact_limit matches, all of them are ranked,
counted and faceted in one statement; past it the query is broad:
candidates come from its rarer terms or its most recent matches, and total
and facets are estimated from a sample (search.ranking.sampling). The
constants (relax_below, exact_limit...) are search.ranking.config's.

Invariant: filters and the access rule (the Scope) only remove rows, and
they are inside every statement, never applied to a page afterwards.
"""

from dataclasses import dataclass

from search import db
from search.query.parse import ParsedQuery
from search.query.scope import Scope
from search.ranking import config, facets, layout, sampling, statistics
from search.ranking.rows import (
    GATHERED_COLUMNS,
    ArmResult,
    best_rows_json,
    gather,
    info_columns,
    info_params,
    match_set,
    parse_ranked,
)


@dataclass(frozen=True)
class Plan:
    """One match set and how to rank it."""

    match: str  # the tsquery that defines the match set
    weighted: list[tuple[str, float]]  # (a term's tsquery, its idf x Term.weight): the score
    candidates: str | None  # a narrower tsquery (the rarer terms): where a broad match set takes candidates
    expected: float  # matches expected: decides whether to try the exact path


def arm(parsed: ParsedQuery, scope: Scope, depth: int, stats) -> ArmResult | None:
    """The keyword arm; `stats` is `statistics.of_query(parsed, scope)`."""
    n, df = stats
    if parsed.raw is not None:
        if not parsed.raw:
            return None
        return rank(Plan(parsed.raw, [(parsed.raw, 1.0)], None, df[parsed.raw]), scope, depth)
    terms = parsed.units
    if not terms:
        return None
    weighted = [(t.tsquery, t.weight * statistics.idf(n, df[t.tsquery])) for t in terms]
    all_of, any_of = parsed.all_of(), parsed.any_of()
    candidates = rarer_terms(terms, df)
    if all_of == any_of:  # one term, or one OR group (similar() asks that way)
        return rank(Plan(all_of, weighted, candidates, expected_any(terms, df, n)), scope, depth)
    result = rank(Plan(all_of, weighted, None, _expected_all(parsed, df, n)), scope, depth)
    if result.total >= config.current().relax_below:
        return result
    # AND found little: rank documents matching any term, rarest terms first.
    relaxed = rank(Plan(any_of, weighted, candidates, expected_any(terms, df, n)), scope, depth)
    if relaxed.total <= result.total:
        return result
    relaxed.relaxed, relaxed.matched_all = "any_word", result.total
    return relaxed


def rarer_terms(terms, df: dict[str, float], cap: float | None = None) -> str | None:
    """The rarest terms whose matches together stay within `cap` (exact_limit), as
    one OR tsquery: where a broad OR query takes its candidates (a record
    matching only commoner terms cannot outscore them by much)."""
    cap = config.current().exact_limit if cap is None else cap
    rare, covered = [], 0.0
    for term in sorted(terms, key=lambda t: df[t.tsquery]):
        if covered + df[term.tsquery] > cap:
            break
        rare.append(term)
        covered += df[term.tsquery]
    return " | ".join(f"({t.tsquery})" for t in rare) if rare else None


def _expected_all(parsed: ParsedQuery, df: dict[str, float], n: float) -> float:
    """Expected matches of every group together, taking terms as independent
    (as PostgreSQL's own estimate does); decides the cheaper plan."""
    fraction = 1.0
    for group in parsed.groups:
        fraction *= min(1.0, sum(df[t.match] / n for t in group if t.tsquery) or 1.0)
    return n * fraction


def expected_any(terms, df: dict[str, float], n: float) -> float:
    missing = 1.0
    for term in terms:
        missing *= 1.0 - min(1.0, df[term.tsquery] / n)
    return n * (1.0 - missing)


def score_sql(plan: Plan, alias: str) -> tuple[str, dict]:
    """sum(idf(t) * ts_rank(t)) over the plan's terms, for rows of `alias`, and its parameters."""
    parts, params = [], {}
    for i, (tsquery, weight) in enumerate(plan.weighted):
        parts.append(
            f"%(idf{i})s * ts_rank(%(rank_weights)s::real[], {alias}.search_vector, %(term{i})s::tsquery, "
            "%(rank_normalization)s::int)"
        )
        params.update({f"idf{i}": weight, f"term{i}": tsquery})
    params["rank_weights"] = list(config.current().rank_weights)  # D, C, B, A
    params["rank_normalization"] = config.current().rank_normalization
    return " + ".join(parts) or "0", params


def rank(plan: Plan, scope: Scope, depth: int) -> ArmResult:
    """Rank the records matching `plan.match` within `scope`: the best `depth`
    of them, with the count and facets of all of them."""
    cap = config.current().exact_limit
    # Clearly broad: skip the exact attempt. Without filters the estimate is
    # the terms' document frequencies over what the user may see (exact for
    # one term; several terms are taken as independent, which rather under-
    # than overestimates an AND). Filters on kind, status and severity scale
    # it by their share of the records; as words and filters are not
    # independent (a bug says "crash" more often than a test), the estimate
    # of a filtered query is only trusted when it is three times the cap.
    share = statistics.filter_share(scope)
    expected = plan.expected * (1.0 if share is None else share)
    if expected > (3 * cap if scope.filtered else cap):
        return _broad(plan, scope, depth, expected)
    # The score is computed in the one pass over the matches: carrying each
    # row's search_vector out of the scan to rank it later cost more.
    score, params = score_sql(plan, "d")
    params = {**params, **scope.params, **info_params(), "match": plan.match, "cap": cap, "depth": depth}
    matches = f"FROM search_document d WHERE {scope.words('%(match)s::tsquery')} AND ({scope.where})"
    count, facet_rows, ranked, info, pages = match_set(score, matches, params, depth, over_cap=PAGES_READ_SQL)
    if count <= cap:
        return ArmResult(ranked, count, True, facets.from_rows(facet_rows), plan.match, info)
    # Broad after all: rank a bounded candidate set, estimate total and facets.
    return _broad(plan, scope, depth, max(expected, cap + 1, _extrapolated(count, pages)), above_cap=True)


# The table's pages, and how far into them the exact attempt read to find
# its cap + 1 matches. The GIN index answers through a bitmap, which reads
# the table in page order; `(ctid::text::point)[0]` is a row's page. Not on a
# distributed table: each shard reads its own pages, the coordinator's table
# has none, and the cap + 1 rows come from whichever shards answered first.
PAGES_READ_SQL = """
    SELECT json_build_array(
        (SELECT relpages FROM pg_class WHERE oid = 'search_document'::regclass),
        (SELECT max((tid::text::point)[0]) + 1 FROM m)
    )
"""


EXTRAPOLATE_FROM = 64  # matches found: fewer say little of how they spread


def _extrapolated(found: int, pages: list | None) -> float:
    """The matches of the whole table, from the `found` ones in the first
    pages read (`pages`: [the table's, those read]), as matches lie spread
    over the table. Independent words make a poor estimate of an AND of
    words that go together ("season pass renewal": 98 expected, 19,979
    found, at a million records); this one sizes the sample that estimates
    total and facets (search.ranking.sampling), which corrects a few times off
    either way. 0 when it cannot tell: too few found to say (a tiny cap), or
    no statistics (relpages is 0)."""
    if found < EXTRAPOLATE_FROM or not pages or not pages[0] or not pages[1]:
        return 0.0
    table, read = pages
    return found * max(table, read) / read


def coverage(result: ArmResult | None, parsed: ParsedQuery, stats) -> float:
    """How much of the query the keyword arm's best record holds: the
    idf-weighted share of the query's terms it contains, counting only terms
    some record has (a word no record has cannot be held by any, and the
    typo path deals with it). 1.0 when nothing can be judged (raw tsquery,
    no known term, no match). `stats` is `statistics.of_query(parsed, scope)`."""
    n, df = stats
    terms = [t for t in parsed.units if df.get(t.tsquery, 0) > 0] if parsed.raw is None else []
    if result is None or not result.ranked or not terms:
        return 1.0
    checks = ", ".join(f"d.search_vector @@ %(term{i})s::tsquery" for i in range(len(terms)))
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT ARRAY[{checks}] FROM search_document d WHERE d.id = %(best)s",
            {"best": result.ranked[0][0], **{f"term{i}": t.tsquery for i, t in enumerate(terms)}},
        )
        row = cursor.fetchone()
    if row is None:  # deleted a moment ago
        return 1.0
    weights = [statistics.idf(n, df[t.tsquery]) for t in terms]
    return sum(w for w, held in zip(weights, row[0], strict=True) if held) / sum(weights)


# -- broad match sets --------------------------------------------------------------------------


def _broad(plan: Plan, scope: Scope, depth: int, matches: float, above_cap: bool = False) -> ArmResult:
    """More than exact_limit matches (about `matches`; `above_cap` when an
    exact attempt counted past the limit). Candidates: the rarer terms'
    matches (at most exact_limit by construction), topped up, when those
    are fewer than `depth`, with the recent_candidates most recently
    updated matches. Total and facets are estimated from a sample. Every
    step visits a bounded number of rows, however many match."""
    cap = config.current().exact_limit
    ranked, info = [], {}
    if plan.candidates:
        source = Source(f"{scope.words('%(candidates)s::tsquery')} AND", {"candidates": plan.candidates}, "")
        ranked, info, _ = rank_candidates(plan, scope, source, cap, depth)
    if len(ranked) < depth:
        more, more_info = _recent_candidates(plan, scope, depth, matches)
        ranked, info = _merged(ranked, more, depth), {**more_info, **info}
    total, counts, exact = sampling.sample_matches(plan.match, scope, matches)
    return ArmResult(ranked, max(total, cap + 1) if above_cap else total, exact, counts, plan.match, info)


def _merged(ranked, more, depth: int) -> list[tuple[int, float]]:
    seen = {pk for pk, _ in ranked}
    return sorted(ranked + [r for r in more if r[0] not in seen], key=lambda r: (-r[1], r[0]))[:depth]


@dataclass(frozen=True)
class Source:
    """Which matches a broad query scores: a WHERE prefix, its parameters, an ORDER BY."""

    condition: str
    params: dict
    order: str


# Newest first, ties to the higher id on every path, so each picks the same rows.
# A walk down the (updated_at, id) index, reading matches as it meets them:
WALK = "ORDER BY d.updated_at DESC, d.id DESC"
# Every match through the GIN index (a bitmap), then the newest of them. The
# "+ interval '0'" makes the sort key an expression the index cannot supply,
# so the planner cannot turn this into the walk (an Index Scan Backward on
# search_document_updated with a Filter on @@), which visits N/M rows per
# match found and is what the cost comparison below chose against.
BITMAP = "ORDER BY d.updated_at + interval '0' DESC, d.id DESC"


def _recent_candidates(plan: Plan, scope: Scope, depth: int, matches: float):
    """The best `depth` of the R = recent_candidates most recently updated
    matches, by the cheapest of three ways, judged by the rows each visits
    (N records, M matches): the matches of the last few months, chosen to
    hold about 2R of them (the month tokens let the index skip the
    others: about M times the months' share); a walk down the updated_at
    index (R * N / M); a bitmap over every match (M). Filters can leave the
    months short of R matches: then the other two decide."""
    n, _ = statistics.corpus(scope.products)
    recent = config.current().recent_candidates
    walk = recent * n / max(matches, 1)
    chosen = statistics.recent_months(2 * recent / max(matches, 1), scope.products)
    if chosen and chosen[1] * matches < min(walk, matches):
        months = {"month_prefix": statistics.MONTH_PREFIX, "since": chosen[0]}
        source = Source(f"d.search_markers @@ {statistics.MONTHS_SINCE_SQL} AND", months, BITMAP)
        ranked, info, found = rank_candidates(plan, scope, source, recent, depth)
        if found >= recent:
            return ranked, info
    source = Source("", {}, WALK if walk < matches else BITMAP)
    ranked, info, _ = rank_candidates(plan, scope, source, recent, depth)
    return ranked, info


def rank_candidates(plan: Plan, scope: Scope, source: Source, limit: int, depth: int):
    """Score at most `limit` matches picked by `source`; the best `depth` of
    them, their RowInfo, and how many were scored."""
    params = {
        **source.params,
        **scope.params,
        **info_params(),
        "match": plan.match,
        "limit": limit,
        "depth": depth,
    }
    picked = f"""FROM search_document d
        WHERE {source.condition} {scope.words("%(match)s::tsquery")} AND ({scope.where})
        {source.order} LIMIT %(limit)s"""
    if layout.distributed():  # the picked rows scored where they are, gathered (rows.gather)
        score, scores = score_sql(plan, "d")
        found, _, ranked, info = gather(
            f"SELECT {GATHERED_COLUMNS}, {score} AS score, {info_columns('d')} {picked}", {**params, **scores}, depth
        )
        return ranked, info, found
    score, scores = score_sql(plan, "x")
    with db.cursor() as cursor:
        cursor.execute(
            f"""
            WITH c AS MATERIALIZED (
                SELECT x.id, x.tid, {score} AS score FROM (
                    SELECT d.id, d.ctid AS tid, d.search_vector {picked}
                ) x
            )
            SELECT (SELECT count(*) FROM c), ({best_rows_json("c")})
            """,
            {**params, **scores},
        )
        found, rows = cursor.fetchone()
    return *parse_ranked(rows), found
