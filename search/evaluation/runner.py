"""The runner: score `rank(query, mode)` on every judged query in every mode (`evaluate`), and
the rankings search_eval passes it (EngineRanking over search/similar, DuplicateRanking over
check_duplicates' pipeline), with the fresh database each run loads its set into."""

import statistics
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connection
from django.test.utils import setup_databases, teardown_databases
from django.utils import timezone
from pydantic import ValidationError

from backlog.imports import Progress, no_progress
from search import db
from search.contract import SearchError, SearchRequest, SimilarRequest
from search.evaluation.metrics import DEPTH, DUPLICATE_METRICS, METRICS, cleaned, scores
from search.evaluation.sets import JudgedSet, JudgedSetError, Query, QueryFailed
from search.operations.duplicates import DraftPlan
from search.operations.search import search
from search.operations.similar import similar
from search.query.scope import Filters, build_scope, leaving_out
from search.ranking import pipeline

MODES = ("keyword", "semantic", "hybrid")
DATABASE_PREFIX = "search_eval"
# The duplicate-detection task (--duplicates): the query types that are a new
# report's title, its labelled duplicates relevant, and what answers them.
DUPLICATE_TYPES = ("title", "duplicate")
DUPLICATE_RUNS = ("search:in-corpus", "search", "check:title", "check:title+text")


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
            query=query.text,
            mode=mode,
            entities=query.entities,
            products=products,
            created_before=query.before,
            limit=DEPTH,
            cursor=cursor,
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
        filters = Filters(
            entities=tuple(query.entities or ["bug"]), products=tuple(self.products or ()), created_before=query.before
        )
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
