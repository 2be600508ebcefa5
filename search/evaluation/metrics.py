"""Ranking metrics, with linear gains as trec_eval: nDCG@10, Recall@100, MRR@10, and the duplicate task's."""

import math
from collections.abc import Iterable

DEPTH = 100  # the deepest cut: how many keys a ranking needs to return
METRICS = ("ndcg@10", "recall@100", "mrr@10")
DUPLICATE_METRICS = ("recall@5", "recall@10", "mrr@10", "rr@10", "map")
FORMULAS = (
    "nDCG@10 = DCG@10 / IDCG@10, DCG@10 = sum of grade(i) / log2(i + 1) over ranks i = 1..10 "
    "(linear gains, as trec_eval's ndcg_cut), IDCG@10 from the query's judged grades sorted best first.\n"
    "Recall@100 = relevant (grade >= 1) in the top 100 / all relevant. "
    "MRR@10 = 1 / rank of the first relevant in the top 10, else 0.\n"
    "A query's excluded keys are removed before the cuts; means are over the queries with a relevant judgment."
)
DUPLICATE_FORMULAS = (
    "R@k = relevant (the report's labelled duplicates) in the top k / all relevant. "
    "MRR@10 as above. RR@10 = share of the queries with a relevant record in the top 10\n"
    "(the recall rate of the duplicate-detection literature). "
    "MAP = mean over queries of the average precision at each relevant record's rank, to rank 100."
)


def dcg(grades: Iterable[int]) -> float:
    """Discounted cumulative gain of grades in rank order: sum of grade / log2(rank + 1)."""
    return sum(grade / math.log2(rank + 1) for rank, grade in enumerate(grades, start=1))


def ndcg_at_k(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    """DCG of the top k over the DCG of the best possible top k of the judged grades."""
    ideal = dcg(sorted(grades.values(), reverse=True)[:k])
    return dcg(grades.get(key, 0) for key in ranked[:k]) / ideal if ideal else 0.0


def recall_at_k(ranked: list[str], grades: dict[str, int], k: int = 100) -> float:
    """The share of the relevant records (grade >= 1) that are in the top k."""
    relevant = {key for key, grade in grades.items() if grade >= 1}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def reciprocal_rank_at_k(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    """1 / the rank of the first relevant record in the top k, or 0 when there is none."""
    for rank, key in enumerate(ranked[:k], start=1):
        if grades.get(key, 0) >= 1:
            return 1 / rank
    return 0.0


def hit_at_k(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    """1 when a relevant record is in the top k, else 0: averaged, the
    duplicate-detection literature's recall rate RR@k."""
    return float(any(grades.get(key, 0) >= 1 for key in ranked[:k]))


def average_precision(ranked: list[str], grades: dict[str, int]) -> float:
    """Mean of the precision at the rank of each relevant record (one missing
    from the ranking counts 0), over all relevant records."""
    relevant = {key for key, grade in grades.items() if grade >= 1}
    found, total = 0, 0.0
    for rank, key in enumerate(ranked, start=1):
        if key in relevant:
            found += 1
            total += found / rank
    return total / len(relevant) if relevant else 0.0


def scores(ranked: list[str], grades: dict[str, int]) -> dict[str, float]:
    return {
        "ndcg@10": ndcg_at_k(ranked, grades, 10),
        "recall@100": recall_at_k(ranked, grades, DEPTH),
        "mrr@10": reciprocal_rank_at_k(ranked, grades, 10),
        # The duplicate-detection measures (search_eval --duplicates).
        "recall@5": recall_at_k(ranked, grades, 5),
        "recall@10": recall_at_k(ranked, grades, 10),
        "rr@10": hit_at_k(ranked, grades, 10),
        "map": average_precision(ranked, grades),
    }


def cleaned(keys: list[str], exclude: frozenset[str]) -> list[str]:
    """The ranking as scored: excluded and repeated keys removed, cut at DEPTH."""
    return [key for key in dict.fromkeys(keys) if key not in exclude][:DEPTH]
