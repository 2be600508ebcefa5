"""The triage page in Chromium: Dana drops last night's Surefire report, reads the
causes with their verdicts, confirms the suggested bug of one in a click, and
the page says so."""

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from backlog.imports import import_records

from .conftest import jsonl, seeing_all_products
from .test_triage import FIXTURES, TRIAGE_STORY
from .test_ui_browser import PASSWORD, browser, close, log_in, new_page, screenshot  # noqa: F401

pytestmark = pytest.mark.slow


def test_dana_uploads_a_report_reads_each_cause_and_confirms_one(browser, live_server, transactional_db):  # noqa: F811
    assert not import_records(jsonl(*TRIAGE_STORY).splitlines()).problems
    dana = seeing_all_products(User.objects.create_user("dana", password=PASSWORD, is_staff=True))
    page = new_page(browser, live_server)
    log_in(page, dana, live_server)
    page.goto("/triage/")
    page.select_option("#triage-product", "PRD-1")
    page.set_input_files("#triage-file", str(FIXTURES / "surefire.xml"))
    page.click("#triage-form button[type=submit]")

    npe = page.locator("li.triage-group", has_text="renewsAnExpiredPassWithASavedCard")
    expect(npe).to_have_attribute("data-verdict", "known")
    expect(npe.locator("li.suggestion").first).to_have_attribute("data-key", "BUG-101")
    expect(page.locator("li.triage-group[data-verdict=new]").first).to_be_visible()
    screenshot(page, "triage-run")

    npe.locator("li.suggestion").first.get_by_role("button", name="Confirm BUG-101 as this cause").click()
    npe = page.locator("li.triage-group", has_text="renewsAnExpiredPassWithASavedCard")
    expect(npe).to_contain_text("confirmed")
    close(page)
