"""One access rule (backlog.access.visible_product_ids) restricts every reader.

A user sees and changes the products of their teams (Django groups on
Product.teams); superusers and the access_all_products permission see all.
tests/test_leaks.py walks every surface as a restricted user; here is the
rule itself, and what each surface does with it.

The people: Alice is on the QA staff and sees everything. Carol is on the QA
staff too but is on the Tramline team only: Ledgerly (PRD-2) is hidden from her.

The story: conftest's Tramline records (the season pass renewal bug BUG-12),
plus Ledgerly's invoice renewal bug BUG-30, which every renewal search
would find.
"""

from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import AnonymousUser, Group, Permission, User
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from backlog import access
from backlog.imports import import_records
from backlog.models import Bug, Product
from search import service
from search.contract import NotFound, SearchError

from .conftest import LEDGERLY_BUG, TRAMLINE, jsonl, seeing_all_products

pytestmark = pytest.mark.django_db

LEDGERLY = {"PRD-2", "FEAT-9", "BUG-30"}
SEARCH = {"query": "renewal", "mode": "keyword", "include_facets": "true"}


@pytest.fixture
def story(db):
    report = import_records(jsonl(*TRAMLINE, LEDGERLY_BUG).splitlines())
    assert report.written and not report.problems, report.problems


@pytest.fixture
def alice(db):
    return seeing_all_products(User.objects.create_user("alice", is_staff=True))


@pytest.fixture
def tramline_team(story):
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    return team


@pytest.fixture
def carol(db, tramline_team):
    carol = User.objects.create_user("carol", is_staff=True)
    carol.groups.add(tramline_team)
    carol.user_permissions.add(*Permission.objects.filter(codename__in=["add_bug", "add_product", "view_product"]))
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
    # Ledgerly's key is answered as a key that exists nowhere: the products Carol may see, listed.
    for product in ("PRD-2", "PRD-404"):
        with pytest.raises(SearchError) as refused:
            service.call("search", {**SEARCH, "products": product}, carol)
        assert str(refused.value) == (
            f'products: "{product}" is not the key or name of a product you can see: PRD-1 (Tramline Mobile).'
        )


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


# -- the rule ---------------------------------------------------------------------------------


def test_a_user_sees_the_products_of_their_teams_and_no_team_means_nothing(story, tramline_team):
    dana = User.objects.create_user("dana")
    ids = dict(Product.objects.values_list("key", "id"))

    assert access.visible_product_ids(dana) == []
    assert service.call("search", SEARCH, dana)["total"] == 0
    dana.groups.add(tramline_team)
    assert access.visible_product_ids(dana) == [ids["PRD-1"]]
    Product.objects.get(key="PRD-2").teams.add(Group.objects.create(name="Billing"))
    dana.groups.add(Group.objects.get(name="Billing"))
    assert access.visible_product_ids(dana) == sorted(ids.values())


def test_superusers_the_all_products_permission_and_the_operator_see_everything(story):
    root = User.objects.create_superuser("root", "root@example.com", "a-long-passphrase")
    auditor = seeing_all_products(User.objects.create_user("auditor"))

    for user in (root, auditor, None):
        assert access.visible_product_ids(user) is None
        assert keys(service.call("search", SEARCH, user)) >= {"BUG-12", "BUG-30"}


def test_an_inactive_or_anonymous_user_sees_nothing(carol):
    carol.is_active = False
    carol.save()

    assert access.visible_product_ids(carol) == []
    assert access.visible_product_ids(AnonymousUser()) == []


def test_a_user_read_with_their_access_sees_what_has_perm_says_without_asking_again(story, carol, tramline_team):
    """backlog.access.active_user (how the MCP tools read their user on every call) answers from the
    user's own statement what Django's permission check answers in two more: for the permission held
    directly, through a group, by a superuser, and not at all; an inactive holder is no active user."""
    auditors = Group.objects.create(name="Auditors")
    auditors.permissions.add(Permission.objects.get(codename="access_all_products"))
    User.objects.create_user("dora").groups.add(auditors)
    seeing_all_products(User.objects.create_user("erin"))
    User.objects.create_superuser("root", "root@example.com", "a-long-passphrase")
    seeing_all_products(User.objects.create_user("frank", is_active=False))

    for name in ("carol", "dora", "erin", "root", "frank"):
        expected = access.visible_product_ids(User.objects.get(username=name))
        pk = User.objects.get(username=name).pk
        with CaptureQueriesContext(connection) as queries:
            user = access.active_user(pk)
            seen = access.visible_product_ids(user) if user else None

        if name == "frank":  # inactive: no active user to act as
            assert user is None and expected == []
            continue
        assert seen == expected, name
        # The user, and for carol the products of her teams: no permission query.
        assert len(queries) == (2 if name == "carol" else 1), [q["sql"] for q in queries]
    assert access.visible_product_ids(User.objects.get(username="carol")) == [Product.objects.get(key="PRD-1").id]


def test_leaving_a_team_takes_effect_on_the_next_request(carol, tramline_team):
    client = api(carol)
    assert client.get("/api/bugs/BUG-12").status_code == 200

    carol.groups.remove(tramline_team)

    assert client.get("/api/bugs/BUG-12").status_code == 404
    assert client.get("/api/search", SEARCH).json()["total"] == 0


def test_carol_may_not_add_a_product_whatever_its_key(carol):
    for key in ("PRD-2", "PRD-3"):  # one hidden, one free: the same answer
        response = api(carol).post("/api/products", {"key": key, "name": "Mine"}, format="json")

        assert response.status_code == 403
        assert "Only someone who sees every product" in response.json()["error"]["message"]
    assert not Product.objects.filter(key="PRD-3").exists()


def test_carol_imports_into_tramline_but_adds_no_product(carol):
    carol.user_permissions.add(
        *Permission.objects.filter(codename__regex=r"^(add|change)_(product|feature|qatest|bug)$")
    )
    bug = {"kind": "bug", "key": "BUG-40", "product": "PRD-1", "title": "Renewal receipt is blank"}
    product = {"kind": "product", "key": "PRD-3", "name": "Mine"}

    accepted = import_records(jsonl(bug).splitlines(), user=carol)
    refused = import_records(jsonl(product).splitlines(), user=carol)

    assert accepted.written and accepted.created["bug"] == 1
    assert not refused.written
    assert [problem.message for problem in refused.problems] == [access.ADDS_PRODUCTS]
    assert not Product.objects.filter(key="PRD-3").exists()


def test_the_admin_lets_only_who_sees_every_product_add_products_or_grant_teams(client, carol, alice):
    carol.user_permissions.add(*Permission.objects.filter(codename__in=["change_product", "view_product"]))
    client.force_login(carol)

    assert client.get("/admin/backlog/product/add/").status_code == 403
    page = client.get(f"/admin/backlog/product/{Product.objects.get(key='PRD-1').pk}/change/").content.decode()
    assert 'name="teams"' not in page and "Tramline team" in page  # shown, not editable
    alice.is_superuser = True
    alice.save()
    client.force_login(alice)
    assert (
        'name="teams"'
        in client.get(f"/admin/backlog/product/{Product.objects.get(key='PRD-1').pk}/change/").content.decode()
    )


def test_existing_accounts_keep_every_product_when_teams_arrive(db):
    old = User.objects.create_user("old-timer")
    gone = User.objects.create_user("gone", is_active=False)
    keep_what_users_saw = import_module("backlog.migrations.0002_product_teams").keep_what_users_saw

    keep_what_users_saw(django_apps, None)

    assert access.visible_product_ids(User.objects.get(pk=old.pk)) is None
    assert access.visible_product_ids(User.objects.get(pk=gone.pk)) == []


def test_keys_that_differ_only_in_case_stop_the_migration_with_their_list(tramline):
    Bug.objects.create(key="prd-1", product=Product.objects.get(key="PRD-1"), title="A bug keyed like a product")
    refuse = import_module("backlog.migrations.0003_keys_ignore_case").refuse_clashing_keys

    with pytest.raises(CommandError) as refused:
        refuse(django_apps, SimpleNamespace(connection=connection))

    assert "1 key(s) are held by more than one record when case is ignored: product PRD-1, bug prd-1." in str(
        refused.value
    )
    assert "rename one record of each group" in str(refused.value)
