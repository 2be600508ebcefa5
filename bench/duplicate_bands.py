"""What check_duplicates' bands mean: the share of right candidates in each, on drafts of several shapes.

    .venv/bin/python bench/duplicate_bands.py [--records 5000] [--drafts 600] [--set DIR] [--rows F]

Drafts of two kinds, each a stored bug read back as a draft (the bug itself
left out of the corpus, as a bug page's "Likely duplicates" reads it), its
top 10 candidates looked at:

- the demo's bugs (backlog.demo at --records, seed 0): title and text, as a
  bug page asks. A candidate is right when it is linked to the draft's
  cluster (duplicate_of) or the generator made both as the same failure in
  the same scenario (backlog.demo.generate's truth); a wrong one is told
  apart as in another feature, another scenario of the feature, or another
  symptom of the scenario;
- with --set (gitbugs-hadoop): each `title` query's report, from its title
  alone and from title and text; right when judged relevant (Hadoop's
  labels are sparse: a lower bound).

Printed: each band's candidates and the share right, per kind of draft, with
the wrong ones' kinds. --rows writes every candidate's evidence (similarity,
title overlap, same title, same feature) and label as JSON lines, for
fitting the bands.
"""

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

from tqdm import tqdm

from backlog import demo
from backlog.imports import import_records
from search import db
from search.evaluation.runner import fresh_database
from search.evaluation.sets import load_judged_set
from search.indexing.vectors import embed_pending
from search.operations import duplicates
from search.query.scope import Filters, build_scope, leaving_out
from search.ranking import config, pipeline

TOP = 10


def candidates(
    title: str, body: str, product: str | None, key: str, feature: str | None = None
) -> list[tuple[dict, duplicates.Evidence, float]]:
    """The draft's top candidates with their evidence and confidence, the bug `key` (of
    `feature`, as a bug page names it) left out."""
    filters = Filters(entities=("bug",), products=(product,) if product else ())
    with leaving_out([key]):
        scope = build_scope(filters, None)
        # The report's own words are counted in the statistics, as search_eval's duplicate task does.
        plan = duplicates.DraftPlan(title, body, "hybrid", config.current().arm_depth, shared_by=2 if body else 1)
        ranking = pipeline.rank(plan, scope)
        return duplicates.evidence(ranking.order()[:TOP], plan, ranking, feature)


def stored(keys: list[str]) -> dict[str, tuple]:
    """key -> (title, body, product key, feature key) of the index's bugs."""
    with db.cursor() as cursor:
        cursor.execute(
            """SELECT d.key, d.title, d.body, p.key, f.key FROM search_document d
               LEFT JOIN backlog_product p ON p.id = d.product_id LEFT JOIN backlog_feature f ON f.id = d.feature_id
               WHERE d.key = ANY(%s)""",
            [keys],
        )
        return {row[0]: row[1:] for row in cursor.fetchall()}


def demo_rows(records: int, drafts: int) -> list[dict]:
    truth: dict[str, tuple] = {}
    lines = [json.dumps(record) for record in demo.generate(records, 0, truth)]
    report = import_records(lines)
    assert report.written and not report.problems, report.problems[:3]
    embed_pending()
    root = {}
    for line in lines:
        record = json.loads(line)
        if record["kind"] == "bug":
            root[record["key"]] = root.get(record.get("duplicate_of"), record.get("duplicate_of")) or record["key"]
    bugs = sorted(truth, key=lambda key: int(key.split("-")[1]))
    chosen = bugs[:: max(1, len(bugs) // drafts)][:drafts]
    texts = stored(bugs)
    rows = []
    for key in tqdm(chosen, desc="demo drafts", unit="draft"):
        title, body, product, feature = texts[key]
        for rank, (row, seen, confidence) in enumerate(candidates(title, body or "", product, key, feature), 1):
            other = row["key"]
            if root.get(other) == root[key] or truth[other] == truth[key]:
                label = "right"
            elif truth[other][0] != truth[key][0]:
                label = "another feature"
            elif truth[other][3] != truth[key][3]:
                label = "another scenario"
            else:
                label = "another symptom"
            rows.append(row_of("demo, title + text", key, rank, row, seen, confidence, label, feature))
    return rows


def set_rows(path: str) -> list[dict]:
    judged = load_judged_set(path)
    report = import_records(judged.records)
    assert report.written, report.problems[:3]
    embed_pending()
    queries = [q for q in judged.queries if judged.types.get(q.id) == "title" and len(q.exclude) == 1]
    texts = stored([next(iter(q.exclude)) for q in queries])
    rows = []
    for query in tqdm(queries, desc=f"{judged.name} drafts", unit="draft"):
        key = next(iter(query.exclude))
        title, body, product, feature = texts[key]
        relevant = {k for k, grade in judged.grades.get(query.id, {}).items() if grade > 0}
        for shape, text in (("title alone", ""), ("title + text", body or "")):
            for rank, (row, seen, confidence) in enumerate(candidates(title, text, None, key), 1):
                label = "right" if row["key"] in relevant else "not labelled"
                rows.append(row_of(f"{judged.name}, {shape}", key, rank, row, seen, confidence, label, feature))
    return rows


def row_of(shape, draft, rank, row, seen, confidence, label, feature) -> dict:
    return {
        "shape": shape,
        "draft": draft,
        "candidate": row["key"],
        "rank": rank,
        "similarity": seen.similarity,
        "title_overlap": round(seen.title_overlap, 4),
        "same_title": seen.same_title,
        "same_feature": feature is not None and row["feature"] == feature,
        "confidence": round(confidence, 4),
        "band": duplicates.band(confidence),
        "label": label,
    }


def summary(rows: list[dict]) -> None:
    by_shape = defaultdict(list)
    for row in rows:
        by_shape[row["shape"]].append(row)
    print(f"\n{'drafts':28} {'band':7} {'candidates':>10} {'right':>6}  wrong ones")
    for shape, shaped in by_shape.items():
        for name in ("high", "medium", "low"):
            banded = [row for row in shaped if row["band"] == name]
            if not banded:
                print(f"{shape:28} {name:7} {0:>10}      -")
                continue
            right = sum(row["label"] == "right" for row in banded)
            wrong = Counter(row["label"] for row in banded if row["label"] != "right")
            same = sum(row["same_title"] for row in banded if row["label"] != "right")
            kinds = ", ".join(f"{kind} {n}" for kind, n in wrong.most_common())
            print(f"{shape:28} {name:7} {len(banded):>10} {right / len(banded):6.2f}  {kinds}; same title {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000, help="the demo's size (make run's)")
    parser.add_argument("--drafts", type=int, default=600, help="demo bugs read back as drafts")
    parser.add_argument("--set", help="also a judged set with title queries (gitbugs-hadoop)")
    parser.add_argument("--rows", help="write every candidate's evidence and label here (JSON lines)")
    args = parser.parse_args()
    with fresh_database("search_eval_bands", keep=False):
        rows = demo_rows(args.records, args.drafts)
    if args.set:
        with fresh_database("search_eval_bands", keep=False):
            rows += set_rows(args.set)
    if args.rows:
        Path(args.rows).write_text("".join(json.dumps(row) + "\n" for row in rows))
    summary(rows)


if __name__ == "__main__":
    main()
