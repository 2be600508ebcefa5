"""A first Jira sync of N issues from a local Jira, against import_records of the same records.

    .venv/bin/python bench/sync_bench.py [--issues 10000] [--repeat 3]

The Jira is tests/upstream/jira.py on loopback (Cloud: search/jql pages of
100, ADF descriptions), holding 200 of gitbugs-hadoop's bugs over and over with
components and duplicate links. Each repeat, on emptied tables of a
database of its own: the first sync (every issue fetched, mapped, written
and indexed: the triggers fill search_document; embedding is the worker's,
as in serve), a second sync with nothing changed (incremental: one request),
and, as the baseline in the same process, `import_records` of the very
records the sync wrote, read from memory. Medians, the ratio to the
baseline, and the requests made per 1,000 issues.
"""

import argparse
import os
import time

import django_setup  # sets Django up, DEBUG off: before the project's imports

# isort: split

import corpus
from timing import machine, ratio_table

from backlog.imports import import_records
from backlog.interchange import dumps
from connectors import sync
from connectors.models import Source, SyncedRecord, SyncRun
from connectors.sources.jira import Jira
from tests.upstream.jira import FakeJira


def empty_tables() -> None:
    """The records and the sources' state gone."""
    corpus.empty_tables(SyncedRecord, SyncRun, Source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    jira = FakeJira.busy_site(args.issues).start()
    os.environ["BENCH_JIRA_EMAIL"], os.environ["BENCH_JIRA_TOKEN"] = jira.email, jira.token
    figures = {"import_records of the same records (baseline)": [], "first sync": [], "second sync, no changes": []}
    requests = {}
    with django_setup.database("bench_sync"):
        try:
            for _ in range(args.repeat):
                empty_tables()
                source = Source.objects.create(
                    name="bench",
                    kind="jira",
                    url=jira.url,
                    project="HADOOP",
                    user_env="BENCH_JIRA_EMAIL",
                    token_env="BENCH_JIRA_TOKEN",
                )
                start = time.perf_counter()
                first = sync.run(source, sweep=False)
                figures["first sync"].append(time.perf_counter() - start)
                requests["first sync"] = first.requests
                start = time.perf_counter()
                second = sync.run(Source.objects.get(pk=source.pk), sweep=True)
                figures["second sync, no changes"].append(time.perf_counter() - start)
                requests["second sync, no changes"] = second.requests
                assert first.created >= args.issues and second.created == second.updated == 0, (first, second)

                connector = Jira(source, jira.email, jira.token)
                records = [connector.map(issue) for issue in jira.issues.values()]
                lines = [dumps({"kind": "product", "key": "HADOOP", "name": "Apache Hadoop"})]
                features = {}
                for m in records:
                    if m.feature:
                        key = f"HADOOP.{m.feature.name}"
                        features[key] = {"kind": "feature", "key": key, "product": "HADOOP", "name": m.feature.name}
                        m.record["feature"] = key
                    if m.duplicate_of:
                        m.record["duplicate_of"] = m.duplicate_of
                lines += [dumps(f) for f in features.values()] + [dumps(m.record) for m in records]
                empty_tables()
                start = time.perf_counter()
                report = import_records(lines)
                figures["import_records of the same records (baseline)"].append(time.perf_counter() - start)
                assert report.written and not report.problems, report.problems[:3]
        finally:
            jira.stop()

    print(f"{args.issues:,} Jira issues, {args.repeat} repeats; {machine()}")
    ratio_table(figures, "import_records of the same records (baseline)", unit="s", count=args.issues, per="issues/s")
    for name, made in requests.items():
        print(f"# {name}: {made * 1000 / args.issues:.1f} requests per 1,000 issues")


if __name__ == "__main__":
    main()
