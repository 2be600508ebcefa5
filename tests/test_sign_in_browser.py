"""Signing in through the identity provider in Chromium: the button, the provider,
and back to the search page, where Nina's groups decide what she finds."""

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from backlog.models import Product
from search import service
from tests.upstream.oidc import FakeOIDC

from .test_ui_browser import browser, corpus, new_page, screenshot  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def idp(settings, live_server):
    fake = FakeOIDC().start()
    fake.redirect_uris.add(f"{live_server.url}/accounts/oidc/callback")
    settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID = fake.issuer, fake.client_id
    settings.OIDC_CLIENT_SECRET, settings.OIDC_PROVIDER_NAME = fake.client_secret, "Okta"
    settings.OIDC_TEAMS = {"qa-mobile": "Mobile"}
    yield fake
    fake.stop()


def test_a_person_signs_in_with_the_provider_and_finds_only_their_teams_products(browser, live_server, corpus, idp):  # noqa: F811
    Product.objects.get(key="PRD-1").teams.add(Group.objects.create(name="Mobile"))
    everyone = {hit["key"] for hit in service.call("search", {"query": "renewal export", "mode": "keyword"})["results"]}
    assert {"BUG-20", "BUG-50"} <= everyone  # someone who sees every product finds both
    page = new_page(browser, live_server)
    try:
        page.goto("/search/?query=renewal+export&mode=keyword")
        expect(page).to_have_url(
            f"{live_server.url}/accounts/login/?next=/search/%3Fquery%3Drenewal%2Bexport%26mode%3Dkeyword"
        )
        page.click("#sso")  # to the provider and back, its code exchanged and its token checked
        expect(page).to_have_url(f"{live_server.url}/search/?query=renewal+export&mode=keyword")
        keys = page.locator("li.result").evaluate_all("items => items.map(i => i.dataset.key)")
        screenshot(page, "sign-in-sso-results")
        assert "BUG-20" in keys and not {"BUG-50", "BUG-66"} & set(keys), keys  # PRD-2's are another team's
        expect(page.locator(".user")).to_contain_text("nina")
        assert page.csp_violations == [], page.csp_violations
        assert {r.split("/")[2] for r in page.foreign_requests} == {idp.url.split("/")[2]}  # the provider only
    finally:
        page.context.close()
