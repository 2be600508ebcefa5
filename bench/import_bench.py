"""Import throughput: `import_records` on N demo records into a fresh database.

    .venv/bin/python bench/import_bench.py [--records 100000] [--repeat 3]

Each run imports the same JSON Lines into an emptied test database (the
project's own database is never touched). Reported per run: records/s for a
first import (every record created) and for a re-import of the same file
(every record compared, none written). The baseline, run in the same process
on the same data, is the floor of what any importer can do through the ORM:
`json.loads` and `bulk_create` (and `bulk_update` for the duplicate_of links)
with no validation, no relation checks and no diffing. Medians are printed
with the ratio to that baseline; the machine is shared and noisy, so compare
ratios rather than absolute numbers across runs.

The audit trail (backlog/audit.py) is measured too: the first import with
its triggers on and the import's context set, as `manage.py import_records`
runs, against the same with the trail's triggers disabled (ALTER TABLE ...
DISABLE TRIGGER, the index's triggers left on).
"""

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import django_setup  # sets Django up, DEBUG off: before the project's imports

# isort: split

import corpus
from django.apps import apps
from django.db import connection
from timing import machine, ratio_table

from backlog.audit import surface
from backlog.demo import generate
from backlog.imports import import_records
from backlog.interchange import KIND_ORDER, dumps
from backlog.models import RECORD_MODELS, Bug, Feature, Product, QATest


def empty_tables() -> None:
    """The records and their audit trail's events gone."""
    corpus.empty_tables(*(apps.get_model("backlog", f"{RECORD_MODELS[kind].__name__}Event") for kind in KIND_ORDER))


def audit_triggers(enabled: bool) -> None:
    """Turn the audit trail's triggers (pgtrigger's, on the record tables) on or off."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE t.tgname LIKE 'pgtrigger_%%' AND c.relname LIKE 'backlog_%%' AND c.relname NOT LIKE '%%event'"
        )
        for table, trigger in cursor.fetchall():
            cursor.execute(f'ALTER TABLE "{table}" {"ENABLE" if enabled else "DISABLE"} TRIGGER "{trigger}"')


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def baseline_import(lines: list[bytes]) -> None:
    """json.loads + bulk_create, relations resolved by dictionary: the floor."""
    ids: dict[str, int] = {}
    by_kind: dict[str, list[dict]] = {kind: [] for kind in KIND_ORDER}
    for line in lines:
        record = json.loads(line)
        by_kind[record.pop("kind")].append(record)
    links: list[tuple[str, str]] = []  # a bug's duplicate_of, set once every bug has its id
    for kind in KIND_ORDER:
        model = RECORD_MODELS[kind]
        objects = []
        for record in by_kind[kind]:
            for relation in ("product", "feature", "test"):
                if relation in record:
                    record[f"{relation}_id"] = ids[record.pop(relation)]
            if "duplicate_of" in record:
                links.append((record["key"], record.pop("duplicate_of")))
            objects.append(model(**record))
        for start in range(0, len(objects), 2000):
            for obj in model.objects.bulk_create(objects[start : start + 2000]):
                ids[obj.key] = obj.pk
    linked = [Bug(id=ids[key], duplicate_of_id=ids[original]) for key, original in links]
    Bug.objects.bulk_update(linked, ["duplicate_of"], batch_size=2000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as tmp:
        for record in generate(args.records, args.seed):
            tmp.write(dumps(record) + "\n")
    lines = Path(tmp.name).read_bytes().splitlines(keepends=True)
    os.unlink(tmp.name)

    # A database of its own, so that a test run at the same time cannot drop it.
    with django_setup.database("bench_import"):
        rows = {
            "baseline (json.loads + bulk_create)": [],
            "import_records, first import": [],
            "import_records, re-import (no changes)": [],
            "first import, audit trail on, with its context (as manage.py import_records)": [],
            "first import, audit trail's triggers off": [],
        }
        for _ in range(args.repeat):
            empty_tables()
            rows["baseline (json.loads + bulk_create)"].append(timed(lambda: baseline_import(lines)))
            empty_tables()
            rows["import_records, first import"].append(timed(lambda: check(import_records(lines), args.records)))
            rows["import_records, re-import (no changes)"].append(timed(lambda: check(import_records(lines), 0)))
            empty_tables()

            def with_context():
                with surface("import", command="import_bench"):
                    check(import_records(lines), args.records)

            rows["first import, audit trail on, with its context (as manage.py import_records)"].append(
                timed(with_context)
            )
            empty_tables()
            audit_triggers(False)
            try:
                rows["first import, audit trail's triggers off"].append(
                    timed(lambda: check(import_records(lines), args.records))
                )
            finally:
                audit_triggers(True)
        counts = {m.KIND: m.objects.count() for m in (Product, Feature, QATest, Bug)}

    print(f"# import benchmark: {args.records:,} demo records (seed {args.seed}), {args.repeat} runs")
    print(f"# machine: {machine()}, {connection.vendor} {connection.pg_version // 10000}")
    print(f"# stored: {counts}")
    ratio_table(rows, "baseline (json.loads + bulk_create)", unit="s", count=args.records, per="records/s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"# peak RSS of this process: {peak:,.0f} MiB")


def check(report, expected_changes: int) -> None:
    assert not report.problems, report.problems[:5]
    assert report.changed == expected_changes, (report.summary(), expected_changes)


if __name__ == "__main__":
    main()
