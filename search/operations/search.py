"""`search()`: a query's ranked page, and `ranked()`, its whole list for an export.

Every surface (REST, MCP, the staff UI, search_eval) reaches it through
search.service. The request becomes a scope (filters and access), fields and
words (search.query.parse); a SearchPlan tells search.ranking.pipeline how to rank it
(typo correction, per-query arm weights, feedback, the key match pinned);
search.operations.respond builds the page.
"""

from search import db
from search.contract import IndexHealth, SearchError, SearchRequest, SearchResponse
from search.indexing.health import index_health
from search.operations.respond import Found, included, match_set, ordered, respond, words_of
from search.query import fields
from search.query.parse import ParsedQuery, QuerySyntaxError, parse
from search.query.scope import Scope, build_scope
from search.ranking import browse, config, fusion, keyword, pipeline, semantic, statistics, typos
from search.ranking.rows import ArmResult


def search(request: SearchRequest, user=None) -> SearchResponse:
    return respond(request, *_find(request, user))


def ranked(request: SearchRequest, user=None, depth: int | None = None) -> tuple[list[int], int, bool]:
    """A search's whole ranked list, for an export: (document ids, best first;
    the total the response would say; whether it is exact).

    First the list paging with next_cursor walks through, in that order; then,
    when the keyword arm matched more than arm_depth records, its
    further matches (from a keyword pass `depth` deep) in keyword order: an
    export wants every match, not the best few hundred, and its first records
    must be the ones the page showed. With sort=recent the whole list is
    newest first."""
    found, _, _ = _find(request, user)
    total, exact, _ = match_set(found)
    listed = ordered(found)
    if depth and found.keyword is not None and found.keyword.total > config.current().arm_depth:
        deeper, _, _ = _find(request.model_copy(update={"mode": "keyword"}), user, depth)
        more = [candidate for candidate in ordered(deeper) if candidate.id not in found.candidates]
        listed += more
        if request.sort == "recent":  # ordered() made each score its creation time
            listed.sort(key=lambda candidate: (-candidate.score, candidate.id))
    return [candidate.id for candidate in listed], total, exact


def _find(request: SearchRequest, user, depth: int | None = None) -> tuple["Found", IndexHealth | None, str]:
    """Both arms, fused and boosted: what the search found, the index's health (None
    when neither the response nor the ranking needs it) and the query to highlight.
    `depth`: the keyword arm's, instead of arm_depth."""
    scope = build_scope(request, user)
    # In simple mode, `severity:critical`-like fields narrow the scope; the words left are the query.
    fielded = fields.read(request.query, request.match_mode, scope.products)
    scope, text = fielded.narrowed(scope), fielded.text
    try:
        parsed = parse(text, request.match_mode)
    except QuerySyntaxError as exc:
        raise SearchError(f"query: {exc}") from exc
    if parsed.trace:  # both arms search what a pasted trace asks, in words
        text = parsed.text
    # Counted only for a response that shows it, or a semantic arm that must know whether vectors exist.
    health = index_health(scope.products) if request.mode != "keyword" or included(request, "index") else None
    if fielded.filters and not parsed.terms:
        return _listing(request, fielded, parsed, scope, health)
    plan = SearchPlan(request, text, parsed, health, _key_lookup(text, scope), depth or config.current().arm_depth)
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
        words=words_of(plan.parsed, highlight),
        trace=parsed.text if parsed.trace else None,
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
        self.correct = request.correct
        self.pinned = key_match
        self.boost_title = text
        self.rerank_text = text if request.sort == "relevant" else None
        self.corrected: str | None = None
        self.stats = None

    def semantic_unavailable(self, scope: Scope) -> str | None:
        return pipeline.no_vectors_reason(self.health)

    def keyword_arm(self, scope: Scope) -> ArmResult | None:
        result, self.parsed, self.corrected, self.stats = _keyword_with_typos(
            self.parsed, self.match_mode, scope, self.depth, correct=self.correct and self.pinned is None
        )
        if self.corrected and self.rerank_text is not None:
            self.rerank_text = self.corrected
        return result

    def weights(self, keyword_result: ArmResult | None) -> fusion.Weights:
        coverage = keyword.coverage(keyword_result, self.parsed, self.stats)
        return fusion.weights(self.text, coverage, trace=self.parsed.trace)

    def semantic_depth(self, mode: str) -> int:
        constants = config.current()
        return constants.arm_depth if mode == "semantic" else min(constants.arm_depth, constants.semantic_depth)

    def semantic_arm(self, scope: Scope, keyword_result: ArmResult | None, depth: int) -> ArmResult:
        # A corrected query feeds both arms: the model reads "payment", not "paymnt".
        return semantic.for_query(self.corrected or self.text, scope, depth, keyword_result)


def _listing(request: SearchRequest, fielded: fields.Fielded, parsed: ParsedQuery, scope: Scope, health):
    """A query of fields and no words (`severity:critical -android`): the records the fields keep
    (less those with an excluded word), newest first, in any mode (search.ranking.browse); as _find answers."""
    excluded = " | ".join(f"({term.tsquery})" for term in parsed.excluded if term.tsquery)
    if excluded:
        scope = scope.narrowed("NOT (d.search_vector @@ %(scope_excluded)s::tsquery)", scope_excluded=excluded)
    listed = browse.newest(scope, config.current().arm_depth)
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


def _keyword_with_typos(parsed: ParsedQuery, match_mode: str, scope: Scope, depth: int, correct: bool):
    """The keyword arm, retried with the corrected query when a word matches
    no record, or replaced by the closest titles when the words found fewer
    than relax_below records: (the arm, the query it ran, the
    corrected text or None, that query's statistics). `correct`: False for a
    key match, or when asked to search the words as typed."""
    stats = statistics.of_query(parsed, scope)
    result = keyword.arm(parsed, scope, depth, stats)
    # A trace's words are as pasted: a class name no record has is no typo.
    typo_possible = correct and result is not None and parsed.raw is None and not parsed.trace
    few = typo_possible and result.total < config.current().relax_below
    # A word no record has is worth correcting however many records the others find.
    if not few and not (typo_possible and typos.unknown_words(parsed, stats[1])):
        return result, parsed, None, stats
    titles, corrected = typos.fallback(parsed, scope, depth, stats[1], found=None if few else result)
    if corrected:
        parsed = parse(corrected, match_mode)
        stats = statistics.of_query(parsed, scope)
        return keyword.arm(parsed, scope, depth, stats), parsed, corrected, stats
    if titles is not None and titles.total > result.total:
        titles.relaxed, titles.matched_all = "similar_titles", result.total
        return titles, parsed, None, stats
    return result, parsed, None, stats


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
