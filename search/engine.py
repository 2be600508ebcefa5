"""The one search entry point: `search()` and `similar()`.

Every surface (REST, MCP, the staff UI, search_eval) reaches these two
functions through search.service and returns what they return; the response
is built only here (`_respond`), as a `contract.SearchResponse`.

A search runs the keyword arm (search.keyword) and the semantic arm
(search.semantic), fuses them with reciprocal rank fusion, applies the
documented boosts, and builds the requested page: snippets and highlights
are computed for that page only.

How the lists are fused, weighted and boosted is search.fusion's.
"""

import json
from dataclasses import dataclass

from django.conf import settings

from . import (
    browse,
    budget,
    cursors,
    db,
    facets,
    fields,
    fusion,
    keyword,
    more_like_this,
    pipeline,
    semantic,
    snippets,
    statistics,
    typos,
)
from .contract import (
    Hit,
    IndexHealth,
    NotFound,
    SearchError,
    SearchRequest,
    SearchResponse,
    SimilarRequest,
)
from .embeddings import active_model_id, unavailable_reason
from .health import index_health
from .query import ParsedQuery, QuerySyntaxError, Term, parse
from .rows import ArmResult
from .scope import Scope, build_scope


@dataclass
class Found:
    """What a search or similar found, before paging: the ranked candidates
    and the response fields that do not depend on the page."""

    query: str
    mode: str
    match_mode: str
    candidates: dict[int, fusion.Candidate]
    keyword: ArmResult | None
    semantic: ArmResult | None
    key_match: int | None = None
    corrected: str | None = None
    sort: str = "relevant"
    # The answer is the ranked list itself (similar): total and facets count
    # it exactly, not the corpus-wide match set of its long OR query.
    listed: bool = False
    feedback: ArmResult | None = None  # hybrid's second semantic pass
    degraded: dict[str, str] | None = None  # SearchResponse.degraded
    filters: list | None = None  # SearchResponse.filters: the query's fields (search.fields)
    words: list[Term] | None = None  # the query's words, for each hit's `why`


# -- entry points ----------------------------------------------------------------------


def search(request: SearchRequest, user=None) -> SearchResponse:
    return _respond(request, *_find(request, user))


def ranked(request: SearchRequest, user=None, depth: int | None = None) -> tuple[list[int], int, bool]:
    """A search's whole ranked list, for an export: (document ids, best first;
    the total the response would say; whether it is exact).

    First the list paging with next_cursor walks through, in that order; then,
    when the keyword arm matched more than SEARCH_ARM_DEPTH records, its
    further matches (from a keyword pass `depth` deep) in keyword order: an
    export wants every match, not the best few hundred, and its first records
    must be the ones the page showed. With sort=recent the whole list is
    newest first."""
    found, _, _ = _find(request, user)
    total, exact, _ = _match_set(found)
    listed = _ordered(found)
    if depth and found.keyword is not None and found.keyword.total > settings.SEARCH_ARM_DEPTH:
        deeper, _, _ = _find(request.model_copy(update={"mode": "keyword"}), user, depth)
        more = [candidate for candidate in _ordered(deeper) if candidate.id not in found.candidates]
        listed += more
        if request.sort == "recent":  # _ordered made each score its creation time
            listed.sort(key=lambda candidate: (-candidate.score, candidate.id))
    return [candidate.id for candidate in listed], total, exact


def _find(request: SearchRequest, user, depth: int | None = None) -> tuple["Found", IndexHealth, str]:
    """Both arms, fused and boosted: what the search found, the index's health and
    the query to highlight. `depth`: the keyword arm's, instead of SEARCH_ARM_DEPTH."""
    scope = build_scope(request, user)
    # In simple mode, `severity:critical`-like fields narrow the scope; the words left are the query.
    fielded = fields.read(request.query, request.match_mode, scope.products)
    scope, text = fielded.narrowed(scope), fielded.text
    try:
        parsed = parse(text, request.match_mode)
    except QuerySyntaxError as exc:
        raise SearchError(f"query: {exc}") from exc
    health = index_health(scope.products)
    if fielded.filters and not parsed.terms:
        return _listing(request, fielded, parsed, scope, health)
    plan = SearchPlan(request, text, parsed, health, _key_lookup(text, scope), depth or settings.SEARCH_ARM_DEPTH)
    ranking = pipeline.rank(plan, scope)
    corrected = plan.corrected
    highlight = (ranking.keyword.query if ranking.keyword else "") or plan.parsed.any_of()
    found = Found(
        request.query,
        ranking.mode,
        request.match_mode,
        ranking.candidates,
        ranking.keyword,
        ranking.semantic,
        plan.pinned,
        fielded.with_words(corrected) if corrected and fielded.filters else corrected,
        request.sort,
        feedback=ranking.feedback,
        degraded=ranking.degraded,
        filters=fielded.filters,
        words=_words(plan.parsed, highlight),
    )
    return found, health, highlight


class SearchPlan(pipeline.Plan):
    """A search's ranking: the keyword arm with typo correction, per-query arm weights,
    the semantic arm over the (corrected) query, feedback, the key match pinned,
    and the second stage when the order is by relevance."""

    feedback = True

    def __init__(self, request: SearchRequest, text: str, parsed: ParsedQuery, health, key_match, depth: int):
        self.mode, self.text, self.parsed, self.health, self.depth = request.mode, text, parsed, health, depth
        self.match_mode = request.match_mode
        self.pinned = key_match
        self.boost_title = text
        self.rerank_text = text if request.sort == "relevant" else None
        self.corrected: str | None = None
        self.stats = None

    def semantic_unavailable(self, scope: Scope) -> str | None:
        return pipeline.no_vectors_reason(self.health.embedded)

    def keyword_arm(self, scope: Scope) -> ArmResult | None:
        result, self.parsed, self.corrected, self.stats = _keyword_with_typos(
            self.parsed, self.match_mode, scope, self.pinned, self.depth
        )
        if self.corrected and self.rerank_text is not None:
            self.rerank_text = self.corrected
        return result

    def weights(self, keyword_result: ArmResult | None) -> fusion.Weights:
        return fusion.weights(self.text, keyword.coverage(keyword_result, self.parsed, self.stats))

    def semantic_depth(self, mode: str) -> int:
        if mode == "semantic":
            return settings.SEARCH_ARM_DEPTH
        return min(settings.SEARCH_ARM_DEPTH, settings.SEARCH_SEMANTIC_DEPTH)

    def semantic_arm(self, scope: Scope, keyword_result: ArmResult | None, depth: int) -> ArmResult:
        # A corrected query feeds both arms: the model reads "payment", not "paymnt".
        return semantic.for_query(self.corrected or self.text, scope, depth, keyword_result)


def _listing(request: SearchRequest, fielded: fields.Fielded, parsed: ParsedQuery, scope: Scope, health):
    """A query of fields and no words (`severity:critical -android`): the records the fields keep
    (less those with an excluded word), newest first, in any mode (search.browse); as _find answers."""
    excluded = " | ".join(f"({term.tsquery})" for term in parsed.excluded if term.tsquery)
    if excluded:
        scope = scope.narrowed("NOT (d.search_vector @@ %(scope_excluded)s::tsquery)", scope_excluded=excluded)
    listed = browse.newest(scope, settings.SEARCH_ARM_DEPTH)
    candidates = fusion.fuse(listed, None)
    found = Found(
        request.query,
        request.mode,
        request.match_mode,
        candidates,
        listed,
        None,
        sort=request.sort,
        filters=fielded.filters,
    )
    return found, health, ""


def _keyword_with_typos(parsed: ParsedQuery, match_mode: str, scope: Scope, key_match: int | None, depth: int):
    """The keyword arm, retried with the corrected query when a word matches
    no record, or replaced by the closest titles when the words found fewer
    than SEARCH_RELAX_BELOW records: (the arm, the query it ran, the
    corrected text or None, that query's statistics)."""
    stats = statistics.of_query(parsed, scope)
    result = keyword.arm(parsed, scope, depth, stats)
    typo_possible = result is not None and parsed.raw is None and key_match is None
    few = typo_possible and result.total < settings.SEARCH_RELAX_BELOW
    # A word no record has is worth correcting however many records the others find.
    if not few and not (typo_possible and typos.unknown_words(parsed, stats[1])):
        return result, parsed, None, stats
    titles, corrected = typos.fallback(parsed, scope, depth, stats[1], found=None if few else result)
    if corrected:
        parsed = parse(corrected, match_mode)
        stats = statistics.of_query(parsed, scope)
        return keyword.arm(parsed, scope, depth, stats), parsed, corrected, stats
    if titles is not None and titles.total > result.total:
        return titles, parsed, None, stats
    return result, parsed, None, stats


def similar(request: SimilarRequest, user=None) -> SearchResponse:
    """Records nearest to `request.key` (never itself): likely duplicates of a bug.

    Semantic arm: the record's own vector. Keyword arm: its title words and
    the rarest words of its text, OR-ed and ranked like a search.
    """
    scope = build_scope(request, user)
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT d.id, d.title, d.body, d.embedding::text, d.embedding_model FROM search_document d "
            f"WHERE d.key = %(key)s AND ({scope.where})",
            {"key": request.key, **scope.params},
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound.no_record(request.key)
    plan = SimilarPlan(request, *row)
    scope = scope.narrowed("d.id <> %(scope_itself)s", scope_itself=plan.doc_id)
    health = index_health(scope.products)
    ranking = pipeline.rank(plan, scope)
    # The words a hit's `why` names: those of the keyword arm's query (the title's and the telling body words).
    words = plan.parsed.terms if ranking.mode != "semantic" else parse(plan.title + " ", "simple").terms
    found = Found(
        request.key,
        ranking.mode,
        "simple",
        ranking.candidates,
        ranking.keyword,
        ranking.semantic,
        listed=True,
        degraded=ranking.degraded,
        words=words,
    )
    return _respond(request, found, health, ranking.keyword.query if ranking.keyword else "")


class SimilarPlan(pipeline.Plan):
    """A stored record's neighbours: its more-like-this OR query and its own vector;
    a record with its very title boosted (the likeliest twin). Its own list is the
    answer (counted and faceted as listed)."""

    fill_awaiting = False

    def __init__(self, request: SimilarRequest, doc_id, title, body, vector_text, model_id):
        self.mode, self.key, self.depth = request.mode, request.key, settings.SEARCH_ARM_DEPTH
        self.doc_id, self.title, self.body = doc_id, title, body
        self.vector_text, self.model_id = vector_text, model_id
        self.boost_title = title
        self.parsed = None

    def semantic_unavailable(self, scope: Scope) -> str | None:
        if self.vector_text is not None and self.model_id == active_model_id():
            return None
        return unavailable_reason() or f"{self.key} has no current embedding yet (run `manage.py embed`)"

    def keyword_arm(self, scope: Scope) -> ArmResult | None:
        # Body words at least one other record shares (the record has them too, so 2).
        self.parsed, (n, df), _ = more_like_this.terms(self.title, self.body, scope.products, shared_by=2)
        return more_like_this.arm(self.parsed, scope, self.depth, n, df) if self.parsed.terms else None

    def semantic_arm(self, scope: Scope, keyword_result: ArmResult | None, depth: int) -> ArmResult:
        keyword_query = keyword_result.query if keyword_result else ""
        return semantic.nearest(json.loads(self.vector_text), self.model_id, scope, depth, keyword_query)


def _words(parsed: ParsedQuery, tsquery: str) -> list[Term]:
    """The words a hit's `why` names: the query's own (a raw tsquery is one, "the query")."""
    if parsed.raw is not None:
        return [Term(text="the query", tsquery=tsquery)] if tsquery else []
    return parsed.terms


def _key_lookup(query: str, scope: Scope) -> int | None:
    if not fusion.KEY_QUERY.match(query):
        return None
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id FROM search_document d WHERE upper(d.key) = upper(%(key)s) AND ({scope.where})",
            {"key": query, **scope.params},
        )
        row = cursor.fetchone()
    return row[0] if row else None


# -- the response -----------------------------------------------------------------------------


def _match_set(found: Found) -> tuple[int, bool, facets.Counts]:
    """Total and facets of everything that matched: keyword matches plus the
    semantic neighbours that are not keyword matches."""
    keyword_result, semantic_result = found.keyword, found.semantic
    if found.listed:
        return len(found.candidates), True, facets.of_rows(list(found.candidates))
    nothing_else = (keyword_result is None or keyword_result.total == 0) and semantic_result is None
    if nothing_else:  # at most the record the query names by its key
        ids = [found.key_match] if found.key_match is not None else []
        return len(ids), True, facets.of_rows(ids)
    if semantic_result is None:
        return keyword_result.total, keyword_result.exact, keyword_result.facets
    if keyword_result is None:
        return semantic_result.total, True, semantic_result.facets
    outside = semantic_result.outside_rows | (found.feedback.outside_rows if found.feedback else {})
    extra_facets = facets.empty()
    for row in outside.values():
        facets.add(extra_facets, *row)
    return keyword_result.total + len(outside), keyword_result.exact, facets.merged(keyword_result.facets, extra_facets)


def _ordered(found: Found) -> list[fusion.Candidate]:
    if found.sort == "recent":
        for candidate in found.candidates.values():
            candidate.score = candidate.info.created
    return sorted(found.candidates.values(), key=lambda c: (-c.score, c.id))


def included(request: SearchRequest | SimilarRequest, part: str) -> bool:
    """Whether the response carries `part` (facets, index): as asked, else with detail=full only."""
    asked = getattr(request, f"include_{part}")
    return asked if asked is not None else request.detail == "full"


def _respond(request: SearchRequest | SimilarRequest, found: Found, health, highlight: str) -> SearchResponse:
    total, exact, counts = _match_set(found)
    ordered = _ordered(found)
    owner = cursors.fingerprint(request)
    start = 0
    if request.cursor:
        score, doc_id = cursors.decode(request.cursor, owner)
        start = next((i for i, c in enumerate(ordered) if (-c.score, c.id) > (-score, doc_id)), len(ordered))
    page = ordered[start : start + request.limit]
    more_after_page = bool(page and ordered[start + request.limit :])
    hits = _hits(request, page, start, highlight, found)
    facet_counts = facets.response(counts) if included(request, "facets") else None

    def answer(given: int) -> SearchResponse:
        """The response with the page's first `given` hits; a budget may leave out the rest."""
        next_cursor = None
        if given < len(hits):
            last = hits[given - 1][0]
            next_cursor = cursors.encode(owner, last.score, last.id)
        elif more_after_page:
            next_cursor = cursors.encode(owner, page[-1].score, page[-1].id)
        return SearchResponse(
            query=found.query,
            mode=found.mode,
            match_mode=found.match_mode,
            corrected_query=found.corrected,
            total=max(total, len(ordered)) if exact else total,
            total_exact=exact,
            facets=facet_counts,
            results=[hit for _, hit in hits[:given]],
            next_cursor=next_cursor,
            index=health if included(request, "index") else None,
            filters=found.filters or None,
            degraded=found.degraded,
            omitted=len(hits) - given if given < len(hits) else None,
        )

    if request.max_tokens is None:
        return answer(len(hits))
    return budget.fit(answer, len(hits), request.max_tokens, "hit")


def _hits(request, page: list[fusion.Candidate], start: int, highlight: str, found: Found) -> list[tuple]:
    """(candidate, Hit) for each record of the page that still exists."""
    if not page:
        return []
    full = request.detail == "full"
    words = found.words or []
    documents = snippets.page_documents(
        [c.id for c in page], with_fields=full or request.include_content, words=[w.match for w in words]
    )
    built = snippets.build(documents, highlight) if full else {}
    # A record deleted since it was ranked is left out: the page shows what still exists.
    return [
        (
            candidate,
            _hit(
                request,
                documents[candidate.id],
                candidate,
                start + offset + 1,
                built.get(candidate.id),
                found.sort,
                # A query of fields alone (a listing) has no words: the fields are why.
                "fields"
                if found.words is None and found.filters
                else _why(documents[candidate.id], words, candidate.id == found.key_match),
            ),
        )
        for offset, candidate in enumerate(page)
        if candidate.id in documents
    ]


WHY_WORDS = 3  # words a `why` names at most


def _why(doc: snippets.PageDocument, words: list[Term], key_match: bool) -> str:
    """One line on why the record is a hit: the query is its key; or which of the query's words it
    holds, in its title and elsewhere ("title: renewal, spinner; text: ios"); or none of them:
    it is close in meaning."""
    if key_match:
        return "key"
    held = list(zip(words, doc.in_title, doc.anywhere, strict=True))
    in_title = list(dict.fromkeys(word.text for word, title, _ in held if title))[:WHY_WORDS]
    elsewhere = list(dict.fromkeys(word.text for word, _, anywhere in held if anywhere and word.text not in in_title))
    elsewhere = elsewhere[: WHY_WORDS - len(in_title)]
    parts = [f"{field}: {', '.join(found)}" for field, found in (("title", in_title), ("text", elsewhere)) if found]
    return "; ".join(parts) or "meaning"


def _hit(request, doc, candidate: fusion.Candidate, rank: int, snippet, sort: str, why: str) -> Hit:
    full = request.detail == "full"
    scores = fusion.score_detail(candidate) if request.include_scores else None
    return Hit(
        kind=doc.kind,
        key=doc.key,
        id=doc.record_id if full else None,
        product=doc.product_key,
        title=doc.title,
        status=doc.status,
        severity=doc.severity,
        why=why,
        created_at=doc.created_at if full else None,
        updated_at=doc.updated_at if full else None,
        snippet=snippet,
        score=(round(candidate.score, 6) if sort == "relevant" else 0.0) if full else None,
        rank=rank if full else None,
        scores=scores,
        content=doc.fields if request.include_content else None,
    )
