"""`manage.py search_eval DIR`: ranking quality on a judged query set.
`manage.py search_eval --from-links`: on this database's own duplicate links.

The set's records go into a database of the command's own (search_eval_<pid>
unless --database-name says otherwise), created empty and migrated by
Django's test-database machinery as bench/import_bench.py does, and dropped
at the end unless --keep-db: the user's data is never read or changed, and
two runs at the same time do not meet. --from-links reads the database in
use as it is, and writes nothing: its linked bugs are the queries
(search.evaluation.judged_set_from_links). The metrics and the runner are in
search/evaluation/__init__.py.
"""

import json
import os
from argparse import ArgumentTypeError
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connection
from django.test.utils import setup_databases, teardown_databases
from pydantic import ValidationError

from backlog.management.commands._progress import progress_bars
from backlog.models import Product
from backlog.services import import_records
from search import db
from search.contract import SearchError, SearchRequest, SimilarRequest
from search.evaluation import (
    DEPTH,
    DUPLICATE_FORMULAS,
    DUPLICATE_METRICS,
    FORMULAS,
    JudgedSetError,
    Query,
    QueryFailed,
    Report,
    evaluate,
    judged_set_from_links,
    load_judged_set,
)
from search.operations.duplicates import DraftPlan
from search.operations.search import search
from search.operations.similar import similar
from search.query.scope import Filters, build_scope, leaving_out
from search.ranking import pipeline

MODES = ("keyword", "semantic", "hybrid")
DATABASE_PREFIX = "search_eval"
PROBLEMS_SHOWN = 10
HEADER = f"{'mode':<10} {'nDCG@10':>8} {'Recall@100':>10} {'MRR@10':>7}"
# The duplicate-detection task (--duplicates): the query types that are a new
# report's title, its labelled duplicates relevant, and what answers them.
DUPLICATE_TYPES = ("title", "duplicate")
DUPLICATE_RUNS = ("search:in-corpus", "search", "check:title", "check:title+text")
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
        if from_links:
            report, duplicate_report, ranking = self.from_links(modes, products, limit_queries, bars)
        else:
            try:
                judged_set = load_judged_set(folder)
            except JudgedSetError as exc:
                raise CommandError(str(exc)) from None
            if limit_queries:
                judged_set = judged_set.first(limit_queries)
            report, duplicate_report, ranking = self.in_fresh_database(judged_set, modes, duplicates, bars, **options)
        self.stdout.write(format_report(report))
        if duplicate_report:
            self.stdout.write("\n" + format_duplicate_report(duplicate_report))
        for mode, run in report.runs.items():
            if run.failures:
                listed = "; ".join(f"{qid}: {why}" for qid, why in list(run.failures.items())[:PROBLEMS_SHOWN])
                self.stderr.write(f"{mode}: queries failed, scored as empty results: {len(run.failures)} ({listed})")
            if fallbacks := ranking.fallbacks.get(mode):
                self.stderr.write(f"{mode}: queries answered in another mode (missing embeddings?): {fallbacks}")
        if json_file:
            data = report.to_json()
            if duplicate_report:
                data["duplicates"] = duplicate_report.to_json()
            Path(json_file).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    def from_links(self, modes, products, limit_queries, bars):
        """This database, read as it is: its duplicate links are the judgments."""
        if products:
            known = set(Product.objects.filter(key__in=products).values_list("key", flat=True))
            if missing := [key for key in products if key not in known]:
                raise CommandError(f"--product {missing[0]}: no such product; the keys are like PRD-1")
        judged_set = judged_set_from_links(products)
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
            # Fresh statistics before the first query, whatever the set's size: ranking
            # reads common words' frequencies from pg_stats, and an autoanalyze that
            # lands mid-run would change the answers of the queries after it.
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


def evaluate_duplicates(judged_set, progress, products: list[str] | None = None) -> Report:
    """check_duplicates and search on the set's duplicate-finding queries (DUPLICATE_TYPES)."""
    chosen = [
        query
        for query in judged_set.queries
        if query.text is not None and judged_set.types.get(query.id) in DUPLICATE_TYPES
    ]
    if not chosen:
        raise JudgedSetError(
            f"{judged_set.name}: --duplicates needs text queries of type {' or '.join(DUPLICATE_TYPES)} "
            "in query_types.tsv"
        )
    subset = replace(judged_set, queries=chosen)
    return evaluate(subset, DuplicateRanking(products), DUPLICATE_RUNS, progress=progress, metrics=DUPLICATE_METRICS)


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


@contextmanager
def fresh_database(name: str, keep: bool):
    """Point the default connection at a new, migrated, empty database `name`,
    then drop it (unless `keep`) and point back."""
    if name != DATABASE_PREFIX and not name.startswith(f"{DATABASE_PREFIX}_"):
        # An existing database of that name is dropped: never one holding real data.
        raise CommandError(f"--database-name must be {DATABASE_PREFIX} or start with {DATABASE_PREFIX}_")
    if name == connection.settings_dict["NAME"]:
        raise CommandError(f"--database-name {name} is the database in use; choose another")
    test_settings = connection.settings_dict["TEST"]
    connection.settings_dict["TEST"] = {**test_settings, "NAME": name}
    try:
        old_config = setup_databases(
            verbosity=0, interactive=False, aliases={DEFAULT_DB_ALIAS}, serialized_aliases=set()
        )
    finally:
        connection.settings_dict["TEST"] = test_settings
    try:
        yield
    finally:
        teardown_databases(old_config, verbosity=0, keepdb=True)  # points the connection back
        if not keep:
            # FORCE: a PgBouncer in front keeps idle server connections to the
            # database, and PostgreSQL drops none that has connections.
            with connection._nodb_cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)} WITH (FORCE)")


class EngineRanking:
    """`rank(query, mode)` for evaluate(), over search() and similar(): follows
    next_cursor until DEPTH keys are left after the query's exclusions."""

    def __init__(self, products: list[str] | None = None):
        self.fallbacks: dict[str, int] = {}  # mode -> queries answered in another mode
        self.products = products  # only records of these products (search_eval --from-links --product)

    def __call__(self, query: Query, mode: str) -> list[str]:
        keys, cursor, fell_back = [], None, False
        while True:
            try:
                response = self.page(query, mode, cursor, self.products)
            except ValidationError as exc:  # the request itself, e.g. a query under 2 characters
                raise QueryFailed("; ".join(error["msg"] for error in exc.errors())) from exc
            except SearchError as exc:
                raise QueryFailed(str(exc)) from exc
            fell_back = fell_back or response.mode != mode
            keys += [hit.key for hit in response.results]
            cursor = response.next_cursor
            if not cursor or not response.results or len(set(keys) - query.exclude) >= DEPTH:
                break
        if fell_back:
            self.fallbacks[mode] = self.fallbacks.get(mode, 0) + 1
        return keys

    @staticmethod
    def page(query: Query, mode: str, cursor: str | None, products: list[str] | None = None):
        if query.similar_to is not None:
            request = SimilarRequest(
                key=query.similar_to, mode=mode, entities=query.entities, limit=DEPTH, cursor=cursor
            )
            return similar(request)
        request = SearchRequest(
            query=query.text, mode=mode, entities=query.entities, products=products, limit=DEPTH, cursor=cursor
        )
        return search(request)


class DuplicateRanking:
    """`rank(query, run)` for the duplicate task. The report a query was
    taken from (its `exclude`) is left out of the corpus while ranking (no
    arm reads it, no statistic counts it), as a draft is in no corpus; only
    `search:in-corpus` keeps it, as the main table's search does (it is
    dropped from the ranking after, but its text reaches the feedback pass
    through its own first place).

    `search` is hybrid search of the title; `check:title` asks
    check_duplicates with the title alone; `check:title+text` with the
    title and that report's text."""

    def __init__(self, products: list[str] | None = None):
        self.products = products

    def __call__(self, query: Query, run: str) -> list[str]:
        if run == "search:in-corpus":
            return EngineRanking(self.products)(query, "hybrid")
        with leaving_out(query.exclude):
            if run == "search":
                return EngineRanking(self.products)(query, "hybrid")
            return self.check(query, with_text=run == "check:title+text")

    def check(self, query: Query, with_text: bool) -> list[str]:
        title, body = query.text, ""
        if with_text and len(query.exclude) == 1:
            with db.cursor() as cursor:
                cursor.execute("SELECT title, body FROM search_document WHERE key = %s", list(query.exclude))
                title, body = cursor.fetchone() or (title, "")
        filters = Filters(entities=tuple(query.entities or ["bug"]), products=tuple(self.products or ()))
        scope = build_scope(filters, None)
        try:
            # The report's own words are counted in the statistics: a word only it
            # has (df 1) would find nothing, as similar() reasons.
            plan = DraftPlan(title, body or "", "hybrid", DEPTH, shared_by=2 if body else 1)
            ranked = pipeline.rank(plan, scope).order()
        except SearchError as exc:
            raise QueryFailed(str(exc)) from exc
        ids = [candidate.id for candidate in ranked[:DEPTH]]
        with db.cursor() as cursor:
            cursor.execute("SELECT id, key FROM search_document WHERE id = ANY(%s)", [ids])
            keys = dict(cursor.fetchall())
        return [keys[i] for i in ids if i in keys]
