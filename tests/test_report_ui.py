"""The staff UI's "Report a bug" page without a browser: the duplicates panel
(a fragment and the no-script check), filing, linking as a duplicate, and
who may do it. tests/test_ui_browser.py types into it in Chromium."""

import re

import pytest
from django.contrib.auth.models import Permission, User

from backlog.imports import import_records
from backlog.models import Bug
from search import service

from .conftest import jsonl, seeing_all_products
from .test_ui import load_corpus

DRAFT = {
    "product": "PRD-1",
    "title": "Renew button does not respond on Android",
    "steps": "Open Passes\nTap Renew",
    "actual_result": "Nothing happens",
}


@pytest.fixture
def reporter(db):
    load_corpus()
    user = seeing_all_products(User.objects.create_user("rita", is_staff=True))
    user.user_permissions.add(Permission.objects.get(codename="add_bug"))
    return user


@pytest.fixture
def as_reporter(client, reporter):
    client.force_login(reporter)
    return client


def panel_keys(html: str) -> list[str]:
    return re.findall(r'<li class="duplicate band-\w+" data-key="([^"]+)"', html)


def offered_features(html: str) -> list[tuple[str, str]]:
    """(the group's label, or "" outside a group; the feature's key) of each feature offered."""
    select = re.search(r'<select name="feature".*?</select>', html, re.S)[0]
    offered, group = [], ""
    for tag, value in re.findall(r'<(optgroup label|/optgroup|option value)="?([^">]*)', select):
        group = value if tag == "optgroup label" else "" if tag == "/optgroup" else group
        if tag == "option value" and value:
            offered.append((group, value))
    return offered


def test_the_panel_lists_what_check_duplicates_answers_and_writes_nothing(as_reporter, reporter):
    bugs = Bug.objects.count()

    fragment = as_reporter.post("/bugs/new/", DRAFT, HTTP_X_UI_FRAGMENT="duplicates")
    page = as_reporter.post("/bugs/new/", {**DRAFT, "action": "check"})

    draft = {name: DRAFT[name] for name in ("title", "steps", "actual_result", "product")}
    expected = [hit["key"] for hit in service.call("check_duplicates", {**draft, "limit": 5}, reporter)["results"]]
    assert fragment.status_code == page.status_code == 200
    assert panel_keys(fragment.content.decode()) == expected
    assert set(expected[:2]) == {"BUG-12", "BUG-20"}
    assert "<html" not in fragment.content.decode()  # just the panel
    assert panel_keys(page.content.decode()) == expected
    assert 'value="BUG-12"' in page.content.decode()  # its "Duplicate of BUG-12" button
    assert Bug.objects.count() == bugs


def test_without_a_title_the_panel_waits(as_reporter):
    response = as_reporter.post("/bugs/new/", {"product": "PRD-1", "title": "x"}, HTTP_X_UI_FRAGMENT="duplicates")

    assert "Type a title" in response.content.decode() and panel_keys(response.content.decode()) == []


def test_filing_makes_the_next_bug_with_its_text_in_raw_data(as_reporter):
    response = as_reporter.post("/bugs/new/", {**DRAFT, "severity": "high", "action": "file"})

    bug = Bug.objects.order_by("-id").first()
    assert bug.key == "BUG-67"  # the corpus's highest bug number is BUG-66
    assert response.status_code == 302 and response["Location"] == "/records/BUG-67/"
    assert (bug.title, bug.status, bug.severity, bug.product.key) == (DRAFT["title"], "open", "high", "PRD-1")
    assert bug.raw_data["steps"] == ["Open Passes", "Tap Renew"] and bug.steps == "Open Passes\nTap Renew"
    assert bug.actual_result == "Nothing happens" and bug.raw_data["reported_by"] == "rita"
    assert "Filed BUG-67." in as_reporter.get(response["Location"]).content.decode()


def test_an_invalid_report_keeps_what_was_typed_and_says_what_to_fix(as_reporter):
    bugs = Bug.objects.count()

    response = as_reporter.post("/bugs/new/", {**DRAFT, "feature": "FEAT-9", "action": "file"})

    html = response.content.decode()
    assert response.status_code == 400
    assert "FEAT-9 belongs to PRD-2, not PRD-1." in html
    assert "Renew button does not respond on Android" in html
    assert Bug.objects.count() == bugs


def test_the_feature_list_follows_the_chosen_product(as_reporter):
    # Ledgerly has two features; Tramline one.
    reminders = {"kind": "feature", "key": "FEAT-10", "product": "PRD-2", "name": "Reminders"}
    assert import_records(jsonl(reminders).splitlines()).written

    unchosen = as_reporter.get("/bugs/new/").content.decode()
    tramline = as_reporter.post("/bugs/new/", {**DRAFT, "action": "check"}).content.decode()
    ledgerly = as_reporter.post("/bugs/new/", {**DRAFT, "product": "PRD-2", "action": "check"}).content.decode()

    # Before a product is chosen, each product's features under its name; then its own only.
    assert offered_features(unchosen) == [
        ("PRD-2 Ledgerly", "FEAT-9"),
        ("PRD-2 Ledgerly", "FEAT-10"),
        ("PRD-1 Tramline Mobile", "FEAT-7"),
    ]
    assert offered_features(tramline) == [("", "FEAT-7")]
    assert offered_features(ledgerly) == [("", "FEAT-9"), ("", "FEAT-10")]
    assert '<script id="report-features" type="application/json">' in unchosen  # report.js's copy of them all


def test_check_duplicates_names_the_parameter_it_was_sent(reporter):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(reporter)

    response = api.post("/api/bugs/check-duplicates", {"title": "Renew fails", "product": "PRD-404"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith('product: "PRD-404" is not the key or name of a product')


def test_only_staff_who_may_add_bugs_report_them(client, db):
    load_corpus(embed=False)
    viewer = seeing_all_products(User.objects.create_user("vic", is_staff=True))
    client.force_login(viewer)

    assert client.get("/bugs/new/").status_code == 403
    assert "Report a bug" not in client.get("/search/").content.decode()
    client.logout()
    assert client.get("/bugs/new/")["Location"].startswith("/accounts/login/")


def test_the_product_choices_are_the_products_one_may_see(client, db):
    from django.contrib.auth.models import Group

    from backlog.models import Product

    load_corpus(embed=False)
    carol = User.objects.create_user("carol", is_staff=True)
    carol.user_permissions.add(Permission.objects.get(codename="add_bug"))
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    carol.groups.add(team)
    client.force_login(carol)

    html = client.get("/bugs/new/").content.decode()
    refused = client.post("/bugs/new/", {**DRAFT, "product": "PRD-2", "action": "file"})

    assert 'value="PRD-1"' in html and 'value="PRD-2"' not in html and "FEAT-9" not in html
    assert refused.status_code == 400 and not Bug.objects.filter(product__key="PRD-2", title=DRAFT["title"]).exists()


def test_duplicate_of_files_the_report_closed_and_linked_and_opens_the_original(as_reporter):
    response = as_reporter.post("/bugs/new/", {**DRAFT, "duplicate_of": "BUG-12"})

    bug = Bug.objects.order_by("-id").first()
    assert response.status_code == 302 and response["Location"] == "/records/BUG-12/"
    assert (bug.key, bug.status, bug.duplicate_of.key) == ("BUG-67", "duplicate", "BUG-12")
    page = as_reporter.get(response["Location"]).content.decode()
    assert "Filed BUG-67 as a duplicate of BUG-12." in page and "/records/BUG-67/" in page


def test_a_duplicate_of_another_products_bug_is_refused(as_reporter):
    bugs = Bug.objects.count()

    response = as_reporter.post("/bugs/new/", {**DRAFT, "duplicate_of": "BUG-50"})

    assert response.status_code == 400
    assert "BUG-50 is a bug of PRD-2: choose that product" in response.content.decode()
    assert Bug.objects.count() == bugs
