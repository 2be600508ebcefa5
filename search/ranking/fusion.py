"""Fusion: the arms' ranked lists into one, with each query's arm weights and the boosts.

score = w_kw / (k + rank_kw) + w_sem / (k + rank_sem), with k = rrf_k
(20: measured better than the customary 60 on the public judged sets, see
docs/benchmarks.md) and w the configured arm weights (keyword_weight,
semantic_weight) times this query's (`weights`); in hybrid, the
semantic arm's second pass (semantic.feedback) adds
w_sem * feedback_list_weight / (k + rank_feedback). Boosts, after
fusion: a record whose title equals the query gets + title_boost / k
(as if one more arm ranked it first); recency multiplies the score by
1 + recency_weight * 0.5 ** (age in days / recency_half_life)
(0.02 and 365: at most +2%, under the gap between neighbouring ranks at the
top of an RRF list, so recency breaks near-ties and never buries a better
match); a query that is a record key puts that record first. The constants
named here are fields of search.ranking.config.
"""

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from search.contract import ScoreDetail
from search.ranking import config
from search.ranking.rows import ArmResult, RowInfo, row_info

KEY_QUERY = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*-[0-9][A-Za-z0-9._-]*$")
# A code: a word with a digit in it (WMS-E217, AADSTS50105) or an all-capitals abbreviation (SSR, WCHR).
CODE = re.compile(r"^(?=.*\d)[A-Za-z0-9][A-Za-z0-9_.-]*$|^[A-Z]{2,}$")
# A pasted stack trace's semantic vote: any weight above 0 lowered MRR@10 on eval/trace-hadoop
# (0.966 at 0, 0.960 at 0.1, 0.919 at 0.25, 0.872 at 1; docs/benchmarks.md).
TRACE_SEMANTIC_WEIGHT = 0.0


@dataclass
class Candidate:
    id: int
    keyword_rank: int | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None
    feedback_rank: int | None = None
    feedback_score: float | None = None
    boosts: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    info: RowInfo | None = None


def score_detail(candidate: Candidate) -> ScoreDetail:
    """What include_scores shows of a candidate: each list's rank and score, and the boosts."""
    return ScoreDetail(
        keyword_rank=candidate.keyword_rank,
        keyword_score=candidate.keyword_score,
        semantic_rank=candidate.semantic_rank,
        semantic_score=candidate.semantic_score,
        feedback_rank=candidate.feedback_rank,
        feedback_score=candidate.feedback_score,
        boosts=candidate.boosts,
    )


@dataclass(frozen=True)
class Weights:
    """Each arm's weight in the fusion for one query (include_scores shows
    a weight other than 1 in each hit's boosts)."""

    keyword: float = 1.0
    semantic: float = 1.0


def weights(query: str, coverage: float, trace: bool = False) -> Weights:
    """How far to trust each arm for this query.

    A pasted stack trace (`trace`, search.query.traces) asks for its exact
    class and method names: the semantic arm votes TRACE_SEMANTIC_WEIGHT.

    A query that is a record key (BUG-1432), or made of codes only (error
    codes, abbreviations: AADSTS50105, SSR WCHR), asks for those exact
    tokens: meaning has nothing to add, so the semantic arm does not vote.
    Keyword evidence is weak when the best keyword match holds less than
    weak_coverage of what the query says (its idf-weighted share of the
    query's known words, keyword.coverage): a paraphrase shares only common
    words with its answer, and the relaxed any-word list ranks noise. Below
    that share the keyword arm's weight falls with its square.
    """
    if trace:
        return Weights(1.0, TRACE_SEMANTIC_WEIGHT)
    words = query.split()
    if KEY_QUERY.match(query) or (words and all(CODE.match(word) for word in words)):
        return Weights(1.0, 0.0)
    weak = config.current().weak_coverage
    if weak and coverage < weak:
        return Weights(round((coverage / weak) ** 2, 4), 1.0)
    return Weights()


def fuse(
    keyword_result: ArmResult | None,
    semantic_result: ArmResult | None,
    query=None,
    feedback_result: ArmResult | None = None,
) -> dict[int, Candidate]:
    """Reciprocal rank fusion; `query` is this query's Weights (evidence), on
    top of the configured ones. `feedback_result`, the semantic arm's second
    pass (semantic.feedback), is a third list with the semantic arm's weight
    times feedback_list_weight."""
    constants = config.current()
    k = constants.rrf_k
    query = query or Weights()
    semantic = constants.semantic_weight * query.semantic
    weights = {
        "keyword": constants.keyword_weight * query.keyword,
        "semantic": semantic,
        "feedback": semantic * constants.feedback_list_weight,
    }
    candidates: dict[int, Candidate] = {}
    arms = (("keyword", keyword_result), ("semantic", semantic_result), ("feedback", feedback_result))
    for arm, result in arms:
        if result is None:
            continue
        for rank, (doc_id, score) in enumerate(result.ranked, start=1):
            candidate = candidates.setdefault(doc_id, Candidate(doc_id))
            setattr(candidate, f"{arm}_rank", rank)
            setattr(candidate, f"{arm}_score", score)
            candidate.score += weights[arm] / (k + rank)
            if arm != "feedback" and getattr(query, arm) != 1.0:
                candidate.boosts[f"{arm}_weight"] = getattr(query, arm)
            if candidate.info is None:
                candidate.info = result.info.get(doc_id)
    return candidates


# Leading tags in brackets, as trackers and testers write them: "[iOS]", "[5.0.1]".
_TAGS = re.compile(r"^\s*(?:\[[^\]]*\]\s*)+")


def normalize_title(text: str) -> str:
    """A title's words, lower case, without leading [tags]: "[iOS] Spinner
    never stops" and "Spinner never stops" are the same title."""
    return " ".join(re.findall(r"\w+", _TAGS.sub("", text).lower()))


def boost(
    candidates: dict[int, Candidate],
    query: str | None,
    key_match: int | None,
    hybrid: bool = False,
    feedback: bool = False,
) -> None:
    """Apply the documented boosts. In `hybrid` search, a record that has
    no vector yet gets the semantic lists' share at its keyword rank (the
    semantic arm's, and the feedback list's when it ran), so records
    waiting for embedding are not pushed down while the index lags."""
    if not candidates:
        return
    missing = [c.id for c in candidates.values() if c.info is None]
    found = row_info(missing)
    for doc_id in missing:  # a key match or typo match deleted a moment ago is gone
        if doc_id in found:
            candidates[doc_id].info = found[doc_id]
        else:
            del candidates[doc_id]
    constants = config.current()
    k = constants.rrf_k
    title_boost = constants.title_boost / k
    wanted = normalize_title(query) if query else None
    ends = (wanted.split(" ")[0], wanted.split(" ")[-1]) if wanted else ()
    # Ages count from today's midnight, not from this instant, so scores (and
    # so the cursors built from them) stay the same from page to page.
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    for candidate in candidates.values():
        info = candidate.info
        if hybrid and not info.has_vector and candidate.keyword_rank and candidate.semantic_rank is None:
            lists = 1 + (constants.feedback_list_weight if feedback else 0)
            share = constants.semantic_weight * lists / (k + candidate.keyword_rank)
            candidate.boosts["awaiting_embedding"] = round(share, 6)
            candidate.score += share
        # The substring tests spare normalizing titles that cannot be equal.
        lower = info.title.lower()
        if wanted and all(end in lower for end in ends) and normalize_title(info.title) == wanted:
            candidate.boosts["exact_title"] = title_boost
            candidate.score += title_boost
        _recency(candidate, today)
    if key_match is not None and key_match in candidates:
        candidates[key_match].boosts["key_match"] = 1.0
        candidates[key_match].score += 1.0


def _recency(candidate: Candidate, today: float) -> None:
    constants = config.current()
    weight = constants.recency_weight
    if not weight:
        return
    age = max(today - candidate.info.updated, 0.0)
    factor = 1 + weight * 0.5 ** (age / (constants.recency_half_life * 86400))
    candidate.boosts["recency"] = round(factor, 4)
    candidate.score *= factor
