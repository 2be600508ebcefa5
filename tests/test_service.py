"""search.service: the one call every surface makes. Parameters as strings
(a query string) or native values (MCP arguments) reach the engine alike;
get and timeline read whole records and their neighbours; every mistake is
one SearchError that names the parameter.

The corpus is the Tramline story of conftest.py, plus two later bugs.
"""

import re

import pytest
from django.http import QueryDict

from search import service
from search.contract import NotFound, SearchError
from search.contract.budget import tokens

from .conftest import TRAMLINE, jsonl

pytestmark = pytest.mark.django_db

LATER = [
    {
        "kind": "bug",
        "key": "BUG-13",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "title": "Renewal receipt email never arrives",
        "severity": "low",
        "created_at": "2026-03-01T10:00:00+00:00",
    },
    {
        "kind": "bug",
        "key": "BUG-14",
        "product": "PRD-1",
        "title": "Map freezes when zooming out",
        "severity": "medium",
        "created_at": "2026-04-01T10:00:00+00:00",
    },
]


@pytest.fixture
def story():
    from backlog.imports import import_records

    report = import_records(jsonl(*TRAMLINE, *LATER).splitlines())
    assert not report.problems, report.problems


def test_query_string_and_native_values_give_the_same_response(story):
    as_strings = QueryDict("query=renewal&entities=bug,test&mode=keyword&limit=5&include_scores=true")
    native = {"query": "renewal", "entities": ["bug", "test"], "mode": "keyword", "limit": 5, "include_scores": True}
    repeated = QueryDict("query=renewal&entities=bug&entities=test&mode=keyword&limit=5&include_scores=true")

    expected = service.call("search", native)
    assert service.call("search", as_strings) == expected
    assert service.call("search", repeated) == expected
    assert [hit["kind"] for hit in expected["results"]] and {h["kind"] for h in expected["results"]} <= {"bug", "test"}
    assert expected["results"][0]["scores"] is not None


def test_dates_and_empty_form_fields(story):
    later = service.call(
        "search", QueryDict("query=renewal&mode=keyword&entities=bug&created_after=2026-02-15&severity=")
    )
    assert [hit["key"] for hit in later["results"]] == ["BUG-13"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"query": "a"}, "query: must be 2 to 500 characters"),
        ({"query": "renewal", "limit": "500"}, "limit: input should be less than or equal to 100 (got '500')"),
        ({"query": "renewal", "limit": 500}, "limit: input should be less than or equal to 100 (got '500')"),
        ({"query": "renewal", "mode": "fast"}, "mode: input should be 'hybrid', 'keyword' or 'semantic'"),
        ({"query": "renewal", "entities": "bug,epic"}, "entities: input should be 'product', 'feature'"),
        ({"query": "renewal", "colour": "red"}, "unknown parameter 'colour'; the parameters are: query, mode"),
        ({"query": "renewal", "created_after": "last week"}, "created_after: input should be a valid datetime"),
        ({"query": "renewal", "sort": ["recent", "relevant"]}, "sort: give one value, not a list of 2"),
        ({}, "query: required; send query=..."),
    ],
)
def test_every_mistake_is_one_error_naming_the_parameter(story, params, message):
    with pytest.raises(SearchError) as caught:
        service.call("search", params)
    assert message in str(caught.value)
    assert caught.value.status == 400
    assert caught.value.body() == {"error": {"code": "invalid_request", "message": str(caught.value)}}


@pytest.mark.parametrize(
    ("operation", "params", "name"),
    [
        ("search", {"query": "ab\x00cd"}, "query"),
        ("search", {"query": "renewal", "feature": "\x00"}, "feature"),
        ("search", {"query": "renewal", "products": ["PRD-1", "\x00"]}, "products"),
        ("search", {"query": "renewal", "cursor": "\x00"}, "cursor"),
        ("similar", {"key": "\x00"}, "key"),
        ("similar", {"key": "BUG-12", "cursor": "\x00"}, "cursor"),
        ("get", {"keys": ["BUG-12", "A\x00"]}, "keys"),
        ("timeline", {"key": "A\x00B"}, "key"),
    ],
)
def test_no_string_parameter_may_hold_a_nul_character(story, operation, params, name):
    with pytest.raises(SearchError) as caught:
        service.call(operation, params)
    assert str(caught.value) == f"{name}: contains a NUL character (\\u0000), which PostgreSQL cannot store; remove it."
    assert caught.value.status == 400


def test_get_returns_whole_records_in_the_order_asked_with_their_relations(story):
    response = service.call("get", {"keys": "bug-12,FEAT-7,NOPE-1"})

    assert [r["key"] for r in response["records"]] == ["BUG-12", "FEAT-7"]
    assert response["missing"] == ["NOPE-1"]
    bug, feature = response["records"]
    assert bug["product"] == "PRD-1" and bug["feature"] == "FEAT-7"
    assert bug["content"]["actual_result"] == "Tapping Renew shows a spinner forever"
    assert bug["raw_data"]["reporter"] == "dana"
    assert {name: [r["key"] for r in rel["items"]] for name, rel in bug["related"].items()} == {
        "product": ["PRD-1"],
        "feature": ["FEAT-7"],
        "test": ["TEST-3"],
        "duplicate_of": [],
        "duplicates": [],
    }
    assert [r["key"] for r in feature["related"]["tests"]["items"]] == ["TEST-3"]
    # Newest first; BUG-13 is later than BUG-12, and both are open.
    assert [r["key"] for r in feature["related"]["open_bugs"]["items"]] == ["BUG-13", "BUG-12"]
    assert feature["related"]["open_bugs"]["total"] == 2
    assert "raw_data" not in feature and "severity" not in feature  # what a record does not have is left out


def test_get_can_leave_out_content_and_relations(story):
    record = service.call("get", {"keys": ["BUG-12"], "include_content": False, "include_related": False})["records"][0]
    assert not {"content", "raw_data", "related"} & set(record)


def test_a_concise_record_says_what_a_decision_needs_and_what_it_cut(story):
    """An agent's default: the record's fields, its links as keys, and the texts that say what
    happens cut short, with the cut said; the rest only when asked for."""
    long_steps = [f"Step {n}: open the pass and tap Renew once more" for n in range(1, 9)]
    from backlog.models import Bug

    Bug.objects.filter(key="BUG-12").update(raw_data={"steps": long_steps, "actual_result": "Spinner forever"})
    whole = service.call("get", {"keys": ["BUG-12"]})["records"][0]
    concise = service.call("get", {"keys": ["BUG-12", "FEAT-7"], "detail": "concise"})["records"]
    bug, feature = concise

    assert set(bug) == {"kind", "key", "title", "status", "severity", "created_at", "updated_at", "product", "feature",
                        "links", "content", "cut"}  # fmt: skip
    assert (bug["created_at"], bug["updated_at"]) == (whole["created_at"][:10], whole["updated_at"][:10])
    assert bug["links"] == {"test": "TEST-3"}
    assert bug["content"]["actual_result"] == "Spinner forever"
    steps = "\n".join(long_steps)
    assert bug["content"]["steps"].endswith("…") and len(bug["content"]["steps"]) <= 100
    assert steps.startswith(bug["content"]["steps"][:-1])
    assert bug["cut"] == {"steps": len(steps)}
    assert "description" not in bug["content"]  # a bug's other texts say what happens
    assert feature["links"] == {"tests": ["TEST-3"], "open_bugs": ["BUG-13", "BUG-12"], "bugs": ["BUG-13", "BUG-12"]}
    assert tokens(bug) < tokens(whole) / 2

    asked = service.call("get", {"keys": ["BUG-12"], "fields": ["steps", "raw_data"]})["records"][0]
    assert asked["content"]["steps"] == steps and "steps" not in asked.get("cut", {})
    assert asked["raw_data"]["steps"] == long_steps and "related" not in asked and "id" not in asked
    assert service.call("get", {"keys": ["BUG-12"], "detail": "full"})["records"][0] == whole


def test_get_within_max_tokens_gives_whole_records_in_order_and_names_the_rest(story):
    """A budget keeps whole records, as many as fit in the order asked; the rest are named, not cut."""
    whole = service.call("get", {"keys": ["BUG-12", "FEAT-7", "TEST-3"]})
    first_two = service.call("get", {"keys": ["BUG-12", "FEAT-7"]})
    room = tokens(first_two) + 15  # and the keys missing and omitted
    within = service.call("get", {"keys": ["BUG-12", "FEAT-7", "TEST-3", "NOPE-1"], "max_tokens": room})

    assert [r["key"] for r in within["records"]] == ["BUG-12", "FEAT-7"]
    assert within["records"] == first_two["records"]  # whole records, not shortened ones
    assert within["omitted"] == ["TEST-3"] and within["missing"] == ["NOPE-1"]
    assert tokens(within) <= room < tokens(whole)
    assert "omitted" not in whole


def test_get_refuses_a_budget_too_small_for_the_first_record_and_says_what_it_needs(story):
    alone = tokens(service.call("get", {"keys": ["BUG-12"]}))

    with pytest.raises(SearchError, match=r"send max_tokens=(\d+) or more") as refused:
        service.call("get", {"keys": ["BUG-12", "FEAT-7"], "max_tokens": alone - 1})
    needed = int(re.search(r"max_tokens=(\d+) or more", str(refused.value)).group(1))
    answer = service.call("get", {"keys": ["BUG-12", "FEAT-7"], "max_tokens": needed})

    assert needed > alone  # the first record, and the key it leaves out
    assert [r["key"] for r in answer["records"]] == ["BUG-12"] and answer["omitted"] == ["FEAT-7"]


def test_timeline_walks_the_feature_then_falls_back_to_the_product(story):
    around = service.call("timeline", {"key": "BUG-12"})
    assert around["within"] == "feature" and around["scope_key"] == "FEAT-7"
    assert [r["key"] for r in around["before"]] == ["TEST-3"]
    # FEAT-7 was imported without created_at, so it is the newest record.
    assert [r["key"] for r in around["after"]] == ["BUG-13", "FEAT-7"]

    product_wide = service.call("timeline", {"key": "BUG-12", "within": "product", "entities": "bug", "after": 1})
    assert product_wide["scope_key"] == "PRD-1"
    assert [r["key"] for r in product_wide["after"]] == ["BUG-13"]

    no_feature = service.call("timeline", {"key": "BUG-14", "after": 3, "entities": ["bug", "test"]})
    assert no_feature["within"] == "product" and no_feature["after"] == []
    assert no_feature["before"][0]["key"] == "BUG-13"


def test_unknown_keys_are_not_found(story):
    for operation in ("timeline", "similar"):
        with pytest.raises(NotFound) as caught:
            service.call(operation, {"key": "BUG-404"})
        assert caught.value.status == 404
        assert "no record with key 'BUG-404'" in str(caught.value)
