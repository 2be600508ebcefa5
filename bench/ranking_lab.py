"""Ranking variants side by side on a kept evaluation database.

`search_eval` loads and embeds a judged set on every run; a ranking idea is
a ranking constant (search/ranking/config.py), so this answers the set's
queries again on a database `search_eval --keep-db` left behind, once per
variant, in one process:

    .venv/bin/python manage.py search_eval ../shared/eval/qa-public --keep-db \\
        --database-name search_eval_lab_qa_public
    .venv/bin/python bench/ranking_lab.py ../shared/eval/qa-public search_eval_lab_qa_public \\
        --variant now --variant 'k10:rrf_k=10'

A variant is `name` or `name:field=value,field=value`: ranking constants
(docs/settings.md#ranking-constants) set on top of SEARCH_RANKING, like
`flat:title_boost=0,rank_weights=0.1,0.2,0.6,0.6`; values are read as
Python literals where they parse, strings otherwise. Prints nDCG@10 per
mode and query type, one column per variant; `--json` keeps every query's
scores for a closer look.
"""

import argparse
import ast
import json
import re
from pathlib import Path

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)


def variant(text: str) -> tuple[str, dict]:
    name, _, assignments = text.partition(":")
    overrides = {}
    for assignment in filter(None, re.split(r",(?=\s*\w+\s*=)", assignments)):  # a value may hold commas
        key, _, value = assignment.partition("=")
        try:
            overrides[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            overrides[key.strip()] = value.strip()
    return name, overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("database", help="a database search_eval --keep-db left, holding this set")
    parser.add_argument("--variant", action="append", type=variant, required=True)
    parser.add_argument("--modes", default="hybrid", help="comma-separated, default hybrid")
    parser.add_argument("--json", dest="json_file")
    args = parser.parse_args()

    from django.conf import settings
    from django.db import connection
    from django.test import override_settings

    from search.evaluation.runner import EngineRanking, evaluate
    from search.evaluation.sets import load_judged_set
    from search.ranking import config

    rankings = {name: {**settings.SEARCH_RANKING, **overrides} for name, overrides in args.variant}
    for name, ranking in rankings.items():
        try:
            config.build(ranking)
        except config.RankingConfigError as exc:
            parser.error(f"variant {name}: {exc}")

    if not args.database.startswith("search_eval_"):
        parser.error("the database must be one search_eval kept (search_eval_...)")
    settings.DATABASES["default"]["NAME"] = args.database
    connection.settings_dict["NAME"] = args.database
    judged_set = load_judged_set(args.folder)
    modes = [mode for mode in args.modes.split(",") if mode]
    reports = {}
    for name, ranking in rankings.items():
        with override_settings(SEARCH_RANKING=ranking):
            reports[name] = evaluate(judged_set, EngineRanking(), modes)
    names = list(reports)
    print(f"{judged_set.name}: nDCG@10")
    print(f"{'mode / type':<24}" + "".join(f"{name:>12}" for name in names))
    first = reports[names[0]]
    for mode in modes:
        print(f"{mode:<24}" + "".join(f"{reports[n].mean(mode)['ndcg@10']:>12.3f}" for n in names))
        for kind, ids in first.by_type().items():
            label = f"  {kind} ({len(ids)})"
            print(f"{label:<24}" + "".join(f"{reports[n].mean(mode, ids)['ndcg@10']:>12.3f}" for n in names))
    if args.json_file:
        out = {
            name: {mode: {q: s["ndcg@10"] for q, s in report.runs[mode].scores.items()} for mode in modes}
            for name, report in reports.items()
        }
        Path(args.json_file).write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
