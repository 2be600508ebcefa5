"""The staff UI's layout in Chromium, at a desktop's and a phone's width:
what fits on one line and what comes first on a small screen (the fixtures
of test_ui_browser.py; screenshots go to artifacts/screenshots/).

Alice (staff) reads the dashboard on a 1280-pixel screen and searches
from her phone, a 390 by 844 viewport, with and without JavaScript.
"""

import pytest
from playwright.sync_api import expect

from backlog.imports import import_records

from .conftest import jsonl
from .test_ui_browser import alice, browser, close, corpus, log_in, new_page, page, screenshot  # noqa: F401

pytestmark = pytest.mark.slow

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}

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


@pytest.mark.parametrize("javascript", [True, False], ids=["script", "no-script"])
def test_on_a_phone_the_filters_wait_behind_a_button_and_the_first_result_is_near_the_top(
    browser,  # noqa: F811
    live_server,
    alice,  # noqa: F811
    corpus,  # noqa: F811
    javascript,
):
    page = new_page(browser, live_server, java_script_enabled=javascript, **PHONE)  # noqa: F811
    try:
        log_in(page, alice, live_server)
        page.goto("/search/?query=renewal")
        first = page.locator(".result").first
        expect(first).to_be_visible()

        screenshot(page, f"search-phone-{'script' if javascript else 'no-script'}", full_page=False)
        assert first.bounding_box()["y"] < 300, first.bounding_box()
        expect(page.locator(".facets")).to_be_hidden()

        page.get_by_text("Filters", exact=True).click()

        expect(page.locator(".facets")).to_be_visible()
        low = page.get_by_role("checkbox", name="low", exact=False).first
        expect(low).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing scrolls sideways
        screenshot(page, f"search-phone-filters-{'script' if javascript else 'no-script'}", full_page=False)
    finally:
        close(page)


def test_on_a_desktop_the_filters_are_shown_without_a_click(page, alice, corpus, live_server):  # noqa: F811
    log_in(page, alice, live_server)
    page.goto("/search/?query=season+pass+renewal")

    expect(page.locator(".result").first).to_be_visible()
    expect(page.locator(".facets")).to_be_visible()
    expect(page.get_by_role("checkbox").first).to_be_visible()
    expect(page.get_by_text("Filters", exact=True)).to_be_hidden()  # nothing to open
