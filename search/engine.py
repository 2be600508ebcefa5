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
    duplicates,
    facets,
    fields,
    fusion,
    keyword,
    rerank,
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
    SemanticUnavailable,
    SimilarRequest,
)
from .embeddings import EmbeddingError, active_model_id, unavailable_reason
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
    mode, degraded = request.mode, None
    if mode != "keyword" and health.embedded == 0:
        why = unavailable_reason() or "no record has an embedding of the active model yet (run `manage.py embed`)"
        if mode == "semantic":
            raise SemanticUnavailable(f"mode=semantic cannot run: {why}; or use mode=keyword.")
        mode, degraded = "keyword", {"semantic": why}
    key_match = _key_lookup(text, scope)
    keyword_result, corrected, weights = None, None, fusion.Weights()
    if mode in ("hybrid", "keyword"):
        keyword_result, parsed, corrected, stats = _keyword_with_typos(
            parsed, request.match_mode, scope, key_match, depth or settings.SEARCH_ARM_DEPTH
        )
        if mode == "hybrid":
            weights = fusion.weights(text, keyword.coverage(keyword_result, parsed, stats))
    semantic_depth = settings.SEARCH_ARM_DEPTH
    if mode != "semantic":
        semantic_depth = min(semantic_depth, settings.SEARCH_SEMANTIC_DEPTH)
    semantic_result = None
    if mode in ("hybrid", "semantic"):
        # A corrected query feeds both arms: the model reads "payment", not "paymnt".
        try:
            semantic_result = semantic.for_query(corrected or text, scope, semantic_depth, keyword_result)
        except EmbeddingError as exc:
            if mode == "semantic":
                raise SemanticUnavailable(f"mode=semantic cannot run: {exc}; or use mode=keyword.") from exc
            mode, degraded, weights = "keyword", {"semantic": str(exc)}, fusion.Weights()
    candidates = fusion.fuse(keyword_result, semantic_result, weights)
    again = None
    if keyword_result and semantic_result and weights.semantic and settings.SEARCH_FEEDBACK_DOCS:
        # Pseudo-relevance feedback: the semantic arm again, from the query's
        # vector moved toward the best record of this first fusion, fused as
        # a third list.
        ranked = sorted(candidates.values(), key=_first_pass_order)
        first = [c.id for c in ranked if c.info and c.info.has_vector][: settings.SEARCH_FEEDBACK_DOCS]
        if first:
            again = semantic.feedback(semantic_result, first, scope, semantic_depth, keyword_result)
            candidates = fusion.fuse(keyword_result, semantic_result, weights, again)
    if key_match is not None and key_match not in candidates:
        candidates[key_match] = fusion.Candidate(key_match)
    hybrid = bool(keyword_result and semantic_result)
    fusion.boost(candidates, text, key_match, hybrid=hybrid, feedback=again is not None)
    if request.sort == "relevant":
        rerank.apply(candidates, corrected or text, pinned=key_match)
    highlight = (keyword_result.query if keyword_result else "") or parsed.any_of()
    found = Found(
        request.query,
        mode,
        request.match_mode,
        candidates,
        keyword_result,
        semantic_result,
        key_match,
        fielded.with_words(corrected) if corrected and fielded.filters else corrected,
        request.sort,
        feedback=again,
        degraded=degraded,
        filters=fielded.filters,
        words=_words(parsed, highlight),
    )
    return found, health, highlight


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


def _first_pass_order(candidate: fusion.Candidate) -> tuple:
    """Best first; on a tie (one arm's first against the other's first), the
    keyword arm's record: it holds the query's own words."""
    keyword_rank, semantic_rank = candidate.keyword_rank, candidate.semantic_rank
    return (-candidate.score, keyword_rank is None, keyword_rank or semantic_rank or 0, candidate.id)


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
    doc_id, title, body, vector_text, model_id = row
    scope = scope.narrowed("d.id <> %(scope_itself)s", scope_itself=doc_id)
    depth = settings.SEARCH_ARM_DEPTH
    health = index_health(scope.products)
    mode, degraded = request.mode, None
    active = active_model_id()
    if mode != "keyword" and not (vector_text is not None and model_id == active):
        why = unavailable_reason() or f"{request.key} has no current embedding yet (run `manage.py embed`)"
        if mode == "semantic":
            raise SemanticUnavailable(f"mode=semantic cannot run: {why}; or use mode=keyword.")
        mode, degraded = "keyword", {"semantic": why}
    keyword_result = semantic_result = None
    if mode in ("hybrid", "keyword"):
        # Body words at least one other record shares (the record has them too, so 2).
        parsed, (n, df), _ = duplicates.more_like_this(title, body, scope.products, shared_by=2)
        # Its own list is the answer (counted and faceted as listed): the arm
        # need not estimate a total or facets of the OR query's matches.
        keyword_result = duplicates.keyword_arm(parsed, scope, depth, n, df) if parsed.terms else None
    if mode in ("hybrid", "semantic"):
        vector = json.loads(vector_text)
        keyword_query = keyword_result.query if keyword_result else ""
        semantic_depth = min(depth, settings.SEARCH_SEMANTIC_DEPTH)
        semantic_result = semantic.nearest(vector, model_id, scope, semantic_depth, keyword_query)
    candidates = fusion.fuse(keyword_result, semantic_result)
    fusion.boost(candidates, title, None)  # a record with the very same title is the likeliest twin
    # The words a hit's `why` names: those of the keyword arm's query (the title's and the telling body words).
    words = parsed.terms if mode != "semantic" else parse(title + " ", "simple").terms
    found = Found(
        request.key,
        mode,
        "simple",
        candidates,
        keyword_result,
        semantic_result,
        listed=True,
        degraded=degraded,
        words=words,
    )
    return _respond(request, found, health, keyword_result.query if keyword_result else "")


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
