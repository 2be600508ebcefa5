"""The two retrieval arms, in SQL: keyword (weighted tsvector) and semantic (pgvector).

Invariant: filters and access rules only remove rows, and they are applied
inside each arm's SQL (never to a page afterwards), so counts, facets and
similar records see exactly what the user may see. Scores compare only
within one call.

Keyword ranking is BM25-shaped: for each query term t,
idf(t) * ts_rank(weights, search_vector, t), summed over the terms. ts_rank
of a single term is a saturating, field-weighted term frequency (title A
counts most, environment D least); idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)).
Document frequencies of common lexemes come from PostgreSQL's own column
statistics (pg_stats.most_common_elems, kept by ANALYZE); the rest are rare
by definition and are counted exactly through the GIN index, capped.

Ranking cost does not grow with the number of matches. When the match set
has at most EXACT_LIMIT rows, all of them are ranked and counted exactly, in
one statement. When it is larger, the query is broad: terms that match
more than EXACT_LIMIT rows carry little information (low idf), so
candidates come from the rarer terms only, or, when every term is that
common, from the most recently updated matches; total and facets are then
estimated from a page sample (TABLESAMPLE) and flagged as estimates.
"""

import math
import re
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction


def setting(name: str):
    """A ranking setting; config/settings.py defines and documents each one."""
    return getattr(settings, name)


def rank_weights() -> str:
    """ts_rank's weights for D, C, B, A (environment .. title)."""
    return "{" + setting("SEARCH_RANK_WEIGHTS") + "}"


@dataclass
class Scope:
    """A WHERE fragment over search_document `d`: filters plus access."""

    where: str = "TRUE"
    params: list = field(default_factory=list)

    @property
    def everything(self) -> bool:
        """No filter and no access rule: corpus-wide statistics apply."""
        return self.where.replace("(", "").replace(")", "").strip() == "TRUE"


@dataclass
class ArmResult:
    ranked: list[tuple[int, float]]  # (document id, score), best first
    total: int
    exact: bool
    facets: dict[str, dict[str, int]]
    query: str = ""  # the tsquery the match set was defined by


# -- statistics ---------------------------------------------------------------

_stats_cache: dict = {"at": 0.0}


def _corpus_stats() -> tuple[float, dict[str, float]]:
    """(N, lexeme -> fraction of documents) from the planner's statistics."""
    if time.monotonic() - _stats_cache["at"] < 30:
        return _stats_cache["n"], _stats_cache["freq"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'search_document'::regclass")
        reltuples = cursor.fetchone()[0]
        if reltuples is None or reltuples < 10_000:
            cursor.execute("SELECT count(*) FROM search_document")
            reltuples = cursor.fetchone()[0]
        cursor.execute(
            "SELECT most_common_elems::text, most_common_elem_freqs FROM pg_stats "
            "WHERE tablename = 'search_document' AND attname = 'search_vector'"
        )
        row = cursor.fetchone()
    freq = {}
    if row and row[0]:
        elements = row[0].strip("{}").split(",")
        freq = {element.strip('"'): f for element, f in zip(elements, row[1], strict=False)}
    # Only cache for a large corpus; a small one is counted every time, cheaply.
    if reltuples >= 10_000:
        _stats_cache.update(at=time.monotonic(), n=float(reltuples), freq=freq)
    return float(max(reltuples, 1)), freq


def document_frequencies(tsqueries: list[str]) -> tuple[float, dict[str, float]]:
    """df of each term's tsquery: from the column statistics when PostgreSQL
    keeps them for its lexeme, else counted (capped: past the cap a term is
    common, and its idf small and flat anyway)."""
    n, freq = _corpus_stats()
    cap = setting("SEARCH_EXACT_LIMIT")
    df: dict[str, float] = {}
    to_count = []
    for q in set(tsqueries):
        lexemes = _LEXEME.findall(q)
        if len(set(lexemes)) == 1 and lexemes[0] in freq:
            df[q] = freq[lexemes[0]] * n  # a word, or a word and its prefix
        else:
            to_count.append(q)
    if to_count:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT t.q, (SELECT count(*) FROM (SELECT 1 FROM search_document "
                "WHERE search_vector @@ t.q::tsquery LIMIT %s) s) FROM unnest(%s::text[]) AS t(q)",
                [cap + 1, to_count],
            )
            df.update({q: float(count) for q, count in cursor.fetchall()})
    return n, df


_LEXEME = re.compile(r"'((?:[^']|'')*)'")


def idf(n: float, df: float) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


# -- keyword arm ----------------------------------------------------------------


def _score_sql(terms: list[tuple[str, float]], alias: str) -> tuple[str, list]:
    """sum(idf(t) * ts_rank(t)) over the query terms, for rows of `alias`."""
    normalization = setting("SEARCH_RANK_NORMALIZATION")
    parts, params = [], []
    for tsquery, weight in terms:
        parts.append(f"%s * ts_rank('{rank_weights()}', {alias}.search_vector, %s::tsquery, {int(normalization)})")
        params += [weight, tsquery]
    return " + ".join(parts) or "0", params


def keyword_arm(
    match_query: str,
    weighted_terms: list[tuple[str, float]],
    candidate_query: str | None,
    scope: Scope,
    depth: int,
    df_estimate: float,
    unfiltered: bool = False,
) -> ArmResult:
    """Rank the records matching `match_query` within `scope`.

    `weighted_terms` are (tsquery, idf) pairs that make the score;
    `candidate_query`, when given, is a narrower tsquery (the rarer terms)
    used to pick candidates if the match set is too broad to rank whole.
    """
    cap = setting("SEARCH_EXACT_LIMIT")
    # Clearly broad: skip the exact attempt. Without filters the estimate is
    # the terms' document frequencies (exact for one term; several terms are
    # taken as independent, which rather under- than overestimates an AND);
    # filters can cut the match set far below it, so then it is only trusted
    # when it is three times the cap.
    if df_estimate > (cap if unfiltered else 3 * cap):
        return _broad(match_query, weighted_terms, candidate_query, scope, depth, df_estimate)
    score, score_params = _score_sql(weighted_terms, "m")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH m AS MATERIALIZED (
                SELECT d.id, d.kind, d.product_id, d.status, d.severity, d.search_vector
                FROM search_document d
                WHERE d.search_vector @@ %s::tsquery AND ({scope.where})
                LIMIT %s
            ), n AS (SELECT count(*) AS c FROM m)
            SELECT
                (SELECT c FROM n),
                CASE WHEN (SELECT c FROM n) <= %s THEN ({_FACETS_SQL.format(source="m")}) END,
                CASE WHEN (SELECT c FROM n) <= %s THEN (
                    SELECT json_agg(json_build_array(id, score) ORDER BY score DESC, id)
                    FROM (SELECT m.id, {score} AS score FROM m
                          ORDER BY score DESC, m.id LIMIT %s) ranked
                ) END
            """,
            [match_query, *scope.params, cap + 1, cap, cap, *score_params, depth],
        )
        count, facets, ranked = cursor.fetchone()
    if count <= cap:
        return ArmResult(_pairs(ranked), count, True, _facet_dict(facets), match_query)

    # Broad: rank a bounded candidate set, estimate total and facets.
    return _broad(match_query, weighted_terms, candidate_query, scope, depth, max(df_estimate, cap + 1))


def _broad(match_query, weighted_terms, candidate_query, scope, depth, matches: float) -> ArmResult:
    """More than EXACT_LIMIT matches. Candidates: the rarer terms' matches
    (at most EXACT_LIMIT by construction), topped up, when those are fewer
    than `depth`, with the RECENT_CANDIDATES most recently updated matches.
    Up to EXACT_COUNT_LIMIT matches, one pass counts the matches, their
    facets and picks the recent ones (about 2 µs a match). Past it, total and
    facets are estimated from a sample, and finding the recent matches costs
    min(matches, R * N / matches) row visits: a bitmap over all matches when
    they are few, a walk down the updated_at index when they are many."""
    n, _ = _corpus_stats()
    cap = setting("SEARCH_EXACT_LIMIT")
    recent = setting("SEARCH_RECENT_CANDIDATES")
    ranked = []
    if candidate_query:
        source = ("d.search_vector @@ %s::tsquery AND", [candidate_query], "")
        ranked = _rank_candidates(match_query, weighted_terms, scope, source, cap, depth)
    top_up = recent if len(ranked) < depth else 0
    # The estimate of a word typed as a prefix counts the word only, not its
    # completions: leave it a fifth of headroom rather than pay for a pass
    # that finds too many matches and is thrown away.
    limit = setting("SEARCH_EXACT_COUNT_LIMIT")
    if matches <= 0.8 * limit:
        counted = _count_and_rank_recent(match_query, weighted_terms, scope, top_up, depth)
        if counted is not None:
            total, facets, more = counted
            return ArmResult(_merged(ranked, more, depth), max(total, cap + 1), True, facets, match_query)
        matches = limit + 1
    if top_up:
        walk = matches > (recent * n) ** 0.5
        # "+ interval '0'" hides the index order from the planner: use the bitmap.
        order = "ORDER BY d.updated_at DESC" if walk else "ORDER BY d.updated_at + interval '0' DESC"
        more = _rank_candidates(match_query, weighted_terms, scope, ("", [], order), recent, depth)
        ranked = _merged(ranked, more, depth)
    total, facets, exact = sample_matches(match_query, scope, matches)
    return ArmResult(ranked, max(total, cap + 1), exact, facets, match_query)


def _merged(ranked, more, depth: int) -> list[tuple[int, float]]:
    seen = {pk for pk, _ in ranked}
    return sorted(ranked + [r for r in more if r[0] not in seen], key=lambda r: (-r[1], r[0]))[:depth]


def _count_and_rank_recent(match_query, weighted_terms, scope, recent: int, depth: int):
    """One pass over the matches: their exact count and facets, and the best
    `depth` of the `recent` most recently updated ones. None when there are
    more than EXACT_COUNT_LIMIT matches (then they are sampled instead)."""
    limit = setting("SEARCH_EXACT_COUNT_LIMIT")
    score, score_params = _score_sql(weighted_terms, "c")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH m AS MATERIALIZED (
                SELECT d.id, d.kind, d.product_id, d.status, d.severity, d.updated_at
                FROM search_document d
                WHERE d.search_vector @@ %s::tsquery AND ({scope.where})
                LIMIT %s
            ), n AS (SELECT count(*) AS c FROM m)
            SELECT
                (SELECT c FROM n),
                CASE WHEN (SELECT c FROM n) <= %s THEN ({_FACETS_SQL.format(source="m")}) END,
                CASE WHEN (SELECT c FROM n) <= %s THEN (
                    SELECT json_agg(json_build_array(id, score) ORDER BY score DESC, id) FROM (
                        SELECT c.id, {score} AS score FROM search_document c
                        WHERE c.id = ANY(ARRAY(SELECT id FROM m ORDER BY updated_at DESC, id DESC LIMIT %s))
                        ORDER BY score DESC, c.id LIMIT %s
                    ) ranked
                ) END
            """,
            [match_query, *scope.params, limit + 1, limit, limit, *score_params, recent, depth],
        )
        count, facets, ranked = cursor.fetchone()
    if count > limit:
        return None
    return count, _facet_dict(facets), _pairs(ranked)


def _rank_candidates(match_query, weighted_terms, scope, source, limit, depth) -> list[tuple[int, float]]:
    """Score at most `limit` matches picked by `source` (a WHERE prefix, its
    parameters, an ORDER BY); the best `depth` of them."""
    condition, source_params, order = source
    score, score_params = _score_sql(weighted_terms, "c")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT json_agg(json_build_array(id, score) ORDER BY score DESC, id) FROM (
                SELECT c.id, {score} AS score FROM (
                    SELECT d.id, d.search_vector FROM search_document d
                    WHERE {condition} d.search_vector @@ %s::tsquery AND ({scope.where})
                    {order} LIMIT %s
                ) c ORDER BY score DESC, c.id LIMIT %s
            ) ranked
            """,
            [*score_params, *source_params, match_query, *scope.params, limit, depth],
        )
        return _pairs(cursor.fetchone()[0])


_FACETS_SQL = """
    SELECT json_agg(json_build_array(g.kind, g.product_id, g.status, g.severity, g.c, g.grouping))
    FROM (SELECT kind, product_id, status, severity, count(*) AS c,
                 GROUPING(kind, product_id, status, severity) AS grouping
          FROM {source} GROUP BY GROUPING SETS ((kind), (product_id), (status), (severity))) g
"""


def empty_facets() -> dict[str, dict[str, int]]:
    return {"kind": {}, "product": {}, "status": {}, "severity": {}}


def _facet_dict(rows, scale: float = 1.0) -> dict[str, dict[str, int]]:
    facets = empty_facets()
    for kind, product_id, status, severity, count, grouping in rows or []:
        value = round(count * scale)
        # GROUPING() has one bit per column, 1 where the column is aggregated away.
        if grouping == 0b0111:
            facets["kind"][kind] = value
        elif grouping == 0b1011:
            facets["product"][str(product_id)] = value
        elif grouping == 0b1101 and status is not None:
            facets["status"][status] = value
        elif grouping == 0b1110 and severity is not None:
            facets["severity"][severity] = value
    return facets


def sample_matches(match_query: str, scope: Scope, expected: float) -> tuple[int, dict, bool]:
    """Total and facets of a match set too broad to count in one pass,
    estimated from a repeatable page sample of about SEARCH_SAMPLE_MATCHES
    matching rows (the whole table when that is what the sample would take)."""
    target = setting("SEARCH_SAMPLE_MATCHES")
    percent = min(100.0, max(0.2, 100.0 * target / expected))
    if percent >= 100.0:
        source, params, scale = "search_document d", [], 1.0
    else:
        source, params, scale = "search_document d TABLESAMPLE SYSTEM (%s) REPEATABLE (17)", [percent], 100 / percent
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH s AS MATERIALIZED (
                SELECT d.kind, d.product_id, d.status, d.severity FROM {source}
                WHERE d.search_vector @@ %s::tsquery AND ({scope.where})
            )
            SELECT (SELECT count(*) FROM s), ({_FACETS_SQL.format(source="s")})
            """,
            [*params, match_query, *scope.params],
        )
        count, facets = cursor.fetchone()
    return round(count * scale), _facet_dict(facets, scale), scale == 1.0


def _pairs(ranked) -> list[tuple[int, float]]:
    return [(int(pk), float(score)) for pk, score in (ranked or [])]


# -- semantic arm ---------------------------------------------------------------


def semantic_arm(vector, model_id: str, scope: Scope, depth: int) -> ArmResult:
    """The `depth` nearest records with a current vector, within `scope`.

    hnsw.iterative_scan lets the index keep scanning while filters reject
    rows, so a selective filter still fills the page (pgvector 0.8+).
    """
    literal = "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        ef_search = max(setting("SEARCH_HNSW_EF_SEARCH"), min(depth, 1000))
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
        cursor.execute(
            f"""
            SELECT d.id, 1 - (d.embedding <=> %s::halfvec) AS similarity, d.kind, d.product_id, d.status, d.severity
            FROM search_document d
            WHERE d.embedding IS NOT NULL AND d.embedding_model = %s AND ({scope.where})
            ORDER BY d.embedding <=> %s::halfvec
            LIMIT %s
            """,
            [literal, model_id, *scope.params, literal, depth],
        )
        rows = cursor.fetchall()
    # relaxed_order may return neighbours slightly out of order.
    rows.sort(key=lambda row: (-row[1], row[0]))
    facets = empty_facets()
    for _, _, kind, product_id, status, severity in rows:
        _bump(facets["kind"], kind)
        _bump(facets["product"], str(product_id))
        if status:
            _bump(facets["status"], status)
        if severity:
            _bump(facets["severity"], severity)
    return ArmResult([(row[0], float(row[1])) for row in rows], len(rows), True, facets)


def _bump(counter: dict, key) -> None:
    counter[key] = counter.get(key, 0) + 1


def facets_outside(match_query: str, ids: list[int]) -> tuple[int, dict[str, dict[str, int]]]:
    """Count and facets of those of `ids` that do not match the keyword
    query: the semantic neighbours a hybrid match set adds, in one query."""
    if not ids:
        return 0, empty_facets()
    if match_query:
        outside, params = "id = ANY(%s) AND NOT (search_vector @@ %s::tsquery)", [ids, match_query]
    else:
        outside, params = "id = ANY(%s)", [ids]
    source = f"(SELECT * FROM search_document WHERE {outside}) x"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT (SELECT count(*) FROM {source}), ({_FACETS_SQL.format(source=source)})", params * 2)
        count, facets = cursor.fetchone()
    return count, _facet_dict(facets)


def facets_of(ids: list[int]) -> dict[str, dict[str, int]]:
    if not ids:
        return empty_facets()
    with connection.cursor() as cursor:
        cursor.execute(_FACETS_SQL.format(source="(SELECT * FROM search_document WHERE id = ANY(%s)) x"), [ids])
        return _facet_dict(cursor.fetchone()[0])
