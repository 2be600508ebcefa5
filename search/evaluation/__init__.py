"""Relevance evaluation: judged query sets, ranking metrics, and the runner
behind `manage.py search_eval`.

A judged set (shared FORMAT.md, "Judged query sets") is a folder with
`records.jsonl`, `queries.jsonl`, `qrels.tsv` and optionally
`query_types.tsv`. `evaluate` asks a ranking function for each query's ranked
record keys in each mode; the command passes the search engine, tests pass a
stand-in.

Each query is scored on its ranking with its `exclude` keys (and repeats)
removed, then the scores are averaged over the queries that have at least
one relevant judgment; the others are skipped. A record is relevant when its
grade is 1 or more; unlisted records are grade 0.

- nDCG@10 = DCG@10 / IDCG@10, with linear gains as in trec_eval's ndcg_cut:
  DCG@10 = sum over ranks i = 1..10 of grade(i) / log2(i + 1), and IDCG@10 is
  the same sum over all the query's judged grades sorted best first.
- Recall@100 = relevant records in the top 100 / all relevant records.
- MRR@10 = 1 / the rank of the first relevant record in the top 10, else 0.
"""

import json
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import get_args

from django.utils import timezone

from backlog.services import Progress, no_progress
from search.contract import Kind

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
QUERY_FIELDS = {"id", "query", "similar_to", "entities", "exclude"}


class JudgedSetError(ValueError):
    """The folder is not a valid judged set; the message names the file and line."""


class QueryFailed(Exception):
    """The ranking could not answer a query; it counts as an empty result list."""


@dataclass(frozen=True)
class Query:
    id: str
    text: str | None = None
    similar_to: str | None = None
    entities: list[str] | None = None
    exclude: frozenset[str] = frozenset()


@dataclass
class JudgedSet:
    name: str
    records: list[bytes]  # the lines of records.jsonl, for import_records
    queries: list[Query]
    grades: dict[str, dict[str, int]]  # query id -> record key -> grade
    types: dict[str, str] = field(default_factory=dict)  # query id -> type

    def is_judged(self, query: Query) -> bool:
        return any(grade >= 1 for grade in self.grades.get(query.id, {}).values())

    def first(self, count: int) -> "JudgedSet":
        return replace(self, queries=self.queries[:count])


LINKED_BUGS_SQL = """
    SELECT b.id, b.key, b.title FROM backlog_bug b JOIN backlog_product p ON p.id = b.product_id
    WHERE b.duplicate_of_id IS NOT NULL AND (%(products)s::text[] IS NULL OR p.key = ANY(%(products)s))
    ORDER BY b.id
"""


def judged_set_from_links(products: list[str] | None = None) -> JudgedSet:
    """A judged set from the database's own duplicate links (search_eval
    --from-links): each bug linked as a duplicate is a query, its title the
    text, the other bugs of its cluster (the original its links lead to and
    that one's other duplicates) relevant, itself excluded; type `title`.
    Only bugs of `products` (keys) are queries, when given."""
    from django.db import connection

    from backlog.bulk import duplicate_chains

    with connection.cursor() as cursor:
        cursor.execute(LINKED_BUGS_SQL, {"products": products})
        linked = cursor.fetchall()
    links = duplicate_chains([pk for pk, _, _ in linked])  # id -> (key, the id it duplicates)

    def root(pk: int) -> str:
        """The key of the bug the chain from `pk` ends at (where it repeats, on a stored circle)."""
        seen = set()
        while links[pk][1] in links and pk not in seen:
            seen.add(pk)
            pk = links[pk][1]
        return links[pk][0]

    rows = [(key, title, root(pk)) for pk, key, title in linked]
    clusters: dict[str, set[str]] = {}
    for key, _, original in rows:
        clusters.setdefault(original, {original}).add(key)
    queries, grades, types = [], {}, {}
    for key, title, original in rows:
        query = Query(f"link-{key}", title, exclude=frozenset({key}))
        queries.append(query)
        grades[query.id] = {other: 1 for other in clusters[original] if other != key}
        types[query.id] = "title"
    name = "duplicate links" + (f" of {', '.join(products)}" if products else "")
    return JudgedSet(name, [], queries, grades, types)


def load_judged_set(path: str | Path) -> JudgedSet:
    folder = Path(path)
    if not folder.is_dir():
        raise JudgedSetError(f"{folder}: no such folder")
    records, keys = [], set()
    for number, line in _lines(folder / "records.jsonl"):
        keys.add(_json_object(folder / "records.jsonl", number, line).get("key"))
        records.append(line.encode())

    queries = [
        _query(folder / "queries.jsonl", number, line, keys) for number, line in _lines(folder / "queries.jsonl")
    ]
    ids = {query.id for query in queries}
    if len(ids) < len(queries):
        raise JudgedSetError(f"{folder / 'queries.jsonl'}: query ids must be unique")

    grades: dict[str, dict[str, int]] = {}
    qrels = folder / "qrels.tsv"
    for number, (query_id, key, grade) in _tsv(qrels, "query_id<TAB>record_key<TAB>grade", ids):
        if key not in keys:
            raise JudgedSetError(f"{qrels} line {number}: {key} is not in records.jsonl")
        if grade not in ("0", "1", "2", "3"):
            raise JudgedSetError(f"{qrels} line {number}: the grade must be 0, 1, 2 or 3, not {grade!r}")
        if key in grades.setdefault(query_id, {}):
            raise JudgedSetError(f"{qrels} line {number}: {query_id} judges {key} twice")
        grades[query_id][key] = int(grade)

    types = {}
    if (folder / "query_types.tsv").exists():
        types = dict(row for _, row in _tsv(folder / "query_types.tsv", "query_id<TAB>type", ids))
    return JudgedSet(folder.resolve().name, records, queries, grades, types)


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    """The non-blank lines of a UTF-8 file, numbered from 1."""
    if not path.is_file():
        raise JudgedSetError(f"{path}: no such file")
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if line.strip():
                yield number, line.rstrip("\r\n")


def _json_object(path: Path, number: int, line: str) -> dict:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise JudgedSetError(f"{path} line {number}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise JudgedSetError(f"{path} line {number}: expected a JSON object")
    return data


def _query(path: Path, number: int, line: str, keys: set[str]) -> Query:
    data = _json_object(path, number, line)

    def fail(message: str):
        raise JudgedSetError(f"{path} line {number}: {message}")

    if unknown := set(data) - QUERY_FIELDS:
        fail(f"unknown field(s) {', '.join(sorted(unknown))}; expected {', '.join(sorted(QUERY_FIELDS))}")
    if not isinstance(data.get("id"), str) or not data["id"]:
        fail('"id" must be a non-empty string')
    if ("query" in data) == ("similar_to" in data) or not isinstance(data.get("query", data.get("similar_to")), str):
        fail('give exactly one of "query" (text) and "similar_to" (a record key)')
    if "similar_to" in data and data["similar_to"] not in keys:
        fail(f"similar_to {data['similar_to']} is not in records.jsonl")
    entities = data.get("entities")
    if entities is not None and not (isinstance(entities, list) and set(entities) <= set(get_args(Kind))):
        fail(f'"entities" must be a list of {", ".join(get_args(Kind))}')
    exclude = data.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(key, str) for key in exclude):
        fail('"exclude" must be a list of record keys')
    return Query(data["id"], data.get("query"), data.get("similar_to"), entities, frozenset(exclude))


def _tsv(path: Path, layout: str, query_ids: set[str]) -> Iterable[tuple[int, list[str]]]:
    """Numbered rows of a TSV file whose first column is a query id."""
    columns = layout.count("<TAB>") + 1
    for number, line in _lines(path):
        row = line.split("\t")
        if len(row) != columns or not all(row):
            raise JudgedSetError(f"{path} line {number}: expected {layout}, got {line!r}")
        if row[0] not in query_ids:
            raise JudgedSetError(f"{path} line {number}: query {row[0]} is not in queries.jsonl")
        yield number, row


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


@dataclass
class ModeRun:
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # query id -> metric -> value
    milliseconds: list[float] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # query id -> why it counts as empty

    @property
    def median_ms(self) -> float:
        return statistics.median(self.milliseconds)


@dataclass
class Report:
    judged_set: JudgedSet
    scored: list[str]  # ids of the queries with a relevant judgment
    skipped: list[str]  # and of the others
    runs: dict[str, ModeRun] = field(default_factory=dict)
    metrics: tuple[str, ...] = METRICS

    def mean(self, mode: str, query_ids: Iterable[str] | None = None) -> dict[str, float]:
        rows = [self.runs[mode].scores[query_id] for query_id in query_ids or self.scored]
        return {metric: statistics.fmean(row[metric] for row in rows) for metric in self.metrics}

    def by_type(self) -> dict[str, list[str]]:
        """Type -> the ids of its scored queries, for the types that have any."""
        groups: dict[str, list[str]] = {}
        for query_id in self.scored:
            if query_id in self.judged_set.types:
                groups.setdefault(self.judged_set.types[query_id], []).append(query_id)
        return groups

    def to_json(self) -> dict:
        groups = self.by_type()
        return {
            "modes": {mode: self.mean(mode) for mode in self.runs},
            "by_type": {kind: {mode: self.mean(mode, ids) for mode in self.runs} for kind, ids in groups.items()},
            "meta": {
                "set": self.judged_set.name,
                "date": timezone.now().isoformat(timespec="seconds"),
                "queries": len(self.judged_set.queries),
                "scored": len(self.scored),
                "skipped_without_relevant": len(self.skipped),
                "queries_by_type": {kind: len(ids) for kind, ids in groups.items()},
                "median_ms": {mode: run.median_ms for mode, run in self.runs.items()},
                "failed": {mode: len(run.failures) for mode, run in self.runs.items()},
            },
        }


def evaluate(
    judged_set: JudgedSet,
    rank: Callable[[Query, str], list[str]],
    modes: Iterable[str],
    progress: Progress = no_progress,
    metrics: tuple[str, ...] = METRICS,
) -> Report:
    """Score `rank(query, mode)` (ranked record keys) on every judged query in every mode.

    `rank` raises QueryFailed for a query it cannot answer; that query scores
    as an empty ranking and is listed in the mode's failures.
    """
    judged = [query for query in judged_set.queries if judged_set.is_judged(query)]
    if not judged:
        raise JudgedSetError(f"{judged_set.name}: no query has a relevant judgment (grade 1-3) in qrels.tsv")
    skipped = [query.id for query in judged_set.queries if not judged_set.is_judged(query)]
    report = Report(judged_set, scored=[query.id for query in judged], skipped=skipped, metrics=metrics)
    for mode in modes:
        run = report.runs[mode] = ModeRun()
        bar = progress(f"{mode} queries", len(judged))
        for query in judged:
            start = time.perf_counter()
            try:
                keys = rank(query, mode)
            except QueryFailed as exc:
                keys, run.failures[query.id] = [], str(exc)
            run.milliseconds.append((time.perf_counter() - start) * 1000)
            run.scores[query.id] = scores(cleaned(keys, query.exclude), judged_set.grades[query.id])
            bar.update(1)
        bar.close()
    return report
