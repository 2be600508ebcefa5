"""import_records and export_records: validation, atomicity, idempotence and
the round trip."""

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection

from backlog.imports import import_records
from backlog.interchange import MAX_LINE_BYTES, MAX_TEXT_CHARS
from backlog.models import Bug, Feature, Product, QATest, key_taken_message

from .conftest import TRAMLINE, jsonl, run_import

pytestmark = pytest.mark.django_db

PRODUCT = {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile"}


def bug(key: str, **fields) -> dict:
    return {"kind": "bug", "key": key, "product": "PRD-1", "title": f"Bug {key}", **fields}


def snapshot() -> dict:
    """Every stored row of every kind, to compare database states."""
    state = {}
    for model in (Product, Feature, QATest, Bug):
        state[model.KIND] = sorted(
            (tuple(sorted((k, str(v)) for k, v in row.items() if k != "id")) for row in model.objects.values()),
        )
    return state


def export_text(*args: str) -> str:
    out = io.StringIO()
    call_command("export_records", *args, stdout=out)
    return out.getvalue()


# Every class of problem, the line it is on, and words its message must use.
BAD_LINES = [
    pytest.param('{"kind": "bug", "key": "BUG-1", ', "not valid JSON", id="bad JSON line"),
    pytest.param(
        json.dumps({"kind": "bug", "key": "BUG-1", "product": "PRD-1"}),
        "missing required field 'title' for a bug",
        id="missing field",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", feature="FEAT-404")),
        "feature FEAT-404 is neither in the file nor stored",
        id="unknown relation",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", severity="urgent")),
        "'severity' 'urgent' is not allowed; use 'critical', 'high', 'medium' or 'low'",
        id="bad enum",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", created_at="01/02/2026")),
        "'created_at' must be an ISO 8601 time with an offset",
        id="bad date",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", created_at="2026-02-01T10:00:00")),
        "'created_at' must be an ISO 8601 time with an offset",
        id="date without offset",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", description="before\u0000after")),
        "'description' contains a NUL character",
        id="NUL byte in text",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", raw_data={"environment": "x\u0000"})),
        "'raw_data' contains a NUL character",
        id="NUL byte in raw_data",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", description="x" * 10 * 1024 * 1024)),
        f"a record may be at most {MAX_LINE_BYTES:,} bytes",
        id="a 10 MB field",
    ),
    pytest.param(
        json.dumps(bug("BUG-1", description="x" * (MAX_TEXT_CHARS + 1))),
        f"'description' is {MAX_TEXT_CHARS + 1:,} characters; at most {MAX_TEXT_CHARS:,}",
        id="a field over the text limit",
    ),
    pytest.param(json.dumps({"kind": "issue", "key": "BUG-1"}), "unknown kind 'issue'", id="unknown kind"),
    pytest.param(json.dumps(bug("BUG-1", severty="low")), "unknown field 'severty' for a bug", id="unknown field"),
    pytest.param(json.dumps(bug("BUG 1")), "'key' 'BUG 1' is not a valid key", id="bad key"),
    pytest.param(json.dumps(bug("BUG-1", title="   ")), "'title' must not be blank", id="blank title"),
    pytest.param(
        json.dumps(bug("BUG-1", product="FEAT-7")),
        "product FEAT-7 is a feature, not a product",
        id="relation of the wrong kind",
    ),
]


@pytest.mark.parametrize("bad_line, message", BAD_LINES)
def test_every_problem_is_reported_with_its_line_and_nothing_is_written(tramline, bad_line, message):
    before = snapshot()
    text = jsonl(bug("BUG-100"), bug("BUG-101")) + bad_line + "\n" + jsonl(bug("BUG-102"))

    code, out, err = run_import(text)

    assert code == 1
    assert "line 3: " in err and message in err, err
    assert "nothing was imported" in err
    assert snapshot() == before


def test_all_problems_of_a_file_are_reported_at_once(tramline):
    text = jsonl(bug("BUG-1", severity="urgent"), bug("BUG-2"), bug("BUG-3", feature="FEAT-404"), bug("BUG-2"))

    code, _, err = run_import(text)

    assert code == 1
    problem_lines = [line.split(":")[0] for line in err.splitlines() if line.startswith("line ")]
    assert problem_lines == ["line 1", "line 3", "line 4"]
    assert "line 4: BUG-2: the key is already used on line 2" in err


def test_a_key_belongs_to_one_kind_only_and_the_refusal_names_no_kind(tramline):
    """FEAT-7 is a feature. A bug keyed FEAT-7 is told the key is taken, in the words a
    record the importer may not see gets (docs/access.md): "already belongs to a feature"
    named the kind, and sync errors on the dashboard carried it to other teams."""
    code, _, err = run_import(jsonl(bug("FEAT-7")))

    assert code == 1
    assert f"line 1: FEAT-7: {key_taken_message('FEAT-7').rstrip('.')}" in err
    assert "feature" not in err.split("line 1: ")[1].splitlines()[0]


def test_a_feature_must_belong_to_the_same_product(tramline):
    code, _, err = run_import(jsonl(bug("BUG-1", feature="FEAT-9")))

    assert code == 1
    assert "feature FEAT-9 belongs to product PRD-2, not PRD-1" in err


def test_a_bad_record_on_line_900_leaves_the_database_as_it_was(tramline):
    # Lines 1-899 are valid and would create new bugs and update BUG-12.
    records = [dict(TRAMLINE[3], title="Renewal button is dead on Android 14")]
    records += [bug(f"BUG-{n}", raw_data={"actual_result": f"Result {n}"}) for n in range(1000, 1898)]
    records += [bug("BUG-9000", severity="blocker")]
    records += [bug(f"BUG-{n}") for n in range(2000, 2100)]
    assert len(records) == 1000
    before = snapshot()

    code, _, err = run_import(jsonl(*records))

    assert code == 1
    assert "line 900: BUG-9000: 'severity' 'blocker' is not allowed" in err
    assert snapshot() == before
    assert Bug.objects.get(key="BUG-12").title == "Renewal button does nothing on Android 14"


def test_a_database_failure_while_writing_rolls_back_everything(db):
    # The last batch fails inside PostgreSQL (a trigger raises); the first
    # batches must not stay behind.
    with connection.cursor() as cursor:
        cursor.execute(
            """CREATE FUNCTION refuse_bug() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN IF NEW.key = 'BUG-4999' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
               CREATE TRIGGER refuse_bug BEFORE INSERT ON backlog_bug FOR EACH ROW EXECUTE FUNCTION refuse_bug();"""
        )
    records = [PRODUCT] + [bug(f"BUG-{n}") for n in range(5000)]

    report = import_records(jsonl(*records).splitlines())

    assert not report.written
    assert "the database refused the import" in str(report.problems[0])
    assert Bug.objects.count() == 0 and Product.objects.count() == 0


def test_reimporting_the_same_file_changes_nothing(db):
    text = jsonl(*TRAMLINE) + jsonl(bug("BUG-13", raw_data={"actual_result": "Crash"}))
    code, out, _ = run_import(text)
    assert code == 0 and "created 7" in out
    before = snapshot()

    code, out, _ = run_import(text)

    assert code == 0
    assert "created 0, updated 0, unchanged 7" in out
    assert snapshot() == before  # updated_at included: no row was rewritten


def test_reimport_updates_only_what_changed(tramline):
    changed = dict(TRAMLINE[3], status="fixed", updated_at="2026-03-01T09:00:00+00:00")

    code, out, _ = run_import(jsonl(*TRAMLINE[:3], changed, *TRAMLINE[4:]))

    assert code == 0
    assert "updated 1 (1 bug), unchanged 5" in out
    bug12 = Bug.objects.get(key="BUG-12")
    assert bug12.status == "fixed"
    assert bug12.updated_at.isoformat() == "2026-03-01T09:00:00+00:00"


def test_a_changed_record_without_updated_at_gets_the_import_time(tramline):
    record = {k: v for k, v in TRAMLINE[0].items()} | {"name": "Tramline"}
    before = Product.objects.get(key="PRD-1")

    run_import(jsonl(record))

    after = Product.objects.get(key="PRD-1")
    assert after.name == "Tramline"
    assert after.created_at == before.created_at
    assert after.updated_at > before.updated_at


def test_records_may_come_in_any_order(db):
    reordered = list(reversed(TRAMLINE))

    code, out, _ = run_import(jsonl(*reordered))

    assert code == 0, out
    bug12 = Bug.objects.select_related("feature", "test", "product").get(key="BUG-12")
    assert (bug12.product.key, bug12.feature.key, bug12.test.key) == ("PRD-1", "FEAT-7", "TEST-3")


def test_skip_invalid_writes_the_valid_records_and_rejects_their_dependents(db):
    text = jsonl(
        PRODUCT,
        {"kind": "feature", "key": "FEAT-1", "product": "PRD-1", "name": ""},  # blank name
        bug("BUG-1", feature="FEAT-1"),  # names the rejected feature
        bug("BUG-2"),
    )

    code, out, err = run_import(text, "--skip-invalid")

    assert code == 1  # the exit status still says something was skipped
    assert "created 2 (1 product, 1 bug)" in out
    assert "line 3: BUG-1: it names FEAT-1, which was rejected (line 2)" in err
    assert sorted(Bug.objects.values_list("key", flat=True)) == ["BUG-2"]


def test_dry_run_writes_nothing(db):
    code, out, _ = run_import(jsonl(*TRAMLINE), "--dry-run")

    assert code == 0
    assert "Dry run, nothing written. Would have created 6" in out
    assert Product.objects.count() == 0


def test_import_reads_a_file_and_reports_a_missing_one(tmp_path, db):
    path = tmp_path / "records.jsonl"
    path.write_text(jsonl(*TRAMLINE))
    out = io.StringIO()

    call_command("import_records", str(path), stdout=out)

    assert "created 6" in out.getvalue()
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no such file"):
        call_command("import_records", str(tmp_path / "missing.jsonl"))


@pytest.fixture
def linked(tramline):
    """Tramline with a chain of duplicates, each line naming a bug later in the file:
    BUG-14 -> BUG-13 -> BUG-12 (stored), and BUG-15 -> BUG-16."""
    records = [
        bug("BUG-14", status="duplicate", duplicate_of="BUG-13"),
        bug("BUG-15", duplicate_of="BUG-16"),
        bug("BUG-13", status="duplicate", duplicate_of="BUG-12"),
        bug("BUG-16"),
    ]
    report = import_records(jsonl(*records).splitlines())
    assert report.written and not report.problems, report.problems


def test_round_trip_import_export_import_is_the_identity(linked):
    first_export = export_text()
    state = snapshot()

    code, out, _ = run_import(first_export)

    assert code == 0 and "created 0, updated 0, unchanged 10" in out
    assert snapshot() == state
    assert export_text() == first_export
    assert '"duplicate_of": "BUG-13"' in first_export and '"duplicate_of": "BUG-16"' in first_export


def test_export_imports_into_an_empty_database_unchanged(linked):
    exported = export_text()
    for model in (Bug, QATest, Feature, Product):
        model.objects.all().delete()

    code, out, _ = run_import(exported)

    assert code == 0 and "created 10" in out
    assert export_text() == exported
    assert dict(Bug.objects.values_list("key", "duplicate_of__key")) == {
        "BUG-12": None,
        "BUG-13": "BUG-12",
        "BUG-14": "BUG-13",
        "BUG-15": "BUG-16",
        "BUG-16": None,
    }


def test_an_export_in_reverse_imports_into_an_empty_database_unchanged(linked):
    # Every duplicate now comes before its original: links are set whatever the order.
    exported = export_text()
    for model in (Bug, QATest, Feature, Product):
        model.objects.all().delete()

    code, out, _ = run_import("".join(reversed(exported.splitlines(keepends=True))))

    assert code == 0 and "created 10" in out
    assert sorted(export_text().splitlines()) == sorted(exported.splitlines())


def test_export_writes_the_format(tramline):
    records = [json.loads(line) for line in export_text().splitlines()]

    assert [r["key"] for r in records] == ["PRD-1", "PRD-2", "FEAT-7", "FEAT-9", "TEST-3", "BUG-12"]
    bug12 = records[-1]
    assert bug12["feature"] == "FEAT-7" and bug12["test"] == "TEST-3"
    assert bug12["raw_data"]["reporter"] == "dana"
    assert bug12["created_at"] == "2026-02-01T10:00:00+00:00"
    assert "actual_result" not in bug12  # derived from raw_data, not part of the format


def test_export_filters_by_kind_and_product(tramline):
    keys = [json.loads(line)["key"] for line in export_text("--kind", "feature", "--product", "PRD-2").splitlines()]

    assert keys == ["FEAT-9"]
