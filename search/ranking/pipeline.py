"""The one ranking pipeline: `rank(plan, scope)`.

    arms (keyword, semantic) -> fuse -> [feedback] -> boosts -> [rerank]

`search`, `similar` and `check_duplicates` (and the export, through search)
are plan builders over it: each says how its two arms are made and which
optional stages run. The order of the stages, the fallback to the keyword
arm when the semantic one cannot run, and the fusion live here only.

Invariant: filters and the access rule only remove rows (they are `scope`,
inside every arm's SQL), and scores compare only within one call.
"""

from dataclasses import dataclass

from search.contract import SemanticUnavailable
from search.indexing.embeddings import unavailable_reason
from search.indexing.provider import EmbeddingError
from search.query.scope import Scope
from search.ranking import config, fusion, rerank, semantic
from search.ranking.rows import ArmResult


class Plan:
    """How one operation ranks. Built per call, it may keep what one step
    learns for the next: `rank` calls semantic_unavailable (unless
    mode=keyword), start, keyword_arm (unless mode=semantic), weights
    (hybrid), then semantic_arm (unless mode=keyword), in that order."""

    mode = "hybrid"  # as asked: hybrid, keyword or semantic
    depth: int  # the keyword arm's (each plan sets it)
    feedback = False  # a second semantic pass from the first fusion's best record
    boost_title: str | None = None  # a record with this very title is boosted
    pinned: int | None = None  # the record the query names by its key: listed, and boosted
    rerank_text: str | None = None  # the text a second stage reranks by (None: no second stage)
    fill_awaiting = True  # hybrid: a record awaiting its vector gets the semantic share at its keyword rank

    def semantic_unavailable(self, scope: Scope) -> str | None:
        """Why the semantic arm cannot run (None: it can)."""
        return None

    def start(self, mode: str, scope: Scope) -> None:
        """Begin what may run beside the keyword arm (a draft's embedding)."""

    def keyword_arm(self, scope: Scope) -> ArmResult | None:
        return None

    def weights(self, keyword: ArmResult | None) -> fusion.Weights:
        """Each arm's vote for this query, in hybrid mode."""
        return fusion.Weights()

    def semantic_depth(self, mode: str) -> int:
        return min(self.depth, config.current().semantic_depth)

    def semantic_arm(self, scope: Scope, keyword: ArmResult | None, depth: int) -> ArmResult:
        """The semantic arm; EmbeddingError when the model cannot embed the query."""
        raise NotImplementedError


@dataclass
class Ranking:
    """What `rank` found: every candidate (unordered; `order` sorts them) and the arms' lists."""

    candidates: dict[int, fusion.Candidate]
    mode: str  # the mode that ran (keyword when the semantic arm could not)
    keyword: ArmResult | None
    semantic: ArmResult | None
    feedback: ArmResult | None = None
    degraded: dict[str, str] | None = None  # SearchResponse.degraded

    def order(self) -> list[fusion.Candidate]:
        return sorted(self.candidates.values(), key=lambda c: (-c.score, c.id))


def rank(plan: Plan, scope: Scope) -> Ranking:
    mode, degraded = plan.mode, None
    if mode != "keyword":
        mode, degraded = fallback(mode, plan.semantic_unavailable(scope))
    plan.start(mode, scope)
    keyword_result = plan.keyword_arm(scope) if mode != "semantic" else None
    weights = plan.weights(keyword_result) if mode == "hybrid" else fusion.Weights()
    semantic_result, depth = None, plan.semantic_depth(mode)
    if mode != "keyword":
        try:
            semantic_result = plan.semantic_arm(scope, keyword_result, depth)
        except EmbeddingError as exc:
            mode, degraded = fallback(mode, str(exc))
            weights = fusion.Weights()
    candidates = fusion.fuse(keyword_result, semantic_result, weights)
    again, feedback_docs = None, config.current().feedback_docs
    if plan.feedback and keyword_result and semantic_result and weights.semantic and feedback_docs:
        # Pseudo-relevance feedback: the semantic arm again, from the query's vector moved
        # toward the best record of this first fusion, fused as a third list.
        first = [c.id for c in sorted(candidates.values(), key=_first_pass_order) if c.info and c.info.has_vector]
        if first := first[:feedback_docs]:
            again = semantic.feedback(semantic_result, first, scope, depth, keyword_result)
            candidates = fusion.fuse(keyword_result, semantic_result, weights, again)
    if plan.pinned is not None and plan.pinned not in candidates:
        candidates[plan.pinned] = fusion.Candidate(plan.pinned)
    hybrid = plan.fill_awaiting and bool(keyword_result and semantic_result)
    fusion.boost(candidates, plan.boost_title, plan.pinned, hybrid=hybrid)
    if plan.rerank_text is not None:
        rerank.apply(candidates, plan.rerank_text, pinned=plan.pinned)
    return Ranking(candidates, mode, keyword_result, semantic_result, again, degraded)


def fallback(mode: str, why: str | None) -> tuple[str, dict[str, str] | None]:
    """The one rule when the semantic arm cannot run (`why`): mode=semantic is
    refused (SemanticUnavailable, saying why); hybrid answers by keyword and
    says so in `degraded`."""
    if why is None or mode == "keyword":
        return mode, None
    if mode == "semantic":
        raise SemanticUnavailable(f"mode=semantic cannot run: {why}; or use mode=keyword.")
    return "keyword", {"semantic": why}


def no_vectors_reason(health) -> str | None:
    """Why no search by meaning can run over an index whose health (search.contract.IndexHealth)
    counts no current vector: no model, the worker under way (with its figure), or none running."""
    if health.embedded:
        return None
    if (why := unavailable_reason()) is not None:
        return why
    if health.worker is not None and health.worker.state in ("running", "restarting"):
        return (
            f"embedding is under way: {health.embedded:,} of {health.documents:,} records have a vector of the "
            f"active model so far, {health.worker.backlog:,} waiting (serve's worker is at it)"
        )
    return "no record has an embedding of the active model yet (run `manage.py embed`)"


def _first_pass_order(candidate: fusion.Candidate) -> tuple:
    """Best first; on a tie (one arm's first against the other's first), the
    keyword arm's record: it holds the query's own words."""
    keyword_rank, semantic_rank = candidate.keyword_rank, candidate.semantic_rank
    return (-candidate.score, keyword_rank is None, keyword_rank or semantic_rank or 0, candidate.id)
