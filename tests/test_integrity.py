"""Integrity: one key names one record whatever its case, and imports that
race each other report what each of them did."""

import threading

import pytest
from django.db import IntegrityError, connection, transaction

from backlog import imports as services
from backlog.imports import import_records
from backlog.models import Bug, Product

from .conftest import jsonl


def test_the_database_refuses_a_key_that_differs_only_in_case(tramline):
    with pytest.raises(IntegrityError), transaction.atomic():
        Bug.objects.create(key="bug-12", product=Product.objects.get(key="PRD-1"), title="Twin")


def test_rest_finds_a_record_by_its_key_in_any_case(tramline, reader):
    assert reader.get("/api/bugs/bug-12").json()["key"] == "BUG-12"
    assert reader.get("/api/timeline/bug-12").status_code == 200


def test_rest_names_a_relation_in_any_case(tramline, curator):
    response = curator.post(
        "/api/bugs", {"key": "BUG-50", "product": "prd-1", "feature": "feat-7", "title": "Hi"}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert (response.json()["product"], response.json()["feature"]) == ("PRD-1", "FEAT-7")


def test_import_takes_a_key_in_another_case_as_the_stored_record_and_asks_for_its_spelling(tramline):
    report = import_records(
        jsonl(
            {"kind": "bug", "key": "bug-12", "product": "PRD-1", "title": "Twin"},
            {"kind": "bug", "key": "BUG-51", "product": "prd-1", "feature": "feat-7", "title": "Receipt is blank"},
            {"kind": "bug", "key": "bug-51", "product": "PRD-1", "title": "Twin in the file"},
        ).splitlines(),
        skip_invalid=True,
    )

    assert [str(problem) for problem in report.problems] == [
        "line 1: bug-12: the key is stored as BUG-12; keys ignore case, so write it as BUG-12",
        "line 3: bug-51: the key is already used on line 2 (case aside)",
    ]
    assert report.created == {"bug": 1}
    assert Bug.objects.get(key="BUG-51").feature.key == "FEAT-7"
    assert Bug.objects.get(key="BUG-12").title == "Renewal button does nothing on Android 14"


@pytest.mark.django_db(transaction=True)
def test_two_imports_racing_over_the_same_records_report_what_each_did(monkeypatch):
    """Both plan while the records are new; one writes them, the other
    then finds them written: one reports them created, the other updated."""
    product = {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile"}
    shared = [{"kind": "bug", "key": f"BUG-{i}", "product": "PRD-1", "title": f"Spinner {i}"} for i in range(300)]
    files = {
        "first": [product, *shared, {"kind": "bug", "key": "BUG-FIRST", "product": "PRD-1", "title": "Mine"}],
        "second": [product, *shared, {"kind": "bug", "key": "BUG-SECOND", "product": "PRD-1", "title": "Mine"}],
    }
    both_planned = threading.Barrier(2, timeout=30)
    write = services._write

    def write_once_both_planned(plan, progress):
        both_planned.wait()
        return write(plan, progress)

    monkeypatch.setattr(services, "_write", write_once_both_planned)
    reports = {}

    def run(name):
        try:
            reports[name] = import_records(jsonl(*files[name]).splitlines())
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(name,)) for name in files]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    try:
        first, second = reports["first"], reports["second"]
        assert first.written and second.written
        assert first.created["bug"] + second.created["bug"] == 302  # each record created once
        assert first.updated["bug"] + second.updated["bug"] == 300  # and the shared ones updated by the later
        assert sorted((first.created["bug"], second.created["bug"])) == [1, 301]
        assert Bug.objects.count() == 302
    finally:
        # The keyword arm reads word frequencies from the column statistics,
        # and autovacuum may have analyzed the index while these committed
        # records were in it: later tests get the statistics of an empty one.
        Bug.objects.all().delete()
        Product.objects.all().delete()
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE search_document")
