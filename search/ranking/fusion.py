"""Fusion: the arms' ranked lists into one, with each query's arm weights and the boosts.

score = sum over the arms of w * value(record in that arm's list), where w
is the configured arm weight (keyword_weight, semantic_weight) times this
query's (`weights`); in hybrid, the semantic arm's second pass
(semantic.feedback) is a third list of weight w_sem * feedback_list_weight.
A record an arm did not list gets nothing from it. `fusion` chooses value:

- "zscore" (the default): (score - floor) / sd, the arm's own score in
  standard deviations of its first zscore_depth scores, above the lowest it
  listed (or above 0, the score of a record that does not match, when the
  keyword arm listed every match). An arm that is sure of its best records
  (a stack trace's one bug, a paraphrase's nearest neighbour) puts them
  many deviations above the rest; an arm that is guessing ranks a flat
  list, and its first record weighs little more than its hundredth. So
  each query weighs its arms by how peaked their scores are (the
  normalized query-performance predictors of Shtok et al.'s NQC) without
  a threshold fitted to one set; measured against RRF in docs/benchmarks.md.
- "rrf": reciprocal rank fusion, 1 / (rrf_k + rank): ranks only.

Boosts, after fusion: a record whose title equals the query gets as much as
one more arm ranking it first (title_boost x the largest first-record value
of the fused lists; 1 / rrf_k under RRF); recency, when recency_weight is
above 0, multiplies the score by 1 + recency_weight * 0.5 ** (age in days /
recency_half_life). It is off by default: the judged sets' relevant records
are as often older as newer than their query's, so even +2% only reordered
near-ties at random (held out: gitbugs-hadoop 0.674 -> 0.680 without it;
docs/benchmarks.md); sort=recent is there for the newest first. A query
that is a record key puts that record first. The constants named here are
fields of search.ranking.config.
"""

import re
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import zip_longest

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


class Fused(dict[int, Candidate]):
    """The fused candidates by id, and what the boosts scale by: `first`, the
    largest value one arm gave its first record (weighted), and `semantic`,
    the semantic lists' value at each rank (weighted, the feedback list's
    added), for records that await their vector."""

    def __init__(self) -> None:
        super().__init__()
        self.first = 0.0
        self.semantic: list[float] = []


def values(result: ArmResult, keyword: bool = False) -> list[float]:
    """What each ranked record of `result` (the `keyword` arm's or not) gets from its list, before its weight."""
    constants = config.current()
    if constants.fusion == "rrf":
        return [1 / (constants.rrf_k + rank) for rank in range(1, len(result.ranked) + 1)]
    scores = [score for _, score in result.ranked]
    if not scores:
        return []
    head = scores[: constants.zscore_depth]
    # Every match listed (a keyword arm that stopped short of its depth, exactly
    # counted): a record it left out does not match, and scores 0.
    whole = keyword and result.exact and result.total <= len(scores)
    floor = 0.0 if whole else scores[-1]
    spread = statistics.pstdev(head) or (head[0] - floor)
    if not spread:  # every score equal (a listing, newest first): the list says only its order
        return [(len(scores) - rank) / len(scores) for rank in range(len(scores))]
    return [(score - floor) / spread for score in scores]


def fuse(
    keyword_result: ArmResult | None,
    semantic_result: ArmResult | None,
    query=None,
    feedback_result: ArmResult | None = None,
) -> Fused:
    """The arms' lists in one; `query` is this query's Weights (evidence), on
    top of the configured ones. `feedback_result`, the semantic arm's second
    pass (semantic.feedback), is a third list with the semantic arm's weight
    times feedback_list_weight."""
    constants = config.current()
    query = query or Weights()
    semantic = constants.semantic_weight * query.semantic
    weights = {
        "keyword": constants.keyword_weight * query.keyword,
        "semantic": semantic,
        "feedback": semantic * constants.feedback_list_weight,
    }
    candidates = Fused()
    shares: list[float] = []
    arms = (("keyword", keyword_result), ("semantic", semantic_result), ("feedback", feedback_result))
    for arm, result in arms:
        if result is None:
            continue
        worth = values(result, keyword=arm == "keyword")
        if worth:
            candidates.first = max(candidates.first, weights[arm] * worth[0])
        if arm != "keyword":
            weighted = [weights[arm] * value for value in worth]
            shares = [a + b for a, b in zip_longest(shares, weighted, fillvalue=0.0)]
        for rank, ((doc_id, score), value) in enumerate(zip(result.ranked, worth, strict=True), start=1):
            candidate = candidates.setdefault(doc_id, Candidate(doc_id))
            setattr(candidate, f"{arm}_rank", rank)
            setattr(candidate, f"{arm}_score", score)
            candidate.score += weights[arm] * value
            if arm != "feedback" and getattr(query, arm) != 1.0:
                candidate.boosts[f"{arm}_weight"] = getattr(query, arm)
            if candidate.info is None:
                candidate.info = result.info.get(doc_id)
    candidates.semantic = shares
    return candidates


# Leading tags in brackets, as trackers and testers write them: "[iOS]", "[5.0.1]".
_TAGS = re.compile(r"^\s*(?:\[[^\]]*\]\s*)+")


def normalize_title(text: str) -> str:
    """A title's words, lower case, without leading [tags]: "[iOS] Spinner
    never stops" and "Spinner never stops" are the same title."""
    return " ".join(re.findall(r"\w+", _TAGS.sub("", text).lower()))


def boost(candidates: Fused, query: str | None, key_match: int | None, hybrid: bool = False) -> None:
    """Apply the documented boosts. In `hybrid` search, a record that has
    no vector yet gets the semantic lists' share at its keyword rank (what
    the semantic arm's list, and the feedback list's when it ran, give that
    rank), so records waiting for embedding are not pushed down while the
    index lags."""
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
    rrf = constants.fusion == "rrf"
    title_boost = constants.title_boost * (1 / constants.rrf_k if rrf else candidates.first)
    wanted = normalize_title(query) if query else None
    ends = (wanted.split(" ")[0], wanted.split(" ")[-1]) if wanted else ()
    # Ages count from today's midnight, not from this instant, so scores (and
    # so the cursors built from them) stay the same from page to page.
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    for candidate in candidates.values():
        info = candidate.info
        if hybrid and not info.has_vector and candidate.keyword_rank and candidate.semantic_rank is None:
            share = _semantic_share(candidates, candidate.keyword_rank)
            candidate.boosts["awaiting_embedding"] = round(share, 6)
            candidate.score += share
        # The substring tests spare normalizing titles that cannot be equal.
        lower = info.title.lower()
        if wanted and all(end in lower for end in ends) and normalize_title(info.title) == wanted:
            candidate.boosts["exact_title"] = title_boost
            candidate.score += title_boost
        _recency(candidate, today)
    if key_match is not None and key_match in candidates:
        # Above every other candidate, whatever the scale of the scores.
        lift = 1.0 + max(candidate.score for candidate in candidates.values())
        candidates[key_match].boosts["key_match"] = round(lift, 6)
        candidates[key_match].score += lift


def _semantic_share(candidates: Fused, rank: int) -> float:
    """What the semantic lists give their record at `rank`: under RRF the
    lists' weights / (rrf_k + rank) at any rank; by z-score, their value at
    that rank where they reach it."""
    shares, constants = candidates.semantic, config.current()
    if constants.fusion == "rrf" and shares:
        return shares[0] * (constants.rrf_k + 1) / (constants.rrf_k + rank)
    return shares[rank - 1] if rank <= len(shares) else 0.0


def _recency(candidate: Candidate, today: float) -> None:
    constants = config.current()
    weight = constants.recency_weight
    if not weight:
        return
    age = max(today - candidate.info.updated, 0.0)
    factor = 1 + weight * 0.5 ** (age / (constants.recency_half_life * 86400))
    candidate.boosts["recency"] = round(factor, 4)
    candidate.score *= factor
