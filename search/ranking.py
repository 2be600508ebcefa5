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
estimated from a uniform sample and flagged as estimates. Two tokens of
each record's search_markers (search.sql: a sample bucket, the month of
updated_at), in the GIN index beside search_vector, let the index hand over
just the sample, or just the last months' matches, so each step visits a
bounded number of rows.

Every ranked row comes back with what fusion needs of it (RowInfo), read in
the same pass: no statement visits the candidates a second time.
"""

import hashlib
import math
import re
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction

from .embeddings import get_provider
from .sql import MONTH_PREFIX, SAMPLE_BUCKETS, SAMPLE_PREFIX


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


@dataclass(frozen=True)
class RowInfo:
    """What fusion's boosts and sort=recent need of a ranked row. The arms
    read it in their own pass over the row, so fusion never visits the
    candidates again."""

    updated: float  # epoch seconds
    created: float
    has_vector: bool  # a vector of the active embedding model
    title: str


def info_columns(alias: str) -> str:
    """RowInfo's columns of search_document `alias`, for a ranked row's SELECT."""
    # The active model's id is compared by its md5, whose hex digits need no
    # quoting or escaping: the fragment has no parameters and fits any statement.
    model = hashlib.md5(get_provider().model_id.encode()).hexdigest()
    return (
        f"extract(epoch FROM {alias}.updated_at)::float8 AS info_updated, "
        f"extract(epoch FROM {alias}.created_at)::float8 AS info_created, "
        f"({alias}.embedding IS NOT NULL AND md5({alias}.embedding_model) = '{model}') AS info_vector, "
        f"{alias}.title AS info_title"
    )


def ranked_json(alias: str) -> str:
    """The rows of `alias` (id, score and info_columns) as one JSON array, best first."""
    return (
        f"json_agg(json_build_array({alias}.id, {alias}.score, {alias}.info_updated, {alias}.info_created, "
        f"{alias}.info_vector, {alias}.info_title) ORDER BY {alias}.score DESC, {alias}.id)"
    )


def best_rows_json(source: str) -> str:
    """ranked_json of the best %s rows of `source` (columns id, tid, score).
    RowInfo is read for those rows only, through their ctid (a TID join:
    the same snapshot, the same tuples): carrying it for every match
    through the ranking costs more."""
    return (
        f"SELECT {ranked_json('r')} FROM (SELECT t.id, t.score, {info_columns('d')} "
        f"FROM (SELECT * FROM {source} ORDER BY score DESC, id LIMIT %s) t "
        "JOIN search_document d ON d.ctid = t.tid) r"
    )


@dataclass
class ArmResult:
    ranked: list[tuple[int, float]]  # (document id, score), best first
    total: int
    exact: bool
    facets: dict[str, dict[str, int]]
    query: str = ""  # the tsquery the match set was defined by
    info: dict[int, RowInfo] = field(default_factory=dict)  # of the ranked rows
    # Semantic arm in hybrid: count and facets of its rows outside the keyword match set.
    outside: tuple[int, dict[str, dict[str, int]]] | None = None


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
        # Words of search_vector and tokens of search_markers ("~" first: no word is one).
        cursor.execute(
            "SELECT most_common_elems::text, most_common_elem_freqs FROM pg_stats "
            "WHERE tablename = 'search_document' AND attname IN ('search_vector', 'search_markers')"
        )
        rows = cursor.fetchall()
    freq = {}
    for elements, freqs in rows:
        if elements:
            freq.update({e.strip('"'): f for e, f in zip(elements.strip("{}").split(","), freqs, strict=False)})
    # Only cache for a large corpus; a small one is counted every time, cheaply.
    if reltuples >= 10_000:
        _stats_cache.update(at=time.monotonic(), n=float(reltuples), freq=freq)
    return float(max(reltuples, 1)), freq


def recent_months(fraction: float) -> tuple[str, float] | None:
    """The newest months of updated_at that together hold at least
    `fraction` of all records, from the column statistics of the month
    tokens (sql.MONTH_PREFIX): the oldest of them (YYYYMM) and the fraction
    they hold. None when that would be most records anyway, or when the
    statistics do not know the months (a small or unanalyzed corpus, cheap
    to read in full)."""
    if fraction >= 0.5:
        return None
    _, freq = _corpus_stats()
    months = sorted(((k[len(MONTH_PREFIX) :], f) for k, f in freq.items() if k.startswith(MONTH_PREFIX)), reverse=True)
    covered = 0.0
    for month, share in months:
        covered += share
        if covered >= fraction:
            return month, covered
    return None


# The month tokens from a month (YYYYMM) to the newest record's, as one
# tsquery: months too rare for the statistics count as well.
MONTHS_SINCE_SQL = (
    "(SELECT string_agg(quote_literal(%s || to_char(m, 'YYYYMM')), ' | ')::tsquery FROM generate_series("
    "to_date(%s, 'YYYYMM'), (SELECT max(updated_at) AT TIME ZONE 'UTC' FROM search_document), "
    "interval '1 month') AS m)"
)


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
    # The score is computed in the one pass over the matches: carrying each
    # row's search_vector out of the scan to rank it later cost more.
    score, score_params = _score_sql(weighted_terms, "d")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH m AS MATERIALIZED (
                SELECT d.id, d.ctid AS tid, d.kind, d.product_id, d.status, d.severity, {score} AS score
                FROM search_document d
                WHERE d.search_vector @@ %s::tsquery AND ({scope.where})
                LIMIT %s
            ), n AS (SELECT count(*) AS c FROM m)
            SELECT
                (SELECT c FROM n),
                CASE WHEN (SELECT c FROM n) <= %s THEN ({_FACETS_SQL.format(source="m")}) END,
                CASE WHEN (SELECT c FROM n) <= %s THEN ({best_rows_json("m")}) END
            """,
            [*score_params, match_query, *scope.params, cap + 1, cap, cap, depth],
        )
        count, facets, rows = cursor.fetchone()
    if count <= cap:
        ranked, info = _ranked(rows)
        return ArmResult(ranked, count, True, _facet_dict(facets), match_query, info)

    # Broad: rank a bounded candidate set, estimate total and facets.
    return _broad(match_query, weighted_terms, candidate_query, scope, depth, max(df_estimate, cap + 1), True)


def _broad(match_query, weighted_terms, candidate_query, scope, depth, matches: float, above_cap=False) -> ArmResult:
    """More than EXACT_LIMIT matches (about `matches`; `above_cap` when an
    exact attempt counted past the limit). Candidates: the rarer terms'
    matches (at most EXACT_LIMIT by construction), topped up, when those
    are fewer than `depth`, with the RECENT_CANDIDATES most recently
    updated matches. Total and facets are estimated from a sample. Every
    step visits a bounded number of rows, however many match."""
    cap = setting("SEARCH_EXACT_LIMIT")
    ranked, info = [], {}
    if candidate_query:
        source = ("d.search_vector @@ %s::tsquery AND", [candidate_query], "")
        ranked, info, _ = _rank_candidates(match_query, weighted_terms, scope, source, cap, depth)
    if len(ranked) < depth:
        more, more_info = _recent_candidates(match_query, weighted_terms, scope, depth, matches)
        ranked, info = _merged(ranked, more, depth), {**more_info, **info}
    total, facets, exact = sample_matches(match_query, scope, matches)
    return ArmResult(ranked, max(total, cap + 1) if above_cap else total, exact, facets, match_query, info)


def _merged(ranked, more, depth: int) -> list[tuple[int, float]]:
    seen = {pk for pk, _ in ranked}
    return sorted(ranked + [r for r in more if r[0] not in seen], key=lambda r: (-r[1], r[0]))[:depth]


def _recent_candidates(match_query, weighted_terms, scope, depth, matches: float):
    """The best `depth` of the R = RECENT_CANDIDATES most recently updated
    matches, by the cheapest of three ways, judged by the rows each visits
    (N records, M matches): the matches of the last few months, chosen to
    hold about 2R of them (the month tokens let the index skip the
    others: about M times the months' share); a walk down the updated_at
    index (R * N / M); a bitmap over every match (M). Filters can leave the
    months short of R matches: then the other two decide."""
    n, _ = _corpus_stats()
    recent = setting("SEARCH_RECENT_CANDIDATES")
    # "+ interval '0'" hides the index order from the planner: use the bitmap.
    # Ties go to the higher id on every path, so each picks the same rows.
    bitmap = "ORDER BY d.updated_at + interval '0' DESC, d.id DESC"
    walk = recent * n / max(matches, 1)
    chosen = recent_months(2 * recent / max(matches, 1))
    if chosen and chosen[1] * matches < min(walk, matches):
        source = (f"d.search_markers @@ {MONTHS_SINCE_SQL} AND", [MONTH_PREFIX, chosen[0]], bitmap)
        ranked, info, found = _rank_candidates(match_query, weighted_terms, scope, source, recent, depth)
        if found >= recent:
            return ranked, info
    source = ("", [], "ORDER BY d.updated_at DESC, d.id DESC" if walk < matches else bitmap)
    ranked, info, _ = _rank_candidates(match_query, weighted_terms, scope, source, recent, depth)
    return ranked, info


def _rank_candidates(match_query, weighted_terms, scope, source, limit, depth):
    """Score at most `limit` matches picked by `source` (a WHERE prefix, its
    parameters, an ORDER BY); the best `depth` of them, their RowInfo, and
    how many were scored."""
    condition, source_params, order = source
    score, score_params = _score_sql(weighted_terms, "x")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH c AS MATERIALIZED (
                SELECT x.id, x.tid, {score} AS score FROM (
                    SELECT d.id, d.ctid AS tid, d.search_vector FROM search_document d
                    WHERE {condition} d.search_vector @@ %s::tsquery AND ({scope.where})
                    {order} LIMIT %s
                ) x
            )
            SELECT (SELECT count(*) FROM c), ({best_rows_json("c")})
            """,
            [*score_params, *source_params, match_query, *scope.params, limit, depth],
        )
        found, rows = cursor.fetchone()
    return *_ranked(rows), found


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


SAMPLE_GROWTH = 32


def sample_matches(match_query: str, scope: Scope, expected: float) -> tuple[int, dict, bool]:
    """Total and facets of a broad match set, estimated from a uniform
    sample of about SEARCH_SAMPLE_MATCHES of its matches: those in the first
    b of the SAMPLE_BUCKETS sample buckets (search.sql), which the GIN index
    picks out without visiting the other rows.

    b is sized from `expected`, which can be wrong either way: a capped
    count or terms taken as independent can be far below the truth, and
    filters can leave far fewer matches than it says. So a sample stops
    reading at four times the target, and one that overflows is taken again
    with an eighth of the buckets; one that finds under a quarter of the
    target is taken again larger (at most SAMPLE_GROWTH times), up to every
    bucket, when the matches are counted. Each try reads a bounded number of
    rows, and the first one usually suffices."""
    target = setting("SEARCH_SAMPLE_MATCHES")
    most = 4 * target
    buckets = math.ceil(target * SAMPLE_BUCKETS / max(expected, 1))
    for _ in range(4):
        buckets = max(1, min(buckets, SAMPLE_BUCKETS))
        query, params = "d.search_vector @@ %s::tsquery", [match_query]
        if buckets < SAMPLE_BUCKETS:
            query += " AND d.search_markers @@ %s::tsquery"
            params.append(" | ".join(f"'{SAMPLE_PREFIX}{i}'" for i in range(buckets)))
        # One bucket is as small as a sample gets: it is read whole.
        limit = f"LIMIT {most + 1}" if buckets > 1 else ""
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                WITH s AS MATERIALIZED (
                    SELECT d.kind, d.product_id, d.status, d.severity FROM search_document d
                    WHERE {query} AND ({scope.where}) {limit}
                )
                SELECT (SELECT count(*) FROM s), ({_FACETS_SQL.format(source="s")})
                """,
                [*params, *scope.params],
            )
            count, facets = cursor.fetchone()
        used = buckets
        if count > most and used > 1:
            buckets = used // 8
        elif count < target / 4 and used < SAMPLE_BUCKETS:
            buckets = min(used * SAMPLE_GROWTH, math.ceil(used * target / max(count, 1)))
        else:
            break
    scale = SAMPLE_BUCKETS / used
    return round(count * scale), _facet_dict(facets, scale), used == SAMPLE_BUCKETS


def _ranked(rows) -> tuple[list[tuple[int, float]], dict[int, RowInfo]]:
    """(id, score) pairs and RowInfo from ranked_json's array."""
    pairs, info = [], {}
    for pk, score, updated, created, has_vector, title in rows or []:
        pairs.append((int(pk), float(score)))
        info[int(pk)] = RowInfo(float(updated), float(created), has_vector, title)
    return pairs, info


def row_info(ids) -> dict[int, RowInfo]:
    """RowInfo of rows no arm ranked (a key match, a typo fallback's titles)."""
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {ranked_json('r')} FROM (SELECT d.id, 0 AS score, {info_columns('d')} "
            "FROM search_document d WHERE d.id = ANY(%s)) r",
            [list(ids)],
        )
        return _ranked(cursor.fetchone()[0])[1]


# -- semantic arm ---------------------------------------------------------------


def semantic_arm(vector, model_id: str, scope: Scope, depth: int, keyword_query: str = "") -> ArmResult:
    """The `depth` nearest records with a current vector, within `scope`.

    hnsw.iterative_scan lets the index keep scanning while filters reject
    rows, so a selective filter still fills the page (pgvector 0.8+).
    With `keyword_query` (hybrid), `outside` counts and facets the
    neighbours that the keyword arm's match set does not hold.
    """
    literal = "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
    ef_search = max(setting("SEARCH_HNSW_EF_SEARCH"), min(depth, 1000))
    matches = "d.search_vector @@ %s::tsquery" if keyword_query else "FALSE"
    sql = f"""
        SELECT d.id, d.embedding <=> %s::halfvec AS distance, d.kind, d.product_id, d.status, d.severity,
               {matches}, {info_columns("d")}
        FROM search_document d
        WHERE d.embedding IS NOT NULL AND d.embedding_model = %s AND ({scope.where})
        ORDER BY distance
        LIMIT %s
    """
    params = [literal, *([keyword_query] if keyword_query else []), model_id, *scope.params, depth]
    # Settings local to this transaction, not the session's: a connection
    # pooler in transaction mode may hand the session to someone else.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %s, true)",
            [str(int(ef_search))],
        )
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # relaxed_order may return neighbours slightly out of order.
    rows.sort(key=lambda row: (row[1], row[0]))
    facets, outside = empty_facets(), empty_facets()
    info, outside_count = {}, 0
    for pk, _, kind, product_id, status, severity, matched, updated, created, has_vector, title in rows:
        for counts in (facets, outside) if not matched else (facets,):
            _bump(counts["kind"], kind)
            _bump(counts["product"], str(product_id))
            if status:
                _bump(counts["status"], status)
            if severity:
                _bump(counts["severity"], severity)
        outside_count += not matched
        info[pk] = RowInfo(float(updated), float(created), has_vector, title)
    ranked = [(row[0], 1.0 - float(row[1])) for row in rows]
    return ArmResult(ranked, len(rows), True, facets, info=info, outside=(outside_count, outside))


def _bump(counter: dict, key) -> None:
    counter[key] = counter.get(key, 0) + 1


def facets_of(ids: list[int]) -> dict[str, dict[str, int]]:
    if not ids:
        return empty_facets()
    with connection.cursor() as cursor:
        cursor.execute(_FACETS_SQL.format(source="(SELECT * FROM search_document WHERE id = ANY(%s)) x"), [ids])
        return _facet_dict(cursor.fetchone()[0])
