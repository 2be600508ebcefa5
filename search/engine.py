"""The one search entry point: `search()` and `similar()`.

Every surface (REST, MCP, the staff UI, search_eval) calls these two
functions and returns what they return; the response is built only here,
as a `contract.SearchResponse`.

A search runs the keyword arm (search/ranking.py) and the semantic arm,
fuses them with reciprocal rank fusion, applies the documented boosts, and
builds the requested page: snippets and highlights are computed for that
page only.

Fusion: score = w_kw / (k + rank_kw) + w_sem / (k + rank_sem), with
k = SEARCH_RRF_K (20: measured better than the customary 60 on both
public judged sets, see docs/benchmarks.md), w = SEARCH_KEYWORD_WEIGHT and SEARCH_SEMANTIC_WEIGHT
(1.0 each). Boosts, applied after fusion: a record whose title equals the
query gets + SEARCH_TITLE_BOOST / k (default 1.0: as if it were ranked
first by one more arm); recency multiplies the score by
1 + SEARCH_RECENCY_WEIGHT * 0.5 ** (age in days / SEARCH_RECENCY_HALF_LIFE)
(0.02 and 365: at most +2%, under the gap between neighbouring ranks at the
top of an RRF list, so recency breaks near-ties and never buries a better
match; half of that for a year-old record). A query
that is a record key (BUG-1432) puts that record first.
"""

import base64
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from difflib import SequenceMatcher

from django.db import connection, transaction

from . import ranking, snippets
from .contract import (
    FacetCount,
    Facets,
    Hit,
    NotFound,
    ScoreDetail,
    SearchError,
    SearchRequest,
    SearchResponse,
)
from .embeddings import get_provider
from .health import index_health
from .query import ParsedQuery, QuerySyntaxError, parse
from .ranking import Scope, setting

logger = logging.getLogger(__name__)

KEY_QUERY = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*-[0-9][A-Za-z0-9._-]*$")


# -- scope: filters and access ------------------------------------------------------


def access_scope(user) -> Scope:
    """Rows the user may see: backlog.access's rule (the one the ORM readers
    use too) as a condition on `search_document d`, so that every arm,
    count, facet, snippet and similar-record list is restricted alike."""
    from backlog.access import visible_product_ids  # the rule lives with the records

    product_ids = visible_product_ids(user)
    if product_ids is None:
        return Scope("TRUE", [])
    return Scope("d.product_id = ANY(%s)", [list(product_ids)])


def build_scope(request: SearchRequest, user) -> Scope:
    conditions, params = [], []
    access = access_scope(user)
    conditions.append(access.where)
    params += access.params
    for name, condition in (
        ("entities", "d.kind = ANY(%s)"),
        ("products", "d.product_id IN (SELECT id FROM backlog_product WHERE key = ANY(%s))"),
        ("status", "d.status = ANY(%s)"),
        ("severity", "d.severity = ANY(%s)"),
    ):
        if values := getattr(request, name):
            conditions.append(condition)
            params.append(list(values))
    if request.feature:
        conditions.append("d.feature_id IN (SELECT id FROM backlog_feature WHERE key = %s)")
        params.append(request.feature)
    for name, operator in (
        ("created_after", ">="),
        ("created_before", "<="),
        ("updated_after", ">="),
        ("updated_before", "<="),
    ):
        value = getattr(request, name)
        if value is not None:
            conditions.append(f"d.{name.split('_')[0]}_at {operator} %s")
            params.append(value)
    return Scope(" AND ".join(f"({c})" for c in conditions), params)


# -- the arms ----------------------------------------------------------------------


@dataclass
class Candidate:
    id: int
    keyword_rank: int | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None
    boosts: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    info: ranking.RowInfo | None = None


def _frequencies(parsed: ParsedQuery, scope: Scope) -> tuple[float, dict[str, float]]:
    """N and the document frequency of each term (the whole tsquery in raw
    mode), over the whole corpus. Settles whether the last word is also a
    prefix (ParsedQuery.settle_prefix) on the way: a word that fills the
    keyword arm's candidate list by itself is taken as typed. Only without
    filters or access rules: corpus-wide counts say nothing of the records
    in scope, and must not decide what a user who sees fewer gets."""
    if parsed.raw is not None:
        return ranking.document_frequencies([parsed.raw] if parsed.raw else [])
    terms = parsed.terms + parsed.units
    n, df = ranking.document_frequencies([t.match for t in terms] + [t.whole for t in parsed.terms if t.whole])
    if scope.everything:
        parsed.settle_prefix(df, setting("SEARCH_ARM_DEPTH"))
    # A settled word's match changed with it (and a camel-case word's parts).
    if missing := [t.match for t in terms if t.match not in df]:
        df.update(ranking.document_frequencies(missing)[1])
    return n, df


def _keyword(parsed: ParsedQuery, scope: Scope, depth: int, stats) -> ranking.ArmResult | None:
    """The keyword arm; `stats` is `_frequencies(parsed)`."""
    n, df = stats
    if parsed.raw is not None:
        if not parsed.raw:
            return None
        raw = parsed.raw
        return ranking.keyword_arm(raw, [(raw, 1.0)], None, scope, depth, df[raw], scope.everything)
    terms = parsed.units
    if not terms:
        return None
    weighted = [(t.tsquery, ranking.idf(n, df[t.tsquery])) for t in terms]
    all_of, any_of = parsed.all_of(), parsed.any_of()
    candidate_query = _rarer_terms(terms, df)
    if all_of == any_of:  # one term, or one OR group (similar() asks that way)
        expected = _expected_any(terms, df, n)
        return ranking.keyword_arm(all_of, weighted, candidate_query, scope, depth, expected, scope.everything)
    result = ranking.keyword_arm(all_of, weighted, None, scope, depth, _expected_all(parsed, df, n), scope.everything)
    if result.total >= setting("SEARCH_RELAX_BELOW"):
        return result
    # AND found little: rank documents matching any term, rarest terms first.
    relaxed = ranking.keyword_arm(
        any_of, weighted, candidate_query, scope, depth, _expected_any(terms, df, n), scope.everything
    )
    return relaxed if relaxed.total > result.total else result


def _rarer_terms(terms, df: dict[str, float]) -> str | None:
    """The rarest terms whose matches together stay within EXACT_LIMIT, as
    one OR tsquery: where a broad OR query takes its candidates (a record
    matching only commoner terms cannot outscore them by much)."""
    cap = setting("SEARCH_EXACT_LIMIT")
    rare, covered = [], 0.0
    for term in sorted(terms, key=lambda t: df[t.tsquery]):
        if covered + df[term.tsquery] > cap:
            break
        rare.append(term)
        covered += df[term.tsquery]
    return " | ".join(f"({t.tsquery})" for t in rare) if rare else None


TYPO_SIMILARITY = 0.5  # pg_trgm word_similarity a title must reach
CORRECTION_RATIO = 0.7  # how close a title word must be to replace a query word
STEM_PREFIX_MIN = 4  # shortest stem tried for a word being typed


def _typo_fallback(parsed: ParsedQuery, scope: Scope, depth: int, df: dict[str, float]):
    """When the words find (almost) nothing. A quoted phrase that matches no
    record is offered as plain words. A word that matches no record is
    corrected to the closest word of the titles that contain something
    close to it (pg_trgm word similarity); failing that, the titles closest
    to the whole query are offered. Records that every word finds are never
    replaced. Returns (arm or None, corrected text or None)."""
    terms = [t for group in parsed.groups for t in group if t.tsquery]
    if any(" " in t.text and df.get(t.match, 0) == 0 for t in terms):
        return None, " ".join(parsed.text.replace('"', " ").split())
    unknown = [t.text for t in terms if df.get(t.match, 0) == 0 and " " not in t.text]
    if not unknown:
        return None, None
    # A word being typed may run past its stem: "renewa" is on the way to
    # "renewal", indexed as 'renew'. Its own prefixes, one or two letters
    # shorter, are tried as whole words before any fuzzy match.
    typed = [t.text for t in terms if t.text in unknown and ":*" in t.tsquery]
    stems = {w: [w[:k].lower() for k in (len(w) - 1, len(w) - 2) if k >= STEM_PREFIX_MIN] for w in typed}
    with transaction.atomic(), connection.cursor() as cursor:
        corrections = {}
        for word, candidates in stems.items():
            cursor.execute(
                f"""SELECT c FROM unnest(%s::text[]) WITH ORDINALITY AS u(c, n)
                    WHERE EXISTS (SELECT 1 FROM search_document d
                                  WHERE d.search_vector @@ to_tsquery('simple', quote_literal(c)) AND ({scope.where}))
                    ORDER BY n LIMIT 1""",
                [candidates, *scope.params],
            )
            if row := cursor.fetchone():
                corrections[word] = row[0]
        if corrections:
            return None, " ".join(corrections.get(word.strip('"-'), word) for word in parsed.text.split())
        cursor.execute(f"SET LOCAL pg_trgm.word_similarity_threshold = {TYPO_SIMILARITY}")
        cursor.execute(
            f"""SELECT w, ARRAY(SELECT d.title FROM search_document d WHERE w <%% d.title AND ({scope.where})
                               ORDER BY word_similarity(w, d.title) DESC, d.id LIMIT 5)
                FROM unnest(%s::text[]) AS w""",
            [*scope.params, unknown],
        )
        for word, titles in cursor.fetchall():
            vocabulary = {v.lower() for title in titles for v in re.findall(r"\w+", title)}
            ratio = lambda v, w=word: SequenceMatcher(None, w.lower(), v).ratio()  # noqa: E731
            best = max(vocabulary, key=ratio, default=None)
            if best and ratio(best) >= CORRECTION_RATIO:
                corrections[word] = best
        if corrections:
            words = [corrections.get(word.strip('"-'), word) for word in parsed.text.split()]
            return None, " ".join(words)
        cursor.execute(
            f"""SELECT d.id, word_similarity(%s, d.title) AS similarity FROM search_document d
                WHERE %s <%% d.title AND ({scope.where}) ORDER BY similarity DESC, d.id LIMIT %s""",
            [parsed.text, parsed.text, *scope.params, depth],
        )
        rows = cursor.fetchall()
    if not rows:
        return None, None
    ids = [row[0] for row in rows]
    return ranking.ArmResult([(pk, float(sim)) for pk, sim in rows], len(rows), True, ranking.facets_of(ids)), None


def _expected_all(parsed: ParsedQuery, df: dict[str, float], n: float) -> float:
    """Expected matches of every group together, taking terms as independent
    (as PostgreSQL's own estimate does); decides the cheaper plan."""
    fraction = 1.0
    for group in parsed.groups:
        fraction *= min(1.0, sum(df[t.match] / n for t in group if t.tsquery) or 1.0)
    return n * fraction


def _expected_any(terms, df: dict[str, float], n: float) -> float:
    missing = 1.0
    for term in terms:
        missing *= 1.0 - min(1.0, df[term.tsquery] / n)
    return n * (1.0 - missing)


def _semantic(text: str, scope: Scope, depth: int, keyword: ranking.ArmResult | None) -> ranking.ArmResult:
    provider = get_provider()
    keyword_query = keyword.query if keyword else ""
    return ranking.semantic_arm(provider.embed_query(text), provider.model_id, scope, depth, keyword_query)


def _fuse(keyword: ranking.ArmResult | None, semantic: ranking.ArmResult | None) -> dict[int, Candidate]:
    k = setting("SEARCH_RRF_K")
    weights = {"keyword": setting("SEARCH_KEYWORD_WEIGHT"), "semantic": setting("SEARCH_SEMANTIC_WEIGHT")}
    candidates: dict[int, Candidate] = {}
    for arm, result in (("keyword", keyword), ("semantic", semantic)):
        if result is None:
            continue
        for rank, (doc_id, score) in enumerate(result.ranked, start=1):
            candidate = candidates.setdefault(doc_id, Candidate(doc_id))
            setattr(candidate, f"{arm}_rank", rank)
            setattr(candidate, f"{arm}_score", score)
            candidate.score += weights[arm] / (k + rank)
            if candidate.info is None:
                candidate.info = result.info.get(doc_id)
    return candidates


def _normalize_title(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _boost(candidates: dict[int, Candidate], query: str | None, key_match: int | None, hybrid: bool = False) -> None:
    """Apply the documented boosts. In `hybrid` search, a record that has
    no vector yet gets the semantic arm's share at its keyword rank, so
    records waiting for embedding are not pushed down while the index lags."""
    if not candidates:
        return
    missing = [c.id for c in candidates.values() if c.info is None]
    found = ranking.row_info(missing)
    for doc_id in missing:  # a key match or typo match deleted a moment ago is gone
        if doc_id in found:
            candidates[doc_id].info = found[doc_id]
        else:
            del candidates[doc_id]
    k = setting("SEARCH_RRF_K")
    recency_weight = setting("SEARCH_RECENCY_WEIGHT")
    half_life_seconds = setting("SEARCH_RECENCY_HALF_LIFE") * 86400
    title_boost = setting("SEARCH_TITLE_BOOST") / k
    wanted = _normalize_title(query) if query else None
    ends = (wanted.split(" ")[0], wanted.split(" ")[-1]) if wanted else ()
    # Ages count from today's midnight, not from this instant, so scores (and
    # so the cursors built from them) stay the same from page to page.
    now = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    semantic_weight = setting("SEARCH_SEMANTIC_WEIGHT")
    for candidate in candidates.values():
        info = candidate.info
        if hybrid and not info.has_vector and candidate.keyword_rank and candidate.semantic_rank is None:
            share = semantic_weight / (k + candidate.keyword_rank)
            candidate.boosts["awaiting_embedding"] = round(share, 6)
            candidate.score += share
        # The substring tests spare normalizing titles that cannot be equal.
        lower = info.title.lower()
        if wanted and all(end in lower for end in ends) and _normalize_title(info.title) == wanted:
            candidate.boosts["exact_title"] = title_boost
            candidate.score += title_boost
        if recency_weight:
            age = max(now - info.updated, 0.0)
            factor = 1 + recency_weight * 0.5 ** (age / half_life_seconds)
            candidate.boosts["recency"] = round(factor, 4)
            candidate.score *= factor
    if key_match is not None and key_match in candidates:
        candidates[key_match].boosts["key_match"] = 1.0
        candidates[key_match].score += 1.0


def _key_lookup(query: str, scope: Scope) -> int | None:
    if not KEY_QUERY.match(query):
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id FROM search_document d WHERE upper(d.key) = upper(%s) AND ({scope.where})",
            [query, *scope.params],
        )
        row = cursor.fetchone()
    return row[0] if row else None


# -- entry points ----------------------------------------------------------------------


def search(request: SearchRequest, user=None) -> SearchResponse:
    scope = build_scope(request, user)
    depth = setting("SEARCH_ARM_DEPTH")
    try:
        parsed = parse(request.query, request.match_mode)
    except QuerySyntaxError as exc:
        raise SearchError(f"query: {exc}") from exc

    mode = request.mode
    health = index_health()
    if mode == "hybrid" and health.embedded == 0:
        mode = "keyword"  # nothing to compare vectors with yet: say so in `mode`
    if mode == "semantic" and health.embedded == 0:
        raise SearchError(
            "mode=semantic needs embeddings, and none are computed yet: run `manage.py embed`, or use mode=keyword."
        )

    key_match = _key_lookup(request.query, scope)
    keyword = corrected = None
    if mode in ("hybrid", "keyword"):
        stats = _frequencies(parsed, scope)
        keyword = _keyword(parsed, scope, depth, stats)
        typo_possible = keyword is not None and parsed.raw is None and key_match is None
        if typo_possible and keyword.total < setting("SEARCH_RELAX_BELOW"):
            fallback, corrected = _typo_fallback(parsed, scope, depth, stats[1])
            if corrected:
                parsed = parse(corrected, request.match_mode)
                keyword = _keyword(parsed, scope, depth, _frequencies(parsed, scope))
            elif fallback is not None and fallback.total > keyword.total:
                keyword = fallback
    semantic_depth = depth if mode == "semantic" else min(depth, setting("SEARCH_SEMANTIC_DEPTH"))
    semantic = _semantic(request.query, scope, semantic_depth, keyword) if mode in ("hybrid", "semantic") else None

    candidates = _fuse(keyword, semantic)
    if key_match is not None and key_match not in candidates:
        candidates[key_match] = Candidate(key_match)
    _boost(candidates, request.query, key_match, hybrid=bool(keyword and semantic))
    total, exact, facet_counts = _match_set(keyword, semantic, candidates, key_match)
    highlight_query = (keyword.query if keyword else "") or parsed.any_of()
    return _respond(request, mode, candidates, total, exact, facet_counts, health, highlight_query, corrected)


def similar(
    key: str,
    user=None,
    *,
    mode: str = "hybrid",
    entities: list[str] | None = None,
    limit: int = 20,
    cursor: str | None = None,
    include_scores: bool = False,
    include_content: bool = False,
    detail: str = "concise",
) -> SearchResponse:
    """Records nearest to `key` (never `key` itself): likely duplicates of a bug.

    Semantic arm: the record's own vector. Keyword arm: its title words and
    the rarest words of its text, OR-ed and ranked like a search.
    """
    request = SearchRequest(
        query=key,
        mode=mode,
        entities=entities,
        limit=limit,
        cursor=cursor,
        include_scores=include_scores,
        include_content=include_content,
        detail=detail,
    )
    scope = build_scope(request, user)
    with connection.cursor() as db:
        db.execute(
            f"SELECT d.id, d.title, d.body, d.embedding::text, d.embedding_model FROM search_document d "
            f"WHERE d.key = %s AND ({scope.where})",
            [key, *scope.params],
        )
        row = db.fetchone()
    if row is None:
        raise NotFound(f"no record with key {key!r}; check the key (like BUG-12) or search for it first.")
    doc_id, title, body, vector_text, model_id = row
    scope = Scope(f"({scope.where}) AND d.id <> %s", [*scope.params, doc_id])
    depth = setting("SEARCH_ARM_DEPTH")
    health = index_health()
    has_vector = vector_text is not None and model_id == get_provider().model_id
    if mode != "keyword" and not has_vector:
        if mode == "semantic":
            raise SearchError(f"{key} has no current embedding yet: run `manage.py embed`, or use mode=keyword.")
        mode = "keyword"
    keyword = semantic = None
    if mode in ("hybrid", "keyword"):
        parsed, stats = _more_like_this(title, body)
        keyword = _keyword(parsed, scope, depth, stats) if parsed.terms else None
    if mode in ("hybrid", "semantic"):
        vector = json.loads(vector_text)
        semantic = ranking.semantic_arm(vector, model_id, scope, depth, keyword.query if keyword else "")
    candidates = _fuse(keyword, semantic)
    _boost(candidates, None, None)
    total, exact, facet_counts = _match_set(keyword, semantic, candidates, None)
    return _respond(request, mode, candidates, total, exact, facet_counts, health, keyword.query if keyword else "")


MORE_LIKE_THIS_BODY_TERMS = 40


def _more_like_this(title: str, body: str) -> tuple[ParsedQuery, tuple[float, dict[str, float]]]:
    """The record's title words plus its most telling body words, as one OR query.

    Telling: the rarest body words that at least one other record shares (a
    word only this record has cannot find anything else).
    """
    # A trailing space: no word here is being typed, so none is a prefix.
    title_terms = {t.tsquery: t for t in parse(title + " ", "simple").units}
    words = dict.fromkeys(re.findall(r"[A-Za-z][A-Za-z0-9_]{2,}", body or ""))
    body_terms = {
        t.tsquery: t for t in parse(" ".join(list(words)[:150]) + " ", "simple").units if t.tsquery not in title_terms
    }
    n, df = ranking.document_frequencies([*title_terms, *body_terms])
    shared = sorted((q for q in body_terms if df[q] >= 2), key=lambda q: df[q])
    chosen = list(title_terms.values()) + [body_terms[q] for q in shared[:MORE_LIKE_THIS_BODY_TERMS]]
    return ParsedQuery(text=title, groups=[chosen]), (n, df)


def _match_set(keyword, semantic, candidates, key_match) -> tuple[int, bool, dict]:
    """Total and facets of everything that matched: keyword matches plus the
    semantic neighbours that are not keyword matches."""
    if keyword is None and semantic is None:
        ids = [key_match] if key_match is not None else []
        return len(ids), True, ranking.facets_of(ids)
    if semantic is None:
        return keyword.total, keyword.exact, keyword.facets
    if keyword is None:
        return semantic.total, True, semantic.facets
    extra, extra_facets = semantic.outside
    facets = keyword.facets
    for name, counts in extra_facets.items():
        for value, count in counts.items():
            facets[name][value] = facets[name].get(value, 0) + count
    return keyword.total + extra, keyword.exact, facets


# -- the page ------------------------------------------------------------------------------


def _request_fingerprint(request: SearchRequest) -> str:
    data = request.model_dump(mode="json", exclude={"cursor", "limit", "include_scores", "include_content", "detail"})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _encode_cursor(fingerprint: str, score: float, doc_id: int) -> str:
    payload = json.dumps({"f": fingerprint, "s": score, "i": doc_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, fingerprint: str) -> tuple[float, int]:
    """The (score, id) of the last record of the previous page."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        score, doc_id, owner = float(data["s"]), int(data["i"]), data["f"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SearchError(
            "cursor: not a cursor this service issued; send the next_cursor of the previous page."
        ) from exc
    if owner != fingerprint:
        raise SearchError(
            "cursor: it belongs to a different search (query or filters changed); start again without a cursor."
        )
    return score, doc_id


def _ordered(request: SearchRequest, candidates: dict[int, Candidate]) -> list[Candidate]:
    if request.sort == "recent":
        for candidate in candidates.values():
            candidate.score = candidate.info.created
    return sorted(candidates.values(), key=lambda c: (-c.score, c.id))


def _respond(
    request, mode, candidates, total, exact, facet_counts, health, highlight_query, corrected=None
) -> SearchResponse:
    ordered = _ordered(request, candidates)
    fingerprint = _request_fingerprint(request)
    start = 0
    if request.cursor:
        score, doc_id = _decode_cursor(request.cursor, fingerprint)
        start = next(
            (i for i, c in enumerate(ordered) if (-c.score, c.id) > (-score, doc_id)),
            len(ordered),
        )
    page = ordered[start : start + request.limit]
    after = ordered[start + request.limit :]
    next_cursor = None
    if page and after:
        last = page[-1]
        next_cursor = _encode_cursor(fingerprint, last.score, last.id)
    hits = _hits(request, page, start, highlight_query)
    return SearchResponse(
        query=request.query,
        mode=mode,
        match_mode=request.match_mode,
        corrected_query=corrected,
        total=max(total, len(ordered)) if exact else total,
        total_exact=exact,
        facets=_facets(facet_counts),
        results=hits,
        next_cursor=next_cursor,
        index=health,
    )


def _facets(counts: dict[str, dict[str, int]]) -> Facets:
    product_ids = [int(p) for p in counts["product"]]
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, key FROM backlog_product WHERE id = ANY(%s)", [product_ids])
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


def _hits(request: SearchRequest, page: list[Candidate], start: int, highlight_query: str) -> list[Hit]:
    if not page:
        return []
    full = request.detail == "full"
    documents = snippets.page_documents([c.id for c in page], with_fields=full or request.include_content)
    built = snippets.build(documents, highlight_query) if full else {}
    hits = []
    for offset, candidate in enumerate(page):
        doc = documents[candidate.id]
        hits.append(
            Hit(
                kind=doc.kind,
                key=doc.key,
                id=doc.record_id if full else None,
                product=doc.product_key,
                title=doc.title,
                status=doc.status,
                severity=doc.severity,
                created_at=doc.created_at,
                updated_at=doc.updated_at if full else None,
                snippet=built.get(candidate.id),
                score=(round(candidate.score, 6) if request.sort == "relevant" else 0.0) if full else None,
                rank=start + offset + 1,
                scores=ScoreDetail(
                    keyword_rank=candidate.keyword_rank,
                    keyword_score=candidate.keyword_score,
                    semantic_rank=candidate.semantic_rank,
                    semantic_score=candidate.semantic_score,
                    boosts=candidate.boosts,
                )
                if request.include_scores
                else None,
                content=doc.fields if request.include_content else None,
            )
        )
    return hits
