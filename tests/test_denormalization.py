"""A bug's actual_result, expected_result, steps and environment come from its
raw_data by FORMAT.md's rules, on every write path."""

import pytest
from django.db import connection

from backlog.imports import import_records
from backlog.models import Bug, Product

from .conftest import jsonl

pytestmark = pytest.mark.django_db

DENORMALIZED = ("actual_result", "expected_result", "steps", "environment")


@pytest.fixture
def product():
    return Product.objects.create(key="PRD-1", name="Tramline Mobile")


def fields_of(key: str) -> dict:
    return dict(zip(DENORMALIZED, Bug.objects.filter(key=key).values_list(*DENORMALIZED).get(), strict=True))


@pytest.mark.parametrize(
    "raw_data, expected",
    [
        pytest.param(
            {
                "actual_result": "Spinner forever",
                "expected_result": "Payment sheet opens",
                "steps": ["Open Passes", "Tap Renew"],
                "environment": "Pixel 7, Android 14",
            },
            {
                "actual_result": "Spinner forever",
                "expected_result": "Payment sheet opens",
                "steps": "Open Passes\nTap Renew",
                "environment": "Pixel 7, Android 14",
            },
            id="all present",
        ),
        pytest.param(
            {"actual_result": "  \t spinner \n", "expected_result": " \n\t ", "steps": []},
            {"actual_result": "spinner", "expected_result": None, "steps": None, "environment": None},
            id="trimmed, blank and empty become NULL",
        ),
        pytest.param(
            {},
            {"actual_result": None, "expected_result": None, "steps": None, "environment": None},
            id="missing keys become NULL",
        ),
        pytest.param(
            {"steps": [" Open ", "", "   ", "Tap"], "actual_result": None},
            {"actual_result": None, "expected_result": None, "steps": "Open\nTap", "environment": None},
            id="blank steps dropped, JSON null is NULL",
        ),
        pytest.param(
            {"steps": "1. Open\n2. Tap", "environment": {"os": "Android 14", "device": "Pixel 7"}},
            {
                "actual_result": None,
                "expected_result": None,
                "steps": "1. Open\n2. Tap",
                "environment": "device: Pixel 7\nos: Android 14",
            },
            id="steps as text, environment as an object",
        ),
        pytest.param(
            {"actual_result": 500, "expected_result": True, "build": "5.2.1"},
            {"actual_result": "500", "expected_result": "true", "steps": None, "environment": None},
            id="scalars as text, unknown keys ignored",
        ),
    ],
)
def test_rules(product, raw_data, expected):
    Bug.objects.create(key="BUG-1", product=product, title="Renew", raw_data=raw_data)

    assert fields_of("BUG-1") == expected


def test_unknown_keys_are_kept_in_raw_data(product):
    bug = Bug.objects.create(
        key="BUG-1", product=product, title="Renew", raw_data={"reporter": "dana", "labels": ["a"]}
    )

    bug.refresh_from_db()
    assert bug.raw_data == {"reporter": "dana", "labels": ["a"]}


def test_model_save_sets_fields_on_create_and_update(product):
    bug = Bug.objects.create(key="BUG-1", product=product, title="Renew", raw_data={"actual_result": "Crash"})
    assert bug.actual_result == "Crash"  # returned by INSERT ... RETURNING

    bug.raw_data = {"actual_result": "Spinner", "environment": "iOS 18"}
    bug.save()

    assert fields_of("BUG-1")["actual_result"] == "Spinner"
    assert fields_of("BUG-1")["environment"] == "iOS 18"


def test_bulk_create(product):
    Bug.objects.bulk_create(
        [Bug(key=f"BUG-{n}", product=product, title="t", raw_data={"expected_result": f"Result {n}"}) for n in range(3)]
    )

    assert [fields_of(f"BUG-{n}")["expected_result"] for n in range(3)] == ["Result 0", "Result 1", "Result 2"]


def test_queryset_update(product):
    Bug.objects.create(key="BUG-1", product=product, title="t", raw_data={"steps": ["a"]})

    Bug.objects.filter(key="BUG-1").update(raw_data={"steps": ["b", "c"]})

    assert fields_of("BUG-1")["steps"] == "b\nc"


def test_raw_sql(product):
    Bug.objects.create(key="BUG-1", product=product, title="t", raw_data={})

    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE backlog_bug SET raw_data = '{"environment": "Firefox 140"}'::jsonb WHERE key = 'BUG-1'"""
        )

    assert fields_of("BUG-1")["environment"] == "Firefox 140"


def test_import_then_reimport_with_new_raw_data(product):
    record = {"kind": "bug", "key": "BUG-1", "product": "PRD-1", "title": "t", "raw_data": {"actual_result": "Old"}}
    import_records(jsonl(record).splitlines())
    assert fields_of("BUG-1")["actual_result"] == "Old"

    record["raw_data"] = {"actual_result": "New", "environment": "Edge 131"}
    report = import_records(jsonl(record).splitlines())

    assert report.updated["bug"] == 1
    assert fields_of("BUG-1") == {
        "actual_result": "New",
        "expected_result": None,
        "steps": None,
        "environment": "Edge 131",
    }
