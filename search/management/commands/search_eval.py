"""`manage.py search_eval DIR`: ranking quality on a judged query set.
`manage.py search_eval --from-links`: on this database's own duplicate links.

The set's records go into a database of the command's own (search_eval_<pid>
unless --database-name says otherwise), created empty and migrated by
Django's test-database machinery as bench/import_bench.py does, and dropped
at the end unless --keep-db: the user's data is never read or changed, and
two runs at the same time do not meet. --from-links reads the database in
use as it is, and writes nothing: its linked bugs are the queries
(search.evaluation.sets.judged_set_from_links). The metrics and the runner are in
search/evaluation/; this command only parses and prints.
"""

import json
import os
from argparse import ArgumentTypeError
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from backlog.imports import import_records
from backlog.management.commands._progress import progress_bars
from backlog.models import Product
from search.evaluation import labels
from search.evaluation.metrics import DUPLICATE_FORMULAS, DUPLICATE_METRICS, FORMULAS
from search.evaluation.runner import (
    DATABASE_PREFIX,
    DUPLICATE_TYPES,
    MODES,
    EngineRanking,
    Report,
    evaluate,
    evaluate_duplicates,
    fresh_database,
)
from search.evaluation.sets import JudgedSetError, judged_set_from_links, load_judged_set

PROBLEMS_SHOWN = 10
HEADER = f"{'mode':<10} {'nDCG@10':>8} {'Recall@100':>10} {'MRR@10':>7}"
DUPLICATE_HEADER = f"{'ranking':<17} {'R@5':>6} {'R@10':>6} {'MRR@10':>7} {'RR@10':>6} {'MAP':>6}"


class Command(BaseCommand):
    help = "Measure ranking quality (nDCG@10, Recall@100, MRR@10) on a judged query set, in a fresh database."

    def add_arguments(self, parser):
        parser.add_argument(
            "folder", metavar="DIR", nargs="?", help="a judged set folder: records.jsonl, queries.jsonl, qrels.tsv"
        )
        parser.add_argument(
            "--from-links",
            action="store_true",
            help="instead of DIR: judge search on this database's own duplicate links (each linked bug's title "
            "a query, the rest of its cluster relevant), read-only; implies --duplicates",
        )
        parser.add_argument(
            "--product",
            dest="products",
            action="append",
            metavar="KEY",
            help="with --from-links: only the links of this product, searched within it (repeatable)",
        )
        parser.add_argument("--modes", type=mode_list, default=list(MODES), help="comma-separated, default: all three")
        parser.add_argument("--json", dest="json_file", help="also write the metrics to this file")
        parser.add_argument("--limit-queries", type=positive, metavar="N", help="only the first N queries")
        parser.add_argument("--keep-db", action="store_true", help="leave the evaluation database for inspection")
        parser.add_argument(
            "--database-name",
            help=f"the evaluation database, dropped first if it exists; must start with {DATABASE_PREFIX} "
            f"(default: {DATABASE_PREFIX}_<process id>, so that runs at the same time never share one)",
        )
        parser.add_argument(
            "--duplicates",
            action="store_true",
            help=f"also score check_duplicates on the queries of type {' or '.join(DUPLICATE_TYPES)}: from the "
            "title alone, and from title + text when the query names the one report it was taken from "
            "(its exclude), beside hybrid search of the same title",
        )
        parser.add_argument("--progress", action="store_true", default=None, help="progress bars even off a terminal")
        parser.add_argument("--no-progress", dest="progress", action="store_false")

    def handle(self, folder, modes, json_file, limit_queries, progress, duplicates, from_links, products, **options):
        if bool(folder) == from_links:
            raise CommandError("give a judged set folder (DIR) or --from-links, not both and not neither")
        if products and not from_links:
            raise CommandError("--product goes with --from-links (a judged set's folder holds its own records)")
        bars = progress_bars(progress)
        labelled = []
        if from_links:
            self.known(products)
            labelled = labels.reports(products)
            report, duplicate_report, ranking = self.from_links(modes, products, limit_queries, bars, labelled)
        else:
            try:
                judged_set = load_judged_set(folder)
            except JudgedSetError as exc:
                raise CommandError(str(exc)) from None
            if limit_queries:
                judged_set = judged_set.first(limit_queries)
            report, duplicate_report, ranking = self.in_fresh_database(judged_set, modes, duplicates, bars, **options)
        if report is not None:  # else: no duplicate link, other labels only
            self.stdout.write(format_report(report))
        if duplicate_report:
            self.stdout.write("\n" + format_duplicate_report(duplicate_report))
        for other in labelled:
            self.stdout.write("\n" + "\n".join(other.lines))
        for mode, run in report.runs.items() if report else ():
            if run.failures:
                listed = "; ".join(f"{qid}: {why}" for qid, why in list(run.failures.items())[:PROBLEMS_SHOWN])
                self.stderr.write(f"{mode}: queries failed, scored as empty results: {len(run.failures)} ({listed})")
            if fallbacks := ranking.fallbacks.get(mode):
                self.stderr.write(f"{mode}: queries answered in another mode (missing embeddings?): {fallbacks}")
        if json_file:
            data = report.to_json() if report else {}
            if duplicate_report:
                data["duplicates"] = duplicate_report.to_json()
            if labelled:
                data["labels"] = {other.name: other.data for other in labelled}
            Path(json_file).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    @staticmethod
    def known(products):
        """--product's keys, each a product's, before anything is ranked."""
        if products:
            known = set(Product.objects.filter(key__in=products).values_list("key", flat=True))
            if missing := [key for key in products if key not in known]:
                raise CommandError(f"--product {missing[0]}: no such product; the keys are like PRD-1")

    def from_links(self, modes, products, limit_queries, bars, labelled):
        """This database, read as it is: its duplicate links are the judgments; (None, None,
        None) when it has none but other `labelled` judgments (search.evaluation.labels)."""
        judged_set = judged_set_from_links(products)
        if not judged_set.queries and labelled:
            return None, None, None
        if not judged_set.queries:
            where = f" in {', '.join(products)}" if products else ""
            raise CommandError(
                f"no bug is linked as a duplicate{where}: link some (duplicate_of, in the admin, the staff UI's "
                "report form or an import) and run this again"
            )
        if limit_queries:
            judged_set = judged_set.first(limit_queries)
        ranking = EngineRanking(products)
        try:
            report = evaluate(judged_set, ranking, modes, progress=bars)
            duplicate_report = evaluate_duplicates(judged_set, bars, products)
        except JudgedSetError as exc:
            raise CommandError(str(exc)) from None
        return report, duplicate_report, ranking

    def in_fresh_database(self, judged_set, modes, duplicates, bars, keep_db, database_name, **options):
        """The set's records in a database of the command's own, embedded and analyzed."""
        ranking = EngineRanking()
        database_name = database_name or f"{DATABASE_PREFIX}_{os.getpid()}"

        with fresh_database(database_name, keep=keep_db):
            imported = import_records(judged_set.records, progress=bars, total_lines=len(judged_set.records))
            if imported.problems:
                shown = "\n".join(str(problem) for problem in imported.problems[:PROBLEMS_SHOWN])
                raise CommandError(f"records.jsonl: {len(imported.problems)} problem(s), nothing imported:\n{shown}")
            if {"semantic", "hybrid"} & set(modes):
                from search.indexing.vectors import embed_pending  # loads the embedding model: only when needed

                embed_pending(progress=bars)
            # Fresh statistics before the first query, whatever the set's size: the filters'
            # shares are read from pg_stats, and an autoanalyze that lands mid-run would
            # change the plans, and so the timings, of the queries after it.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE search_document")
            try:
                report = evaluate(judged_set, ranking, modes, progress=bars)
                duplicate_report = evaluate_duplicates(judged_set, bars) if duplicates else None
            except JudgedSetError as exc:
                raise CommandError(str(exc)) from None
        if keep_db:
            self.stderr.write(f"The evaluation database {database_name} was kept.")
        return report, duplicate_report, ranking


def format_report(report: Report) -> str:
    """All scored queries, then one table per query type, then how the numbers are computed."""
    lines = [
        f"{report.judged_set.name}: queries scored: {len(report.scored)},"
        f" skipped for having no relevant judgment: {len(report.skipped)}",
        "",
        f"{HEADER} {'median ms':>9} {'failed':>6}",
    ]
    for mode, run in report.runs.items():
        lines.append(f"{_row(mode, report.mean(mode))} {run.median_ms:>9.1f} {len(run.failures):>6}")
    for kind, ids in report.by_type().items():
        lines += ["", f"type {kind}, queries: {len(ids)}", HEADER]
        lines += [_row(mode, report.mean(mode, ids)) for mode in report.runs]
    return "\n".join([*lines, "", FORMULAS, "median ms: time per query, every page included."])


def format_duplicate_report(report: Report) -> str:
    lines = [
        f"Duplicate finding: {len(report.scored)} queries of type {' or '.join(DUPLICATE_TYPES)}",
        "",
        f"{DUPLICATE_HEADER} {'median ms':>9}",
    ]
    for run_name, run in report.runs.items():
        means = report.mean(run_name)
        cells = " ".join(f"{means[m]:>{w}.3f}" for m, w in zip(DUPLICATE_METRICS, (6, 6, 7, 6, 6), strict=True))
        lines.append(f"{run_name:<17} {cells} {run.median_ms:>9.1f}")
    return "\n".join([*lines, "", DUPLICATE_FORMULAS])


def _row(mode: str, means: dict[str, float]) -> str:
    return f"{mode:<10} {means['ndcg@10']:>8.3f} {means['recall@100']:>10.3f} {means['mrr@10']:>7.3f}"


def mode_list(value: str) -> list[str]:
    chosen = [mode.strip() for mode in value.split(",") if mode.strip()]
    if not chosen or set(chosen) - set(MODES):
        raise ArgumentTypeError(f"choose from {', '.join(MODES)}, comma-separated; got {value!r}")
    return list(dict.fromkeys(chosen))


def positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ArgumentTypeError(f"a whole number of at least 1, not {value!r}")
    return int(value)
