"""The staff UI's layout in Chromium, at a desktop's and a phone's width:
what fits on one line and what comes first on a small screen (the fixtures
of test_ui_browser.py; screenshots go to artifacts/screenshots/).

Alice (staff) reads the dashboard on a 1280-pixel screen.
"""

import pytest
from playwright.sync_api import expect

from backlog.services import import_records

from .conftest import jsonl
from .test_ui_browser import alice, browser, corpus, log_in, page, screenshot  # noqa: F401

pytestmark = pytest.mark.slow

# Titles as long as the demo data's: they take the width a table gives out.
LONG_TITLES = [
    "Intermittent failure to view live departures for a favourite stop when a sync runs in parallel",
    "Charged twice when trying to renew a season pass on a slow 3G connection after the session expired",
]


@pytest.fixture
def long_titles(corpus):  # noqa: F811
    bugs = [
        {"kind": "bug", "key": f"BUG-{90 + n}", "product": "PRD-1", "title": title, "severity": "high",
         "status": "open", "created_at": f"2026-11-1{n}T08:00:00+00:00"}  # the newest: first on the dashboard
        for n, title in enumerate(LONG_TITLES)
    ]  # fmt: skip
    assert import_records(jsonl(*bugs).splitlines()).written


def test_the_dashboards_created_dates_keep_to_one_line(page, alice, long_titles, live_server):  # noqa: F811
    log_in(page, alice, live_server)
    page.goto("/dashboard/")

    dates = page.locator(".recent tbody td time")
    expect(dates.first).to_be_visible()
    assert dates.count() >= 2
    for date in dates.all():
        # An inline element has one client rectangle per line it is laid out on.
        lines, height, line = date.evaluate(
            "el => [el.getClientRects().length, el.getBoundingClientRect().height,"
            " parseFloat(getComputedStyle(el).lineHeight)]"
        )
        assert lines == 1 and height < 1.5 * line, (date.text_content(), lines, height, line)
    screenshot(page, "dashboard-recent", full_page=True)
