"""One access rule (backlog.access.visible_product_ids) restricts every reader.

Everyone sees everything today, so the rule is replaced here by one that a
product-membership rule might become.

The people: Alice is on the QA staff and sees everything. Carol is on the QA
staff too but works on Tramline only: Ledgerly (PRD-2) is hidden from her.

The story: conftest's Tramline records (the season pass renewal bug BUG-12),
plus Ledgerly's invoice renewal bug BUG-30, which every renewal search
would find.
"""

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from backlog import access
from backlog.models import Product
from backlog.services import import_records
from search import service
from search.contract import NotFound

from .conftest import TRAMLINE, jsonl

pytestmark = pytest.mark.django_db

LEDGERLY_BUG = {
    "kind": "bug",
    "key": "BUG-30",
    "product": "PRD-2",
    "feature": "FEAT-9",
    "title": "Invoice renewal reminder button does nothing",
    "severity": "critical",
    "status": "open",
    "created_at": "2026-02-05T10:00:00+00:00",
}
LEDGERLY = {"PRD-2", "FEAT-9", "BUG-30"}
SEARCH = {"query": "renewal", "mode": "keyword"}


@pytest.fixture
def story(db):
    report = import_records(jsonl(*TRAMLINE, LEDGERLY_BUG).splitlines())
    assert report.written and not report.problems, report.problems


@pytest.fixture
def alice(db):
    return User.objects.create_user("alice", is_staff=True)


@pytest.fixture
def carol(db, story, monkeypatch):
    carol = User.objects.create_user("carol", is_staff=True)
    carol.user_permissions.add(Permission.objects.get(codename="add_bug"))
    tramline_only = list(Product.objects.exclude(key="PRD-2").values_list("id", flat=True))

    def rule(user):
        return tramline_only if user is not None and user.pk == carol.pk else None

    monkeypatch.setattr(access, "visible_product_ids", rule)
    return carol


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def keys(body: dict) -> set[str]:
    return {hit["key"] for hit in body["results"]}


def test_alice_finds_ledgerly_s_renewal_bug(story, carol, alice):
    body = service.call("search", SEARCH, alice)

    assert "BUG-30" in keys(body)
    assert {item["value"] for item in body["facets"]["product"]} == {"PRD-1", "PRD-2"}


def test_carol_s_search_shows_no_ledgerly_record_count_or_facet(carol):
    body = api(carol).get("/api/search", SEARCH).json()

    assert keys(body) == {"BUG-12", "FEAT-7", "TEST-3"}
    assert body["total"] == 3
    assert body["facets"]["product"] == [{"value": "PRD-1", "count": 3}]
    assert body == service.call("search", SEARCH, carol)
    assert service.call("search", {**SEARCH, "products": "PRD-2"}, carol)["total"] == 0


def test_carol_s_record_lists_and_lookups_leave_ledgerly_out(carol):
    client = api(carol)

    assert [bug["key"] for bug in client.get("/api/bugs").json()["results"]] == ["BUG-12"]
    assert [product["key"] for product in client.get("/api/products").json()["results"]] == ["PRD-1"]
    assert client.get("/api/features", {"products": "PRD-2"}).json()["count"] == 0
    for url in ("/api/bugs/BUG-30", "/api/products/PRD-2", "/api/features/FEAT-9"):
        assert client.get(url).status_code == 404, url
    created = client.post("/api/bugs", {"key": "BUG-31", "product": "PRD-2", "title": "Hidden"}, format="json")
    assert created.status_code == 400
    assert created.json()["error"]["fields"] == {"product": ["no product has the key PRD-2."]}


def test_carol_gets_no_ledgerly_record_by_key_on_rest_or_mcp(carol):
    body = api(carol).get("/api/records", {"keys": "BUG-30,BUG-12"}).json()

    assert [record["key"] for record in body["records"]] == ["BUG-12"]
    assert body["missing"] == ["BUG-30"]
    # MCP's tools are service.call with the token's user.
    assert body == service.call("get", {"keys": ["BUG-30", "BUG-12"]}, carol)
    assert LEDGERLY.isdisjoint(keys(service.call("similar", {"key": "BUG-12", "mode": "keyword"}, carol)))
    with pytest.raises(NotFound):
        service.call("timeline", {"key": "BUG-30"}, carol)
    assert api(carol).get("/api/timeline/BUG-30").status_code == 404


def test_carol_s_search_page_names_no_ledgerly_record_or_product(client, carol):
    client.force_login(carol)

    html = client.get("/search/", {**SEARCH, "products": "PRD-1,PRD-2"}).content.decode()

    assert "BUG-12" in html
    assert "BUG-30" not in html and "Ledgerly" not in html


def test_carol_s_dashboard_counts_only_tramline(client, carol):
    client.force_login(carol)

    response = client.get("/dashboard/")

    html = response.content.decode()
    assert [product.key for product in response.context["products"]] == ["PRD-1"]
    totals = response.context["totals"]
    assert (totals.feature, totals.test, totals.bug, totals.open_bugs) == (1, 1, 1, 1)
    assert [bug.key for bug in response.context["recent_bugs"]] == ["BUG-12"]
    assert response.context["chart"].total == 1
    assert "BUG-30" not in html and "Ledgerly" not in html
