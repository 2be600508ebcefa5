"""The dashboard's Sources card in Chromium: where the records come from and how
their syncs went, at a glance. Alice's team syncs its Jira every 30 minutes
and its GitHub repository by hand; the last Jira sync failed."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from connectors.models import RunStatus, Source, SyncRun

from .test_ui_browser import alice, browser, close, corpus, docs_screenshot, log_in, new_page, page, screenshot  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def sources(transactional_db):
    now = timezone.now()
    jira = Source.objects.create(
        name="Tramline Jira",
        kind="jira",
        url="https://tramline.atlassian.net",
        project="TRAM",
        product_key="PRD-1",
        token_env="JIRA_API_TOKEN",
        user_env="JIRA_EMAIL",
        schedule_minutes=30,
    )
    SyncRun.objects.create(
        source=jira,
        started_at=now - timedelta(minutes=62),
        finished_at=now - timedelta(minutes=61),
        status=RunStatus.OK,
        fetched=1204,
        created=1180,
        updated=24,
        requests=16,
    )
    SyncRun.objects.create(
        source=jira,
        started_at=now - timedelta(minutes=31),
        finished_at=now - timedelta(minutes=30),
        status=RunStatus.FAILED,
        fetched=100,
        updated=3,
        errors=[
            "tramline.atlassian.net: rate limit reached (6 tries); sync again later; "
            "the pages written before are kept, and the next sync resumes after them"
        ],
    )
    github = Source.objects.create(
        name="github:tramline/android",
        kind="github",
        url="https://api.github.com",
        project="tramline/android",
        product_key="PRD-1",
        token_env="GITHUB_TOKEN",
        schedule_minutes=0,
    )
    SyncRun.objects.create(
        source=github,
        started_at=now - timedelta(hours=3),
        finished_at=now - timedelta(hours=3) + timedelta(seconds=8.4),
        status=RunStatus.OK,
        fetched=312,
        created=2,
        updated=5,
        deleted=1,
        unchanged=304,
        requests=5,
    )


def test_the_dashboard_shows_each_source_and_its_last_sync(page, alice, corpus, sources, live_server):  # noqa: F811
    log_in(page, alice, live_server)
    page.goto("/dashboard/")

    card = page.locator("#sources")
    expect(card.get_by_role("heading", name="Sources")).to_be_visible()
    expect(card.locator("tbody tr")).to_have_count(2)
    github = card.locator('tr[data-source="github:tramline/android"]')
    expect(github).to_contain_text("GitHub Issues → PRD-1, by hand")
    expect(github.locator("td").nth(0)).to_contain_text("ok")
    expect(github.locator("td").nth(1)).to_have_text("2, 5, 1")
    jira = card.locator('tr[data-source="Tramline Jira"]')
    expect(jira).to_contain_text("Jira → PRD-1, every 30 min")
    expect(jira.locator("td").nth(0)).to_contain_text("failed")
    expect(jira.locator("td").nth(3)).to_contain_text("rate limit reached (6 tries)")  # after the Webhooks column
    card.scroll_into_view_if_needed()
    docs_screenshot(page, "dashboard-sources", element=card)
