"""Checking for duplicates while a bug is written, in Chromium: the staff UI's
report form and the admin's add-bug form, typed into by keyboard, under the
site's Content-Security-Policy (the fixtures of test_ui_browser.py)."""

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from backlog.imports import import_records
from backlog.models import Bug

from .conftest import jsonl
from .test_ui_browser import alice, browser, close, corpus, docs_screenshot, log_in, new_page, page, screenshot  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.fixture
def reporter(page, alice, corpus, live_server):  # noqa: F811
    alice.user_permissions.add(Permission.objects.get(codename="add_bug"))
    log_in(page, alice, live_server)
    return page


def panel_keys(tab) -> list[str]:
    return tab.locator("#duplicates-panel .duplicate").evaluate_all("items => items.map(item => item.dataset.key)")


def test_the_report_form_lists_likely_duplicates_as_the_title_is_typed_and_links_by_keyboard(reporter):
    page = reporter  # noqa: F811
    page.goto("/search/")
    page.get_by_role("link", name="Report a bug").click()
    expect(page.get_by_role("heading", name="Report a bug")).to_be_visible()
    expect(page.get_by_role("button", name="Check for duplicates")).to_be_hidden()  # the script checks as you type
    page.locator("#id_product").select_option("PRD-1")
    page.locator("#id_title").press_sequentially("Renew button does not respond on Android", delay=15)

    expect(page.locator("#duplicates-panel .duplicate").first).to_be_visible()
    assert set(panel_keys(page)[:2]) == {"BUG-12", "BUG-20"}
    expect(page.locator("#duplicates-status")).to_have_text("5 possible duplicates")
    page.locator("#id_steps").fill("Open Passes\nTap Renew")
    page.locator("#id_actual_result").fill("Nothing happens, no spinner")
    page.wait_for_timeout(900)  # the panel follows the text too
    docs_screenshot(page, "report-bug", full_page=False)

    # Keyboard only: from the last field, Tab reaches the first candidate's "Duplicate of" button.
    page.locator("#id_environment").focus()
    first = page.locator("#duplicates-panel .link-duplicate").first
    original = first.get_attribute("value")
    for _ in range(12):
        page.keyboard.press("Tab")
        if first.evaluate("button => button === document.activeElement"):
            break
    expect(first).to_be_focused()
    page.keyboard.press("Enter")

    expect(page).to_have_url(f"{page.url.split('/bugs/')[0]}/records/{original}/")
    filed = Bug.objects.order_by("-id").first()
    assert (filed.status, filed.duplicate_of.key) == ("duplicate", original)
    expect(page.get_by_text(f"Filed {filed.key} as a duplicate of {original}.")).to_be_visible()


def feature_options(tab) -> list[str]:
    return tab.locator("#id_feature option").evaluate_all("options => options.map(option => option.value)")


def test_the_feature_list_follows_the_product_as_it_is_chosen(reporter):
    page = reporter  # noqa: F811
    reminders = {"kind": "feature", "key": "FEAT-10", "product": "PRD-2", "name": "Reminders"}
    assert import_records(jsonl(reminders).splitlines()).written
    page.goto("/bugs/new/")

    # Nothing chosen: every product's features, under the product's name.
    assert page.locator("#id_feature optgroup").evaluate_all("groups => groups.map(g => g.label)") == [
        "PRD-2 Ledgerly",
        "PRD-1 Tramline Mobile",
    ]
    page.locator("#id_product").select_option("PRD-2")
    assert feature_options(page) == ["", "FEAT-9", "FEAT-10"]
    page.locator("#id_feature").select_option("FEAT-10")

    page.locator("#id_product").select_option("PRD-1")

    assert feature_options(page) == ["", "FEAT-7"]
    expect(page.locator("#id_feature")).to_have_value("")  # Ledgerly's feature is no longer chosen
    page.locator("#id_feature").select_option("FEAT-7")
    page.locator("#id_product").select_option("")
    expect(page.locator("#id_feature")).to_have_value("FEAT-7")  # still offered, under its product
    assert len(feature_options(page)) == 4


def test_the_admins_add_bug_form_lists_duplicates_under_the_title_and_fills_the_link(page, alice, corpus, live_server):  # noqa: F811
    alice.is_superuser = True
    alice.save()
    log_in(page, alice, live_server)
    page.goto("/admin/backlog/bug/add/")

    page.locator("#id_title").press_sequentially("PDF export loses the last invoice line", delay=15)

    panel = page.locator("#duplicates-check")
    expect(panel.locator("li").first).to_be_visible()
    assert panel.locator("li").first.get_attribute("data-key") == "BUG-50"
    # Just under the title's fieldset, not at the bottom of the form.
    assert panel.bounding_box()["y"] < page.locator("#id_description").bounding_box()["y"]
    screenshot(page, "admin-add-bug", full_page=False)
    panel.get_by_role("button", name="Duplicate of BUG-50").click()

    expect(page.locator("#id_status")).to_have_value("duplicate")
    expect(page.locator("#id_duplicate_of")).to_have_value(str(Bug.objects.get(key="BUG-50").pk))
    expect(page.locator("#duplicates-check-status")).to_contain_text("save to file it linked")
