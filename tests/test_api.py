"""The REST API over the real database.

The people: Alice curates records (she may add, change and delete them and
import files); Bob reads (he has an account and nothing more); an anonymous
caller has neither token nor session.

The story: Tramline Mobile (conftest's TRAMLINE: the season pass renewal
bug BUG-12 and its test) plus a spinner bug seen during a renewal, and
Ledgerly's two invoice bugs that are really one.
"""

import io
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.http import QueryDict
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Scope
from accounts.tokens import issue
from api.errors import TooLarge
from api.parsers import JSONLinesParser
from backlog.imports import DATABASE_REFUSED, import_records
from backlog.models import Bug, Feature, Product, QATest, key_taken_message
from search import service
from search.contract import SearchError

from .conftest import VAT_BUG, client_with_token, jsonl

SEVERITIES = "'critical', 'high', 'medium' or 'low'"
BUG_STATUSES = "'open', 'accepted', 'rejected', 'fixed' or 'duplicate'"

pytestmark = pytest.mark.django_db

MORE = [
    {
        "kind": "bug",
        "key": "BUG-20",
        "product": "PRD-1",
        "title": "Spinner on checkout after login",
        "description": "Seen once during renewal of a yearly pass",
        "severity": "medium",
        "status": "fixed",
        "created_at": "2026-02-10T09:00:00+00:00",
        "updated_at": "2026-02-12T09:00:00+00:00",
    },
    {
        "kind": "test",
        "key": "TEST-4",
        "product": "PRD-2",
        "feature": "FEAT-9",
        "title": "Export an invoice as PDF",
        "status": "draft",
        "created_at": "2026-01-20T09:00:00+00:00",
        "updated_at": "2026-01-20T09:00:00+00:00",
    },
    {**VAT_BUG, "key": "BUG-21", "updated_at": "2026-03-02T09:00:00+00:00"},
    {
        "kind": "bug",
        "key": "BUG-22",
        "product": "PRD-2",
        "feature": "FEAT-9",
        "title": "Exported invoice shows wrong tax amount",
        "description": "The tax line on the exported PDF does not match the invoice screen",
        "severity": "high",
        "status": "open",
        "created_at": "2026-03-05T09:00:00+00:00",
        "updated_at": "2026-03-05T09:00:00+00:00",
    },
]


@pytest.fixture
def story(tramline):
    report = import_records(jsonl(*MORE).splitlines())
    assert report.written and not report.problems, report.problems


def keys(body: dict) -> list[str]:
    return [hit["key"] for hit in body["results"]]


def as_query(params: dict) -> QueryDict:
    return QueryDict(urlencode(params))


# -- search -------------------------------------------------------------------------------


def test_search_ranks_a_title_match_above_a_description_match(story, reader):
    response = reader.get("/api/search", {"query": "renewal", "mode": "keyword", "entities": "bug"})

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert keys(response.json()) == ["BUG-12", "BUG-20"]  # BUG-12 says renewal in its title
    assert [hit["kind"] for hit in response.json()["results"]] == ["bug", "bug"]


@pytest.mark.parametrize(
    "params",
    [
        {"query": "renewal"},
        {"query": "invoice pdf", "mode": "keyword", "include_scores": "true", "include_content": "true"},
        {"query": "wrong invoice", "detail": "full", "limit": "1"},
        {"query": "renew or invoice", "entities": "bug,test", "sort": "recent", "products": "PRD-1,PRD-2"},
        {"query": "spiner on chekout", "mode": "keyword"},  # typo tolerance: corrected_query
    ],
)
def test_the_body_is_exactly_what_the_search_module_returns(story, reader, bob, params):
    response = reader.get("/api/search", params)

    assert response.status_code == 200
    assert response.json() == service.call("search", as_query(params), bob)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"entities": "bug,test"}, {"BUG-12", "BUG-20", "BUG-21", "BUG-22", "TEST-3", "TEST-4"}),
        ({"entities": ["bug", "test"]}, {"BUG-12", "BUG-20", "BUG-21", "BUG-22", "TEST-3", "TEST-4"}),  # repeated
        ({"products": "PRD-2"}, {"PRD-2", "FEAT-9", "TEST-4", "BUG-21", "BUG-22"}),
        ({"status": "fixed"}, {"BUG-20"}),
        ({"status": "draft,fixed"}, {"TEST-4", "BUG-20"}),
        ({"severity": "critical,medium"}, {"BUG-21", "BUG-20"}),
        ({"feature": "FEAT-9"}, {"FEAT-9", "TEST-4", "BUG-21", "BUG-22"}),  # the feature itself too
        ({"created_after": "2026-03-01T09:00:00+00:00", "entities": "bug"}, {"BUG-21", "BUG-22"}),
        ({"created_before": "2026-01-31T00:00:00Z", "entities": "bug,test"}, {"TEST-3", "TEST-4"}),
        ({"updated_after": "2026-03-03T00:00:00Z", "entities": "bug,test"}, {"BUG-22"}),
        ({"updated_before": "2026-01-15T00:00:00Z", "entities": "test"}, {"TEST-3"}),
    ],
)
def test_each_filter_reaches_the_engine(story, reader, params, expected):
    broad = "renew or invoice or pdf or spinner or tramline or ledgerly or export or pass"

    body = reader.get("/api/search", {"query": broad, "mode": "keyword", "limit": 100, **params}).json()

    assert set(keys(body)) == expected
    assert body["total"] == len(expected)


def test_sort_recent_puts_the_newest_first(story, reader):
    body = reader.get("/api/search", {"query": "renew or invoice or spinner", "sort": "recent", "entities": "bug"})

    assert keys(body.json()) == ["BUG-22", "BUG-21", "BUG-20", "BUG-12"]


def test_cursor_pages_through_every_result_once(story, reader):
    params = {"query": "renew or invoice or spinner or pdf", "mode": "keyword"}
    everything = keys(reader.get("/api/search", {**params, "limit": 100}).json())
    pages, cursor = [], None
    while True:
        body = reader.get("/api/search", {**params, "limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        pages.append(keys(body))
        cursor = body["next_cursor"]
        if cursor is None:
            break

    assert len(everything) > 4
    assert [key for page in pages for key in page] == everything
    assert all(len(page) == 2 for page in pages[:-1])


def test_mode_match_mode_and_the_include_flags_reach_the_engine(story, reader):
    raw_query = {"query": "invoice & !vat", "match_mode": "raw", "mode": "keyword", "entities": "bug"}
    raw = reader.get("/api/search", raw_query).json()
    scored = reader.get("/api/search", {"query": "vat", "include_scores": "true", "include_content": "true"}).json()
    semantic = reader.get("/api/search", {"query": "renewal", "mode": "semantic"})

    assert keys(raw) == ["BUG-22"]
    hit = scored["results"][0]
    assert hit["key"] == "BUG-21" and hit["scores"]["keyword_rank"] == 1
    assert hit["content"]["expected_result"] == "VAT is 20%"
    assert scored["mode"] == "keyword"  # hybrid falls back while nothing is embedded
    # Not the request's fault: 503, and the message says how to mend it (or to use keyword).
    assert semantic.status_code == 503 and "manage.py embed" in semantic.json()["error"]["message"]
    assert semantic.json()["error"]["code"] == "semantic_unavailable"


@pytest.mark.parametrize(
    "params, names",
    [
        ({}, "query"),
        ({"query": "renew", "limit": "101"}, "limit"),
        ({"query": "renew", "limit": "many"}, "limit"),
        ({"query": "renew", "mode": "fuzzy"}, "mode"),
        ({"query": "renew", "entities": "bug,epic"}, "entities"),
        ({"query": "renew", "created_after": "yesterday"}, "created_after"),
        ({"query": "renew", "created_after": "2026-03-01T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}, ""),
        ({"query": "renew", "q": "typo"}, "'q'"),
        ({"query": "renew", "cursor": "garbage"}, "cursor"),
        ({"query": "renew & (android", "match_mode": "raw", "mode": "keyword"}, "tsquery"),
    ],
)
def test_an_invalid_search_is_400_with_the_service_s_message(story, reader, bob, params, names):
    response = reader.get("/api/search", params)

    with pytest.raises(SearchError) as raised:
        service.call("search", as_query(params), bob)
    assert response.status_code == 400
    assert response.json() == raised.value.body()
    assert response.json()["error"]["code"] == "invalid_request"
    assert names in response.json()["error"]["message"]


NUL = "contains a NUL character (\\u0000), which PostgreSQL cannot store; remove it."


@pytest.mark.parametrize(
    ("url", "params", "name"),
    [
        ("/api/search", {"query": "ab\x00cd"}, "query"),
        ("/api/search", {"query": "renew", "feature": "\x00"}, "feature"),
        ("/api/search", {"query": "renew", "products": "\x00"}, "products"),
        ("/api/search", {"query": "renew", "cursor": "a\x00"}, "cursor"),
        ("/api/similar/%00", {}, "key"),
        ("/api/timeline/A%00B", {}, "key"),
        ("/api/records", {"keys": "A\x00"}, "keys"),
    ],
)
def test_a_nul_character_is_400_naming_the_parameter(story, reader, url, params, name):
    response = reader.get(url, params)

    assert response.status_code == 400
    assert response.json() == {"error": {"code": "invalid_request", "message": f"{name}: {NUL}"}}


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/bugs/A%00B", 404),
        ("/api/products/%00", 404),
        ("/api/bugs?feature=%00", 400),
        ("/api/bugs?products=%00", 400),
    ],
)
def test_record_lookups_and_filters_with_a_nul_character_answer_cleanly(story, reader, url, status):
    response = reader.get(url)

    assert response.status_code == status
    assert response.json()["error"]["code"] == {400: "invalid_request", 404: "not_found"}[status]


def test_a_relation_named_with_a_nul_character_is_400(story, curator):
    response = curator.post("/api/bugs", {"key": "BUG-77", "product": "PRD\x00", "title": "Nul"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"product": [NUL]}


# -- similar, records, timeline ---------------------------------------------------------


def test_similar_finds_the_other_invoice_bug_and_never_the_record_itself(story, reader, bob):
    params = {"mode": "keyword", "entities": "bug"}

    response = reader.get("/api/similar/BUG-21", params)

    assert response.status_code == 200
    assert keys(response.json())[0] == "BUG-22"
    assert "BUG-21" not in keys(response.json())
    assert response.json() == service.call("similar", {**params, "key": "BUG-21"}, bob)


def test_similar_with_embeddings(story, reader):
    from search.indexing.vectors import embed_pending

    embed_pending()

    body = reader.get("/api/similar/BUG-22", {"entities": "bug"}).json()

    assert body["mode"] == "hybrid"
    assert keys(body)[0] == "BUG-21"


def test_records_returns_whole_records_in_the_order_asked_and_names_the_missing(story, reader, bob):
    response = reader.get("/api/records", {"keys": "BUG-12,NOPE-1,TEST-3"})
    bare = reader.get("/api/records", {"keys": "BUG-12", "include_content": "false", "include_related": "false"})

    body = response.json()
    assert [record["key"] for record in body["records"]] == ["BUG-12", "TEST-3"]
    assert body["missing"] == ["NOPE-1"]
    bug = body["records"][0]
    assert bug["raw_data"]["reporter"] == "dana"
    assert bug["content"]["actual_result"] == "Tapping Renew shows a spinner forever"
    assert [item["key"] for item in bug["related"]["test"]["items"]] == ["TEST-3"]
    assert body == service.call("get", {"keys": "BUG-12,NOPE-1,TEST-3"}, bob)
    assert bare.json()["records"][0].get("content") is None
    assert bare.json()["records"][0].get("related") is None


def test_timeline_shows_what_happened_around_a_record(story, reader, bob):
    response = reader.get("/api/timeline/BUG-12", {"within": "product"})

    body = response.json()
    assert body["record"]["key"] == "BUG-12"
    assert [ref["key"] for ref in body["before"]] == ["TEST-3"]  # PRD-1 and FEAT-7 were imported later, today
    assert [ref["key"] for ref in body["after"]][:1] == ["BUG-20"]
    assert body == service.call("timeline", {"key": "BUG-12", "within": "product"}, bob)


@pytest.mark.parametrize("url", ["/api/similar/BUG-404", "/api/timeline/BUG-404"])
def test_an_unknown_key_is_404_with_the_service_s_message(story, reader, bob, url):
    response = reader.get(url)

    operation = url.split("/")[2]
    with pytest.raises(SearchError) as raised:
        service.call(operation, {"key": "BUG-404"}, bob)
    assert response.status_code == 404
    assert response.json() == raised.value.body()
    assert "no record with key 'BUG-404'" in response.json()["error"]["message"]


# -- authentication -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, url",
    [
        ("get", "/api/search?query=renew"),
        ("get", "/api/records?keys=BUG-12"),
        ("get", "/api/bugs"),
        ("post", "/api/import"),
    ],
)
def test_without_credentials_every_endpoint_is_401(story, anonymous, method, url):
    response = getattr(anonymous, method)(url)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {
        "error": {"code": "not_authenticated", "message": "Authentication credentials were not provided."}
    }


def test_a_token_works_until_an_admin_revokes_it(story, bob, django_user_model):
    admin = APIClient()
    admin.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "a-long-passphrase"))
    token, key = issue(bob, "Bob's script", Scope.READ)
    program = APIClient()
    program.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    before = program.get("/api/bugs/BUG-12")
    changelist = admin.get(reverse("admin:accounts_apitoken_changelist"))
    revoked = admin.post(
        reverse("admin:accounts_apitoken_changelist"), {"action": "revoke", "_selected_action": [token.pk]}
    )
    after = program.get("/api/bugs/BUG-12")

    assert before.status_code == 200
    assert changelist.status_code == 200 and "Bob&#x27;s script" in changelist.content.decode()
    assert key not in changelist.content.decode()  # never shown again
    assert revoked.status_code == 302
    assert after.status_code == 401
    assert after.json() == {"error": {"code": "authentication_failed", "message": "Invalid token."}}


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "bearer"])
def test_a_token_opens_rest_as_token_or_as_bearer_the_scheme_mcp_asks_for(story, bob, scheme):
    """Bob's script sends the header his MCP client sends (Bearer): REST takes it too."""
    key = issue(bob, "test", Scope.WRITE)[1]
    program = APIClient()
    program.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION=f"{scheme} not-a-token")

    assert program.get("/api/bugs/BUG-12").status_code == 200
    refused = wrong.get("/api/bugs/BUG-12")
    assert refused.status_code == 401
    assert refused.json() == {"error": {"code": "authentication_failed", "message": "Invalid token."}}


def test_a_session_works_too_and_its_writes_need_the_csrf_token(story, alice):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)

    read = browser.get("/api/bugs/BUG-12")
    write = browser.patch("/api/bugs/BUG-12", {"status": "fixed"}, format="json")

    assert read.status_code == 200
    assert write.status_code == 403
    assert "CSRF" in write.json()["error"]["message"]


def test_a_reader_reads_but_may_not_write(story, reader):
    assert reader.get("/api/bugs/BUG-12").status_code == 200

    response = reader.patch("/api/bugs/BUG-12", {"status": "fixed"}, format="json")

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert Bug.objects.get(key="BUG-12").status == "open"


# -- records: read, filter, write ---------------------------------------------------------


def test_a_bug_reads_with_relations_as_keys_and_its_derived_fields(story, reader):
    body = reader.get("/api/bugs/BUG-12").json()

    assert body["kind"] == "bug"
    assert (body["product"], body["feature"], body["test"]) == ("PRD-1", "FEAT-7", "TEST-3")
    assert body["steps"] == "Open Passes\nTap Renew"
    assert body["environment"] == "Pixel 7, Android 14"
    assert body["created_at"] == "2026-02-01T10:00:00Z"


def test_the_bug_list_filters_orders_and_pages(story, reader):
    def listed(**params):
        response = reader.get("/api/bugs", params)
        assert response.status_code == 200, response.json()
        return [bug["key"] for bug in response.json()["results"]]

    assert listed() == ["BUG-22", "BUG-21", "BUG-20", "BUG-12"]  # newest first
    assert listed(products="PRD-2") == ["BUG-22", "BUG-21"]
    assert listed(status="open", severity="high,critical") == ["BUG-22", "BUG-21", "BUG-12"]
    assert listed(feature="FEAT-9", ordering="key") == ["BUG-21", "BUG-22"]
    assert listed(test="TEST-3") == ["BUG-12"]
    assert listed(created_after="2026-02-10T09:00:00Z", created_before="2026-03-01T09:00:00Z") == ["BUG-21", "BUG-20"]
    assert listed(updated_before="2026-02-12T09:00:00+00:00") == ["BUG-20", "BUG-12"]
    assert listed(ordering="-severity,key") == ["BUG-20", "BUG-12", "BUG-22", "BUG-21"]  # alphabetical values
    assert listed(limit=2, offset=1) == ["BUG-21", "BUG-20"]
    page = reader.get("/api/bugs", {"limit": 2}).json()
    assert page["count"] == 4 and page["next"].endswith("limit=2&offset=2") and page["previous"] is None


def test_other_lists_filter_by_the_same_names(story, reader):
    tests = reader.get("/api/tests", {"products": "PRD-2", "status": "draft"}).json()
    features = reader.get("/api/features", {"products": "PRD-1"}).json()
    products = reader.get("/api/products", {"ordering": "-name"}).json()

    assert [t["key"] for t in tests["results"]] == ["TEST-4"]
    assert [f["key"] for f in features["results"]] == ["FEAT-7"]
    assert [p["key"] for p in products["results"]] == ["PRD-1", "PRD-2"]  # Tramline, Ledgerly


@pytest.mark.parametrize(
    "params, name",
    [
        ({"product": "PRD-1"}, "product"),  # the filter is called products, as in /api/search
        ({"ordering": "reporter"}, "ordering"),
        ({"severity": "urgent"}, "severity"),
        ({"created_after": "last week"}, "created_after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"offset": "-1"}, "offset"),
    ],
)
def test_a_bad_list_parameter_is_400_naming_it(story, reader, params, name):
    response = reader.get("/api/bugs", params)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(f"{name}: ")
    assert list(error["fields"]) == [name]


def test_listing_bugs_takes_three_queries(story, bob, django_assert_num_queries):
    client = client_with_token(bob)
    client.get("/api/bugs")  # the token's first use this minute also writes its last_used_at: one more

    # The token with its user and whether they hold access_all_products (the
    # access rule asks), in one; the count; the page with product, feature and
    # test joined.
    with django_assert_num_queries(3):
        response = client.get("/api/bugs")

    assert len(response.json()["results"]) == 4


def test_a_curator_creates_a_bug_and_search_finds_it_at_once(story, curator):
    response = curator.post(
        "/api/bugs",
        {
            "key": "BUG-30",
            "product": "PRD-1",
            "feature": "FEAT-7",
            "title": "Renewal receipt email never arrives",
            "severity": "low",
            "raw_data": {"actual_result": "No email", "environment": "iOS 18"},
        },
        format="json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "bug" and body["status"] == "open" and body["test"] is None
    assert (body["actual_result"], body["environment"], body["expected_result"]) == ("No email", "iOS 18", None)
    found = curator.get("/api/search", {"query": "renewal receipt", "mode": "keyword"}).json()
    assert keys(found)[0] == "BUG-30"


def test_a_curator_edits_and_deletes(story, curator):
    before = Bug.objects.get(key="BUG-20").updated_at

    edited = curator.patch("/api/bugs/BUG-20", {"status": "open", "feature": "FEAT-7"}, format="json")
    deleted = curator.delete("/api/bugs/BUG-22")

    assert edited.status_code == 200, edited.json()
    bug = Bug.objects.get(key="BUG-20")
    assert (bug.status, bug.feature.key) == ("open", "FEAT-7") and bug.updated_at > before
    assert deleted.status_code == 204
    assert not Bug.objects.filter(key="BUG-22").exists()
    assert "BUG-22" not in keys(curator.get("/api/search", {"query": "tax", "mode": "keyword"}).json())


def test_keys_with_dots_work_in_urls(story, curator):
    created = curator.post("/api/products", {"key": "org.apache.hadoop", "name": "Hadoop"}, format="json")

    assert created.status_code == 201
    assert curator.get("/api/products/org.apache.hadoop").json()["name"] == "Hadoop"


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"key": "FEAT-9"}, "key", key_taken_message("FEAT-9")),
        ({"key": "BUG-12"}, "key", key_taken_message("BUG-12")),
        ({"key": "bug-12"}, "key", key_taken_message("bug-12")),
        ({"key": "BUG 31"}, "key", "A key is 1 to 64 letters"),
        ({"feature": "FEAT-9"}, "feature", "FEAT-9 belongs to PRD-2, not PRD-1."),
        ({"test": "TEST-4"}, "test", "TEST-4 belongs to PRD-2, not PRD-1."),
        ({"product": "PRD-404"}, "product", "no product has the key PRD-404."),
        ({"feature": "BUG-12"}, "feature", "no feature has the key BUG-12."),
        ({"severity": "urgent"}, "severity", f'"urgent" is not one of {SEVERITIES}.'),
        ({"severity": ""}, "severity", f'"" is not one of {SEVERITIES}.'),
        ({"status": "draft"}, "status", f'"draft" is not one of {BUG_STATUSES}.'),
        ({"title": "   "}, "title", "This field may not be blank."),
        ({"title": "x" * 501}, "title", "no more than 500 characters"),
        ({"description": "nul \x00 byte"}, "description", "Null characters are not allowed."),
        ({"raw_data": ["a", "list"]}, "raw_data", 'must be a JSON object, like {"actual_result": "..."}.'),
        ({"raw_data": {"note": "nul \x00"}}, "raw_data", "contains a NUL character"),
    ],
)
def test_an_invalid_bug_is_400_naming_the_field(story, curator, changes, field, message):
    bug = {"key": "BUG-31", "product": "PRD-1", "title": "Pass screen is blank", **changes}
    count = Bug.objects.count()

    response = curator.post("/api/bugs", bug, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(f"{field}: ") and message in error["message"]
    assert message in error["fields"][field][0]
    assert Bug.objects.count() == count


def test_a_missing_field_and_a_moved_relation_are_named_on_update(story, curator):
    created = curator.post("/api/tests", {"key": "TEST-9", "product": "PRD-1"}, format="json")
    moved = curator.patch("/api/bugs/BUG-12", {"product": "PRD-2"}, format="json")

    assert created.json()["error"]["fields"] == {"title": ["This field is required."]}
    assert moved.status_code == 400
    assert moved.json()["error"]["fields"] == {
        "feature": ["FEAT-7 belongs to PRD-1, not PRD-2."],
        "test": ["TEST-3 belongs to PRD-1, not PRD-2."],
    }
    assert Bug.objects.get(key="BUG-12").product.key == "PRD-1"


def test_a_test_keeps_its_steps_as_a_list(story, curator):
    response = curator.put(
        "/api/tests/TEST-3",
        {"key": "TEST-3", "product": "PRD-1", "title": "Renew with a saved card", "steps": ["Open", "Pay"]},
        format="json",
    )
    bad = curator.patch("/api/tests/TEST-3", {"steps": ["Open", ""]}, format="json")

    assert response.status_code == 200
    assert QATest.objects.get(key="TEST-3").steps == ["Open", "Pay"]
    assert response.json()["feature"] == "FEAT-7"  # a field PUT leaves out keeps its value
    assert bad.json()["error"]["fields"] == {"steps.1": ["This field may not be blank."]}


def test_an_unknown_record_is_404_and_a_product_in_use_is_409(story, curator):
    missing = curator.get("/api/bugs/BUG-404")
    in_use = curator.delete("/api/products/PRD-2")

    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "not_found", "message": "no bug with key 'BUG-404'."}}
    assert in_use.status_code == 409
    assert in_use.json()["error"] == {
        "code": "conflict",
        "message": "PRD-2 is still named by 2 bug(s), 1 feature(s), 1 test(s); delete or move them first.",
    }
    assert Product.objects.filter(key="PRD-2").exists()


# -- import ---------------------------------------------------------------------------------

NEW = [
    {"kind": "product", "key": "PRD-3", "name": "Parkside"},
    {"kind": "feature", "key": "FEAT-30", "product": "PRD-3", "name": "Parking permits"},
    {"kind": "bug", "key": "BUG-40", "product": "PRD-3", "feature": "FEAT-30", "title": "Permit PDF is blank"},
]


def post_jsonl(client, text: str, content_type="application/x-ndjson", **params):
    return client.post("/api/import" + (f"?{urlencode(params)}" if params else ""), text, content_type=content_type)


def test_import_writes_the_records_and_reports_like_the_command(story, curator):
    first = post_jsonl(curator, jsonl(*NEW))
    again = post_jsonl(curator, jsonl(*NEW), content_type="application/jsonl")

    assert first.status_code == 200, first.json()
    assert first.json() == {
        "written": True,
        "created": {"product": 1, "feature": 1, "bug": 1},
        "updated": {},
        "unchanged": {},
        "problems": [],
        "summary": "created 3 (1 product, 1 feature, 1 bug), updated 0, unchanged 0",
    }
    assert again.json()["unchanged"] == {"product": 1, "feature": 1, "bug": 1}
    assert Bug.objects.get(key="BUG-40").feature.key == "FEAT-30"
    found = curator.get("/api/search", {"query": "permit", "mode": "keyword", "entities": "bug"}).json()
    assert keys(found) == ["BUG-40"]


def test_one_bad_line_writes_nothing_and_names_the_line(story, curator):
    bad = {"kind": "bug", "key": "BUG-41", "product": "PRD-3", "title": "Blank", "severty": "high"}
    text = jsonl(*NEW, bad) + "{not json\n"

    response = post_jsonl(curator, text, content_type="text/plain")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_records"
    assert [(p["line"], p["key"]) for p in error["problems"]] == [(4, "BUG-41"), (5, None)]
    assert "unknown field 'severty' for a bug" in error["problems"][0]["message"]
    assert error["message"].startswith("2 problem(s) found; nothing was imported: line 4: BUG-41: unknown field")
    assert "skip_invalid=true" in error["message"]
    assert not Product.objects.filter(key="PRD-3").exists()
    assert not Feature.objects.filter(key="FEAT-30").exists()


def test_a_database_failure_is_logged_and_answered_without_the_database_s_text(story, curator, caplog):
    with connection.cursor() as cursor:  # PostgreSQL itself refuses the write, with text that names internals
        cursor.execute(
            """CREATE FUNCTION refuse_bug() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN RAISE EXCEPTION 'secret_internal_table is full'; END $$;
               CREATE TRIGGER refuse_bug BEFORE INSERT ON backlog_bug FOR EACH ROW EXECUTE FUNCTION refuse_bug();"""
        )

    response = post_jsonl(curator, jsonl(*NEW))

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["problems"] == [{"line": None, "key": None, "message": DATABASE_REFUSED}]
    assert "secret_internal_table" not in response.content.decode()
    assert "Try again" in error["message"]
    assert "secret_internal_table is full" in caplog.text  # in the log, not in the answer
    assert not Product.objects.filter(key="PRD-3").exists()


def test_dry_run_writes_nothing_and_skip_invalid_writes_the_rest(story, curator):
    dangling = {"kind": "bug", "key": "BUG-42", "product": "PRD-404", "title": "Orphan"}

    dry = post_jsonl(curator, jsonl(*NEW), dry_run="true")
    skipped = post_jsonl(curator, jsonl(*NEW, dangling), skip_invalid="true")

    assert dry.status_code == 200
    assert dry.json()["written"] is False and dry.json()["created"] == {"product": 1, "feature": 1, "bug": 1}
    assert skipped.status_code == 200
    assert skipped.json()["written"] is True
    assert [p["line"] for p in skipped.json()["problems"]] == [4]
    assert "PRD-404 is neither in the file nor stored" in skipped.json()["problems"][0]["message"]
    assert Bug.objects.filter(key="BUG-40").exists() and not Bug.objects.filter(key="BUG-42").exists()


def test_import_refuses_readers_other_media_types_empty_bodies_and_unknown_options(story, reader, curator):
    forbidden = post_jsonl(reader, jsonl(*NEW))
    form = post_jsonl(curator, jsonl(*NEW), content_type="application/x-www-form-urlencoded")
    empty = post_jsonl(curator, "\n")
    typo = post_jsonl(curator, jsonl(*NEW), dryrun="true")
    not_a_flag = post_jsonl(curator, jsonl(*NEW), dry_run="maybe")

    assert forbidden.status_code == 403
    assert "add and change permissions" in forbidden.json()["error"]["message"]
    assert form.status_code == 415
    assert "Content-Type application/x-ndjson" in form.json()["error"]["message"]
    assert empty.status_code == 400
    assert empty.json() == {
        "error": {
            "code": "invalid_request",
            "message": "The body is empty: send one JSON record a line (FORMAT.md).",
        }
    }
    assert typo.status_code == 400 and typo.json()["error"]["message"].startswith("dryrun: unknown parameter")
    assert not_a_flag.status_code == 400 and not_a_flag.json()["error"]["message"].startswith("dry_run: ")
    assert not Product.objects.filter(key="PRD-3").exists()


def test_an_import_with_dry_run_given_twice_is_refused_and_writes_nothing(story, curator):
    """dry_run=true&dry_run=false took the last value and wrote the records."""
    response = curator.post("/api/import?dry_run=true&dry_run=false", jsonl(*NEW), content_type="application/x-ndjson")

    assert response.status_code == 400
    assert response.json() == {
        "error": {"code": "invalid_request", "message": "dry_run: give one value, not a list of 2."}
    }
    assert not Product.objects.filter(key="PRD-3").exists()


def test_a_body_over_the_import_limit_is_413_and_writes_nothing(story, curator, settings):
    text = jsonl(*NEW)
    settings.IMPORT_MAX_BYTES = len(text.encode()) - 1

    response = post_jsonl(curator, text)

    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert f"import limit of {settings.IMPORT_MAX_BYTES:,} bytes (IMPORT_MAX_BYTES)" in error["message"]
    assert "manage.py import_records" in error["message"]
    assert not Product.objects.filter(key="PRD-3").exists()
    settings.IMPORT_MAX_BYTES = len(text.encode())
    assert post_jsonl(curator, "\n" + text).status_code == 413
    assert post_jsonl(curator, text).status_code == 200


def test_a_body_without_a_declared_length_is_cut_off_at_the_limit_too(settings):
    settings.IMPORT_MAX_BYTES = 10
    request = type("Request", (), {"META": {}})()

    lines = JSONLinesParser().parse(io.BytesIO(b"12345\n" * 3), parser_context={"request": request})

    assert next(lines) == b"12345\n"
    with pytest.raises(TooLarge):
        next(lines)


# -- one value a parameter --------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, url, name",
    [
        ("get", "/api/search?query=renewal&limit=1&limit=3", "limit"),
        ("get", "/api/search?query=renewal&format=csv&sort=recent&sort=relevant", "sort"),
        ("get", "/api/similar/BUG-12?key=BUG-21", "key"),  # the path's key, and another
        ("get", "/api/records?keys=BUG-12&include_related=true&include_related=false", "include_related"),
        ("get", "/api/timeline/BUG-12?before=1&before=2", "before"),
        ("post", "/api/bugs/check-duplicates?limit=1&limit=2", "limit"),
        ("get", "/api/bugs?limit=1&limit=3", "limit"),
        ("get", "/api/bugs?status=open&status=fixed", "status"),
        ("get", "/api/products?ordering=key&ordering=-key", "ordering"),
        ("get", "/api/bugs/BUG-20?x=1&x=2", "x"),
        ("post", "/api/bugs?x=1&x=2", "x"),
        ("patch", "/api/bugs/BUG-20?x=1&x=2", "x"),
        ("put", "/api/bugs/BUG-20?x=1&x=2", "x"),
        ("delete", "/api/bugs/BUG-20?x=1&x=2", "x"),
        ("post", "/api/import?skip_invalid=true&skip_invalid=false", "skip_invalid"),
        ("get", "/api/schema?format=json&format=yaml", "format"),
        ("get", "/api/docs?script&script", "script"),
    ],
)
def test_a_repeated_query_parameter_is_a_400_naming_it_on_every_endpoint(story, curator, method, url, name):
    """The record lists took the last of limit=1&limit=3, and the other endpoints ignored
    or took the last of theirs; search refused it. Now every endpoint does, in search's words."""
    body = {"title": "Renewal spinner", "key": "BUG-60", "product": "PRD-1"}
    response = getattr(curator, method)(url, **({} if method == "get" else {"data": body, "format": "json"}))

    assert response.status_code == 400, response.content[:300]
    assert response.json() == {
        "error": {"code": "invalid_request", "message": f"{name}: give one value, not a list of 2."}
    }
    assert Bug.objects.get(key="BUG-20").status == "fixed"  # nothing deleted or changed
    assert not Bug.objects.filter(key="BUG-60").exists()


def test_a_search_list_may_still_be_repeated(story, reader):
    repeated = reader.get("/api/search?query=renewal&mode=keyword&entities=bug&entities=test")
    listed = reader.get("/api/search?query=renewal&mode=keyword&entities=bug,test")

    assert repeated.status_code == 200
    assert repeated.json() == listed.json()


# -- everything else is JSON too ------------------------------------------------------------


def test_unknown_urls_methods_and_bodies_answer_in_json(story, curator, anonymous):
    nowhere = anonymous.get("/api/nowhere")
    slash = curator.get("/api/bugs/")
    post_search = curator.post("/api/search", {}, format="json")
    broken = curator.post("/api/bugs", "{broken", content_type="application/json")

    assert nowhere.status_code == slash.status_code == 404
    assert nowhere.json()["error"] == {
        "code": "not_found",
        "message": "no endpoint at /api/nowhere; the endpoints are listed at /api/docs.",
    }
    assert post_search.status_code == 405
    assert post_search.json()["error"] == {"code": "method_not_allowed", "message": 'Method "POST" not allowed.'}
    assert broken.status_code == 400
    assert broken.json()["error"]["message"].startswith("JSON parse error")


def test_an_unexpected_failure_is_a_short_json_500(story, reader, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError('relation "search_document" does not exist: SELECT secret FROM ...')

    monkeypatch.setattr(service, "call", broken)

    response = reader.get("/api/search", {"query": "renew"})

    assert response.status_code == 500
    assert response.json() == {
        "error": {"code": "server_error", "message": "The server failed to answer this request; the error is logged."}
    }
    assert "SELECT secret" in caplog.text  # in the log, not in the answer


# -- schema and docs ------------------------------------------------------------------------


def test_the_schema_is_valid_openapi_generated_from_the_contract(anonymous):
    from drf_spectacular.validation import validate_schema

    from search.contract import SearchRequest

    response = anonymous.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    schema = response.json()
    validate_schema(schema)
    assert schema["openapi"] == "3.1.0"
    search = schema["paths"]["/api/search"]["get"]
    assert {p["name"] for p in search["parameters"]} == {*SearchRequest.model_fields, "format"}  # format: the export
    entities = next(p for p in search["parameters"] if p["name"] == "entities")
    assert (entities["style"], entities["explode"]) == ("form", False)
    assert search["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SearchResponse"
    }
    assert {"SearchResponse", "Hit", "GetResponse", "TimelineResponse", "Error", "Bug"} <= set(
        schema["components"]["schemas"]
    )
    assert schema["components"]["securitySchemes"]["tokenAuth"]["in"] == "header"
    assert {"/api/bugs/{key}", "/api/import", "/api/similar/{key}", "/api/timeline/{key}"} <= set(schema["paths"])


def test_swagger_ui_is_served_from_local_files(anonymous):
    response = anonymous.get("/api/docs")

    page = response.content.decode()
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower() and "https://" not in page


def test_the_write_examples_of_docs_api_md_work_on_the_demo_data(alice):
    """docs/api.md's create-bug and update-bug examples, run as written
    against the demo's products and features (`seed_demo`'s defaults) and
    its highest bug key: a new bug in the feature's own product, then fixed."""
    import json
    import re
    from pathlib import Path

    from backlog.demo import generate
    from backlog.interchange import dumps

    demo = list(generate(5000, 0))
    skeleton = [dumps(r) for r in demo if r["kind"] in ("product", "feature")]
    assert import_records(skeleton).written
    text = Path(__file__).resolve().parent.parent.joinpath("docs", "api.md").read_text(encoding="utf-8")
    example = r"-X (POST|PATCH) \\\n  -d '(.*?)' \\?\n?\s*http://127\.0\.0\.1:8000(/api/\S+)"
    post, patch = re.findall(example, text, re.S)[:2]
    client = client_with_token(alice)

    created = client.post(post[2], json.loads(post[1]), format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["key"] not in {r["key"] for r in demo}  # it would be taken on the demo database
    updated = client.patch(patch[2], json.loads(patch[1]), format="json")
    assert updated.status_code == 200 and updated.json()["status"] == "fixed"


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("post", "/api/bugs", {"key": "BUG-77", "product": "PRD-1", "title": "Stuck", "severity": "blocker"}),
        ("get", "/api/bugs?severity=high,blocker", None),
    ],
)
def test_a_refused_severity_names_the_ones_there_are(alice, tramline, method, path, body):
    response = (
        getattr(client_with_token(alice), method)(path, body, format="json")
        if body
        else client_with_token(alice).get(path)
    )

    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "severity: \"blocker\" is not one of 'critical', 'high', 'medium' or 'low'."
    )
