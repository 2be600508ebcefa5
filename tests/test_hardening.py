"""Hostile input gets a clear 4xx, never a server error (the access and hardening issue, part 2)."""

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from backlog.imports import import_records
from backlog.models import Bug
from search import service
from search.contract import SearchError

from .conftest import api_key, jsonl

# -- the service: what MCP tool arguments and REST parameters reach ---------------------------


@pytest.mark.parametrize(
    "operation, params, named",
    [
        ("search", {"query": "renewal", "entities": [1]}, "entities"),
        ("search", {"query": "renewal", "products": [3.5]}, "products"),
        ("search", {"query": "renewal", "mode": []}, "mode"),
        ("search", {"query": "renewal", "mode": ["hybrid", "keyword"]}, "mode"),
        ("search", {"query": "renewal", "limit": {"x": 1}}, "limit"),
        ("get", {"keys": [1, None]}, "keys"),
        ("timeline", {"key": "BUG-12", "before": []}, "before"),
        ("similar", {"key": []}, "key"),
        ("similar", {"key": {"a": 1}}, "key"),
        ("search", {"query": "renewal", "created_after": "0001-01-01T00:00:00+05:00"}, "created_after"),
    ],
)
def test_arguments_of_the_wrong_type_are_a_search_error_naming_them(tramline, operation, params, named):
    with pytest.raises(SearchError) as raised:
        service.call(operation, params)
    assert str(raised.value).startswith(f"{named}")


def test_null_means_not_given(tramline):
    with_nulls = service.call("search", {"query": "renewal", "status": None, "entities": None, "cursor": None})
    assert with_nulls == service.call("search", {"query": "renewal"})
    with pytest.raises(SearchError, match="query: required"):
        service.call("search", {"query": None})


@pytest.mark.parametrize("offset", ["+18:18", "-23:59", "+15:59"])
def test_any_iso_offset_is_the_same_instant_in_utc(tramline, offset):
    """PostgreSQL takes offsets up to ±15:59; ISO 8601 up to ±23:59."""
    hours, minutes = int(offset[1:3]), int(offset[4:])
    sign = 1 if offset[0] == "+" else -1
    local = f"2026-02-01T{10 + 0:02d}:00:00{offset}"
    shifted = service.call("search", {"query": "renewal", "created_after": local, "mode": "keyword"})
    from datetime import UTC, datetime, timedelta

    utc = datetime(2026, 2, 1, 10, tzinfo=UTC) - sign * timedelta(hours=hours, minutes=minutes)
    same = service.call("search", {"query": "renewal", "created_after": utc.isoformat(), "mode": "keyword"})
    assert [hit["key"] for hit in shifted["results"]] == [hit["key"] for hit in same["results"]]


# -- REST ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, status",
    [
        ("/api/search?query=renewal&created_after=2024-01-01T00:00:00%2B18:18", 200),
        ("/api/bugs?created_after=2024-01-01T00:00:00%2B18:18", 200),
        ("/api/search?query=renewal&updated_before=0001-01-01T00:00:00%2B05:00", 400),
        ("/api/bugs?updated_before=0001-01-01T00:00:00%2B05:00", 400),
    ],
)
def test_far_offsets_in_rest_filters_answer_cleanly(tramline, reader, url, status):
    response = reader.get(url)
    assert response.status_code == status, response.content[:300]
    if status == 400:
        assert "updated_before" in response.json()["error"]["message"]
    else:
        assert response.json()["results"]


@pytest.mark.parametrize("key", ["X", "Y", "é", "%", "BUG-1%20OR%201=1"])
def test_short_and_odd_keys_are_404_json(tramline, reader, key):
    for url in (f"/api/similar/{key}", f"/api/timeline/{key}"):
        response = reader.get(url)
        assert response.status_code == 404, (url, response.content[:300])
        assert response.json()["error"]["code"] == "not_found"


def test_a_record_keyed_with_one_letter_has_a_page_and_neighbours(tramline, reader, bob):
    report = import_records(
        jsonl(
            {"kind": "bug", "key": "Y", "product": "PRD-1", "title": "Renewal spinner on the pass screen"}
        ).splitlines()
    )
    assert report.written, report.problems
    assert reader.get("/api/similar/Y").status_code == 200
    assert reader.get("/api/timeline/Y").status_code == 200
    bob.is_staff = True
    bob.save()
    browser = Client()
    browser.force_login(bob)
    page = browser.get("/records/Y/")
    assert page.status_code == 200 and b"Renewal spinner on the pass screen" in page.content


def test_a_body_over_the_limit_is_413_json(tramline, curator, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = json.dumps({"key": "BUG-900", "product": "PRD-1", "title": "x" * 2000})
    response = curator.post("/api/bugs", body, content_type="application/json")
    assert response.status_code == 413, response.content[:300]
    assert response.json()["error"]["code"] == "too_large"
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["error"]["message"]


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_a_write_to_a_key_no_route_takes_is_a_json_404(tramline, alice, method):
    """Found by schemathesis: a key outside the routes' pattern reaches the catch-all
    404 view, which the CSRF middleware used to refuse first with an HTML 403."""
    client = APIClient(enforce_csrf_checks=True)  # as a real client is: the test client skips CSRF
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_key(alice)}")
    response = getattr(client, method)("/api/bugs/%C2%84", {"title": "x"}, format="json")
    assert response.status_code == 404, response.content[:300]
    assert response.json()["error"]["code"] == "not_found"


def test_the_schema_documents_the_413_and_503_the_api_gives(anonymous):
    """Found by schemathesis: a record body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413,
    and any request may be a 503 (database away, mode=semantic unable to run)."""
    paths = anonymous.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()["paths"]
    for method in ("post", "put", "patch"):
        path = "/api/bugs" if method == "post" else "/api/bugs/{key}"
        assert "413" in paths[path][method]["responses"], method
    assert "413" not in paths["/api/bugs/{key}"]["get"]["responses"]
    assert all("503" in operation["responses"] for operations in paths.values() for operation in operations.values())


def test_a_delete_without_a_token_or_csrf_is_json(tramline):
    browser = Client(enforce_csrf_checks=True)
    response = browser.delete("/api/bugs/BUG-12")
    assert response.status_code in (401, 403)
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    assert "error" in response.json()


# -- the embedder may fail; search may not --------------------------------------------------------


@pytest.fixture
def embedded_story(tramline):
    from search.indexing.vectors import embed_pending

    assert embed_pending() > 0


@pytest.mark.parametrize(
    "broken, named, similar_mode",
    [
        ({"EMBEDDING_PROVIDER": "bogus"}, "EMBEDDING_PROVIDER", "keyword"),
        # similar compares stored vectors: it needs no model to run
        ({"EMBEDDING_MODEL_CACHE": "/dev/null/models"}, "provider failed", "hybrid"),
    ],
)
def test_a_broken_embedder_leaves_keyword_whole_and_hybrid_says_it_fell_back(
    embedded_story, reader, settings, broken, named, similar_mode
):
    keyword = reader.get("/api/search?query=renewal&mode=keyword").json()
    for name, value in broken.items():
        setattr(settings, name, value)
    still = reader.get("/api/search?query=renewal&mode=keyword").json()
    assert {**still, "index": None} == {**keyword, "index": None}  # the index's health says what changed
    assert "degraded" not in still
    hybrid = reader.get("/api/search?query=renewal")
    assert hybrid.status_code == 200
    body = hybrid.json()
    assert body["mode"] == "keyword" and named in body["degraded"]["semantic"]
    assert [hit["key"] for hit in body["results"]] == [hit["key"] for hit in keyword["results"]]
    semantic = reader.get("/api/search?query=renewal&mode=semantic")
    assert semantic.status_code == 503 and semantic["Retry-After"]
    assert semantic.json()["error"]["code"] == "semantic_unavailable"
    similar = reader.get("/api/similar/BUG-12").json()
    assert similar["mode"] == similar_mode and ("degraded" in similar) == (similar_mode == "keyword")


def test_hybrid_before_any_embedding_says_why_it_answered_by_keyword(tramline, reader):
    body = reader.get("/api/search?query=renewal").json()
    assert body["mode"] == "keyword" and "manage.py embed" in body["degraded"]["semantic"]


# -- integrity ---------------------------------------------------------------------------------


def test_a_feature_with_bugs_cannot_move_to_another_product(tramline, curator):
    from backlog.models import Bug, Feature, Product

    Product.objects.create(key="PRD-9", name="Other product")
    response = curator.patch("/api/features/FEAT-7", {"product": "PRD-9"}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "FEAT-7 has tests or bugs in PRD-1" in response.json()["error"]["message"]
    assert Feature.objects.get(key="FEAT-7").product.key == "PRD-1"
    assert Bug.objects.get(key="BUG-12").feature.product.key == Bug.objects.get(key="BUG-12").product.key
    # A feature with nothing under it may move.
    Feature.objects.create(key="FEAT-8", name="Lonely", product=Product.objects.get(key="PRD-1"))
    assert curator.patch("/api/features/FEAT-8", {"product": "PRD-9"}, format="json").status_code == 200


# -- round two: what an outside tester still found (issue 26) ----------------------------------

SURROGATE = "\\ud800"  # as a JSON escape: a lone UTF-16 surrogate, which no UTF-8 text holds


@pytest.mark.parametrize(
    "method, url, body, named",
    [
        ("post", "/api/bugs/check-duplicates", f'{{"title": "Crash {SURROGATE}"}}', "title"),
        ("post", "/api/bugs", f'{{"key": "BUG-90", "product": "PRD-1{SURROGATE}", "title": "x"}}', "product"),
        (
            "post",
            "/api/bugs",
            f'{{"key": "BUG-90", "product": "PRD-1", "title": "x", "severity": "{SURROGATE}"}}',
            "severity",
        ),
        (
            "post",
            "/api/bugs",
            f'{{"key": "BUG-90", "product": "PRD-1", "title": "x", "raw_data": {{"steps": ["a", "{SURROGATE}"]}}}}',
            "raw_data.steps[1]",
        ),
        ("post", "/api/features", f'{{"key": "FEAT-90", "product": "PRD-1", "name": "{SURROGATE}"}}', "name"),
        (
            "post",
            "/api/bugs",
            f'{{"key": "BUG-90", "product": "PRD-1", "title": "x", "raw_data": {{"{SURROGATE}": 1}}}}',
            "a key of raw_data",
        ),
    ],
)
def test_a_lone_surrogate_in_a_json_body_is_a_400_naming_the_field(tramline, curator, method, url, body, named):
    response = getattr(curator, method)(url, body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["message"].startswith(f"{named} holds a lone UTF-16 surrogate")


@pytest.mark.parametrize("query", ["dry_run=true", "dry_run=true&skip_invalid=true", ""])
@pytest.mark.parametrize("where", ["key", "title"])
def test_a_lone_surrogate_in_an_import_is_a_problem_of_its_line(tramline, curator, query, where):
    record = {"kind": "bug", "key": "BUG-91", "product": "PRD-1", "title": "Crash"}
    record[where] += SURROGATE
    line = json.dumps(record).replace("\\\\", "\\") + "\n"  # the escape as sent, not escaped again
    response = curator.post(f"/api/import?{query}", line, content_type="application/x-ndjson")
    # Refused as its line (skip_invalid: reported beside what was imported), never a 500.
    assert response.status_code == (200 if "skip_invalid" in query else 400), response.content[:300]
    body = response.json()
    problems = body["problems"] if response.status_code == 200 else body["error"]["problems"]
    assert [(p["line"], p["key"]) for p in problems] == [(1, None if where == "key" else "BUG-91")]
    assert problems[0]["message"].startswith("not valid JSON")


@pytest.mark.parametrize("method", ["options", "post", "put", "patch", "delete"])
def test_the_api_docs_page_answers_other_methods_with_405_not_a_server_error(db, anonymous, method):
    response = getattr(anonymous, method)("/api/docs")
    assert response.status_code == 405 and response["Allow"] == "GET, HEAD"
    assert b"Traceback" not in response.content and b"TemplateDoesNotExist" not in response.content


def test_an_inactive_users_token_is_answered_as_an_unknown_token(tramline, alice):
    token = api_key(alice)
    alice.is_active = False
    alice.save()
    inactive = APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/search?query=renewal")
    unknown = APIClient(HTTP_AUTHORIZATION="Token " + "0" * 40).get("/api/search?query=renewal")
    assert inactive.status_code == unknown.status_code == 401
    assert (
        inactive.json() == unknown.json() == {"error": {"code": "authentication_failed", "message": "Invalid token."}}
    )


# -- nesting and times the database cannot take are a problem of their line ------------------------


def nested_bug(key: str, depth: int) -> str:
    """A bug whose raw_data holds a trace `depth` arrays deep: raw_data itself is
    one level more, the line two."""
    trace = "[" * depth + "]" * depth
    return f'{{"kind": "bug", "key": "{key}", "product": "PRD-1", "title": "Crash", "raw_data": {{"trace": {trace}}}}}'


@pytest.mark.parametrize("query", ["dry_run=true", ""])
@pytest.mark.parametrize(
    "depth, key, message",
    [
        # Read, and refused by the format's limit (docs/format.md).
        (100, "BUG-92", "'raw_data' nests objects and arrays more than 100 levels deep; flatten it"),
        # Past what the JSON parser reads (900 levels was a 400 naming its parser's recursion
        # limit; 5,000 a RecursionError, a 500): no key can be read, the line is still named.
        (900, None, "the line nests objects and arrays too deep to read; raw_data may nest 100 levels"),
        (5000, None, "the line nests objects and arrays too deep to read; raw_data may nest 100 levels"),
    ],
)
def test_a_line_nested_deeper_than_the_format_allows_is_a_problem_of_its_line(
    tramline, curator, query, depth, key, message
):
    text = jsonl({"kind": "bug", "key": "BUG-91", "product": "PRD-1", "title": "Fine"}) + nested_bug("BUG-92", depth)

    response = curator.post(f"/api/import?{query}", text + "\n", content_type="application/x-ndjson")

    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_records"
    assert error["problems"] == [{"line": 2, "key": key, "message": message}]
    assert not Bug.objects.filter(key__in=["BUG-91", "BUG-92"]).exists()


def test_raw_data_as_deep_as_the_limit_imports(tramline, curator):
    response = curator.post("/api/import", nested_bug("BUG-92", 99) + "\n", content_type="application/x-ndjson")

    assert response.status_code == 200, response.content[:300]
    stored = Bug.objects.get(key="BUG-92").raw_data["trace"]
    depth = 0
    while stored:
        stored, depth = stored[0], depth + 1
    assert depth == 98  # the innermost array is empty


@pytest.mark.parametrize("depth", [101, 900, 5000])
@pytest.mark.parametrize(
    "url, body",
    [
        ("/api/bugs", '{{"key": "BUG-93", "product": "PRD-1", "title": "Crash", "raw_data": {{"trace": {}}}}}'),
        ("/api/bugs/check-duplicates", '{{"title": "Crash on start", "steps": {}}}'),
    ],
)
def test_a_json_body_nested_deeper_than_any_field_takes_is_a_400(tramline, curator, depth, url, body):
    response = curator.post(url, body.format("[" * depth + "]" * depth), content_type="application/json")

    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"] == {
        "code": "invalid_request",
        "message": "The body nests objects and arrays more than 101 levels deep; raw_data may nest 100.",
    }
    assert not Bug.objects.filter(key="BUG-93").exists()


@pytest.mark.parametrize("query", ["dry_run=true", ""])
def test_a_time_past_year_9999_in_utc_is_refused_alike_by_a_dry_run_and_an_import(tramline, curator, query):
    """ISO 8601 takes offsets up to -23:59: the last second of 9999 there is in year 10000 in UTC.
    The dry run passed it, and the import then failed with "the database refused"."""
    late = {
        "kind": "bug",
        "key": "BUG-94",
        "product": "PRD-1",
        "title": "Late",
        "created_at": "9999-12-31T23:59:59-23:59",
    }

    response = curator.post(f"/api/import?{query}", jsonl(late), content_type="application/x-ndjson")

    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["problems"] == [
        {
            "line": 1,
            "key": "BUG-94",
            "message": "'created_at' is out of range once converted to UTC; give a time between years 1 and 9999",
        }
    ]
    assert not Bug.objects.filter(key="BUG-94").exists()


def test_any_iso_offset_in_an_import_is_stored_as_the_same_instant(tramline, curator):
    """PostgreSQL refused an offset past ±15:59 that the format takes: the import said
    "the database refused" for a file its dry run had passed."""
    far = {
        "kind": "bug",
        "key": "BUG-95",
        "product": "PRD-1",
        "title": "Far",
        "created_at": "2026-02-01T10:00:00-23:59",
    }

    response = curator.post("/api/import", jsonl(far), content_type="application/x-ndjson")

    assert response.status_code == 200, response.content[:300]
    assert Bug.objects.get(key="BUG-95").created_at.isoformat() == "2026-02-02T09:59:00+00:00"
