"""check_duplicates with a pasted stack trace, on eval/trace-hadoop's kept database.

    .venv/bin/python manage.py search_eval eval/trace-hadoop --keep-db --database-name search_eval_trace_hadoop
    .venv/bin/python bench/trace_drafts.py eval/trace-hadoop search_eval_trace_hadoop

A draft for each `trace` query: its title the bug's exception line (the
set's `exception` query), its description the trace. The bug is in the
corpus, as one filed before is, so check_duplicates should name it first.
Prints R@5, R@10, MRR@10, RR@10 and MAP over the drafts (hybrid, as the
tool's default).
"""

import argparse
from dataclasses import replace

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="eval/trace-hadoop")
    parser.add_argument("database", help="a database search_eval --keep-db left, holding this set")
    args = parser.parse_args()
    if not args.database.startswith("search_eval_"):
        parser.error("the database must be one search_eval kept (search_eval_...)")

    from django.conf import settings
    from django.db import connection

    from search import db
    from search.evaluation.metrics import DEPTH, DUPLICATE_METRICS
    from search.evaluation.runner import evaluate
    from search.evaluation.sets import load_judged_set
    from search.operations.duplicates import DraftPlan
    from search.query.scope import Filters, build_scope
    from search.ranking import pipeline

    settings.DATABASES["default"]["NAME"] = args.database
    connection.settings_dict["NAME"] = args.database
    judged_set = load_judged_set(args.folder)
    exception_lines = {q.id.split("-", 1)[1]: q.text for q in judged_set.queries if q.id.startswith("exception-")}
    drafts = [q for q in judged_set.queries if judged_set.types.get(q.id) == "trace"]

    def check(query, _mode) -> list[str]:
        plan = DraftPlan(exception_lines[query.id.split("-", 1)[1]], query.text, "hybrid", DEPTH)
        ids = [c.id for c in pipeline.rank(plan, build_scope(Filters(entities=("bug",)), None)).order()[:DEPTH]]
        with db.cursor() as cursor:
            cursor.execute("SELECT id, key FROM search_document WHERE id = ANY(%s)", [ids])
            keys = dict(cursor.fetchall())
        return [keys[i] for i in ids if i in keys]

    report = evaluate(replace(judged_set, queries=drafts), check, ["check"], metrics=DUPLICATE_METRICS)
    means = report.mean("check")
    print(f"{len(drafts)} drafts: " + ", ".join(f"{metric} {means[metric]:.3f}" for metric in DUPLICATE_METRICS))


if __name__ == "__main__":
    main()
