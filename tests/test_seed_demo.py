"""seed_demo: realistic, varied, deterministic demo data that imports cleanly."""

import io
import json
from collections import Counter

import pytest
from django.core.management import call_command

from backlog.demo import generate
from backlog.interchange import RELATION_KINDS, dumps, parse_line
from backlog.models import Bug, Feature, Product, QATest


def test_same_seed_same_records_other_seed_other_records():
    first = [dumps(r) for r in generate(2000, seed=7)]
    again = [dumps(r) for r in generate(2000, seed=7)]
    other = [dumps(r) for r in generate(2000, seed=8)]

    assert first == again
    assert first != other
    assert len(first) == 2000


def test_records_are_valid_related_in_order_and_varied():
    records = list(generate(5000, seed=1))
    seen: dict[str, dict] = {}
    for record in records:
        parsed, problems = parse_line(dumps(record))
        assert not problems, (record["key"], problems)
        for relation, kind in RELATION_KINDS.items():
            if relation in record:
                target = seen[record[relation]]  # named records come first
                assert target["kind"] == kind
                if relation != "product":
                    assert target["product"] == record["product"]
        seen[record["key"]] = record

    kinds = Counter(r["kind"] for r in records)
    bugs = [r for r in records if r["kind"] == "bug"]
    assert kinds["product"] >= 5 and kinds["feature"] >= 40 and kinds["test"] >= 800 and kinds["bug"] >= 3000
    assert len({b["title"] for b in bugs}) > 0.7 * len(bugs)  # titles are not one template
    assert {b["severity"] for b in bugs} == {"critical", "high", "medium", "low"}
    assert {b["status"] for b in bugs} == {"open", "accepted", "rejected", "fixed", "duplicate"}
    assert all(r["updated_at"] >= r["created_at"] for r in records if "created_at" in r)
    duplicates = [b for b in bugs if "duplicate_of" in b.get("raw_data", {})]
    assert 0.03 * len(bugs) < len(duplicates) < 0.2 * len(bugs)
    assert all(seen[d["raw_data"]["duplicate_of"]]["product"] == d["product"] for d in duplicates)
    # Linked as a curator would, to an original that is no duplicate itself.
    assert [d["duplicate_of"] for d in duplicates] == [d["raw_data"]["duplicate_of"] for d in duplicates]
    assert sum("duplicate_of" in b for b in bugs) == len(duplicates)
    assert not any("duplicate_of" in seen[d["duplicate_of"]] for d in duplicates)
    with_results = [b for b in bugs if b["raw_data"].get("actual_result") and b["raw_data"].get("expected_result")]
    assert len(with_results) > 0.8 * len(bugs)
    assert not any("lorem" in dumps(r).lower() for r in records)


@pytest.mark.django_db
def test_seed_demo_loads_the_database_and_a_second_run_changes_nothing():
    out = io.StringIO()
    call_command("seed_demo", records=600, seed=3, stdout=out)
    counts = {m.KIND: m.objects.count() for m in (Product, Feature, QATest, Bug)}

    call_command("seed_demo", records=600, seed=3, stdout=out)

    assert sum(counts.values()) == 600
    assert "created 0, updated 0, unchanged 600" in out.getvalue()
    assert Bug.objects.exclude(actual_result=None).exclude(environment=None).count() > 0.8 * counts["bug"]
    assert 0.03 * counts["bug"] < Bug.objects.exclude(duplicate_of=None).count() < 0.2 * counts["bug"]


@pytest.mark.django_db
def test_if_empty_leaves_existing_data_alone(tramline):
    out = io.StringIO()

    call_command("seed_demo", records=300, if_empty=True, stdout=out)

    assert "already holds records" in out.getvalue()
    assert Product.objects.count() == 2


def test_output_writes_json_lines(tmp_path):
    path = tmp_path / "demo.jsonl"

    call_command("seed_demo", records=50, seed=2, output=str(path))

    lines = path.read_text().splitlines()
    assert len(lines) == 50
    assert [json.loads(line) for line in lines] == list(generate(50, seed=2))
