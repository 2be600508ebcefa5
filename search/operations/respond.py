"""A search's or similar's answer: the page of what the pipeline ranked.

`respond` builds the one SearchResponse (contract) from a `Found`: the
total and facets of the match set, the page from the cursor, snippets and
highlights for that page only, each hit's `why`, and the token budget.
"""

from dataclasses import dataclass

from search.contract import Hit, Relaxed, SearchRequest, SearchResponse, SimilarRequest, budget, cursors
from search.operations import snippets
from search.query.parse import ParsedQuery, Term, distinct_words
from search.ranking import facets, fusion
from search.ranking.rows import ArmResult


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
    filters: list | None = None  # SearchResponse.filters: the query's fields (search.query.fields)
    words: list[Term] | None = None  # the query's words, for each hit's `why`
    trace: str | None = None  # SearchResponse.trace: what a pasted stack trace was read as


def relaxed(found: Found, full: bool) -> Relaxed | None:
    """What the response says when the keyword arm widened the query (search.ranking.keyword,
    search.operations.search): a search says what it did, never widens silently."""
    arm = found.keyword
    # A query that names a record by its key found what it asked for.
    if found.listed or found.key_match is not None or arm is None or arm.relaxed is None:
        return None
    # Concise: the query itself says its words.
    words = list(dict.fromkeys(word.text for word in found.words or [])) if full else None
    return Relaxed(how=arm.relaxed, matched_all=arm.matched_all, words=words)


def words_of(parsed: ParsedQuery, tsquery: str) -> list[Term]:
    """The words a hit's `why` names: the query's own (a raw tsquery is one, "the query")."""
    if parsed.raw is not None:
        return [Term(text="the query", tsquery=tsquery)] if tsquery else []
    return parsed.terms


def match_set(found: Found) -> tuple[int, bool, facets.Counts]:
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


def ordered(found: Found) -> list[fusion.Candidate]:
    if found.sort == "recent":
        for candidate in found.candidates.values():
            candidate.score = candidate.info.created
    return sorted(found.candidates.values(), key=lambda c: (-c.score, c.id))


def included(request: SearchRequest | SimilarRequest, part: str) -> bool:
    """Whether the response carries `part` (facets, index): as asked, else with detail=full only."""
    asked = getattr(request, f"include_{part}")
    return asked if asked is not None else request.detail == "full"


def respond(request: SearchRequest | SimilarRequest, found: Found, health, highlight: str) -> SearchResponse:
    total, exact, counts = match_set(found)
    listed = ordered(found)
    owner = cursors.fingerprint(request)
    start = 0
    if request.cursor:
        score, doc_id = cursors.decode(request.cursor, owner)
        start = next((i for i, c in enumerate(listed) if (-c.score, c.id) > (-score, doc_id)), len(listed))
    page = listed[start : start + request.limit]
    more_after_page = bool(page and listed[start + request.limit :])
    hits = _hits(request, page, start, highlight, found)
    facet_counts = facets.response(counts) if included(request, "facets") else None
    full = request.detail == "full"

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
            total=max(total, len(listed)) if exact else total,
            total_exact=exact,
            facets=facet_counts,
            results=[hit for _, hit in hits[:given]],
            next_cursor=next_cursor,
            index=health if included(request, "index") else None,
            filters=found.filters or None,
            degraded=found.degraded,
            relaxed=relaxed(found, full),
            trace=found.trace,
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
    in_title = distinct_words(word.shown for word, title, _ in held if title)[:WHY_WORDS]
    elsewhere = distinct_words(word.shown for word, _, anywhere in held if anywhere and word.shown not in in_title)
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
