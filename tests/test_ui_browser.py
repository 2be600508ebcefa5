"""The staff UI in a real browser: Debian's Chromium, headless, driven by
Playwright against pytest-django's live server (which serves the static
files too).

Alice (staff) logs in, types, filters, pages, opens records and moves by
keyboard; Bob (not staff) and a visitor are refused; Mallory's bug, whose
title is an <img onerror> tag, stays text. Screenshots go to
artifacts/screenshots/ (docs/screenshots/ keeps copies of three of them).

Every page runs under the site's Content-Security-Policy, and a test fails
if Chromium reports a violation; only the axe-core test, which injects its
tool as an inline script, opens its page with the policy bypassed.

Playwright's sync API keeps an event loop running in this thread, which
makes Django refuse database calls here (SynchronousOnlyOperation), so the
browser fixture sets DJANGO_ALLOW_ASYNC_UNSAFE while it runs: the test's
own database calls are ordinary synchronous ones.
"""

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.http import QueryDict
from django.test import Client
from playwright.sync_api import expect, sync_playwright

from backlog.models import Bug
from search import service

from .conftest import seeing_all_products
from .test_ui import XSS_TITLE, load_corpus

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = Path(settings.BASE_DIR) / "artifacts" / "screenshots"
AXE_VERSION = "4.14.1"
AXE_DIR = Path(settings.BASE_DIR) / ".local" / f"axe-core-{AXE_VERSION}"
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        # A Debian package; where it cannot be had (no apt, no root or sudo), the browser tests say so and skip.
        pytest.skip(f"{CHROMIUM} is not installed (Debian's chromium; `make system-packages` installs it where it can)")
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


# Playwright's init scripts run outside the page's Content-Security-Policy,
# so this listener hears every violation, reported or not in the console.
REPORT_CSP_VIOLATIONS = """document.addEventListener("securitypolicyviolation", event =>
  window.reportCspViolation(`${event.effectiveDirective} refused ${event.blockedURI || "inline"} at `
    + `${event.sourceFile || event.documentURI}:${event.lineNumber}`));"""


def new_page(browser, live_server, **options):
    """A fresh browser context; alert() dialogs, requests to other hosts and
    Content-Security-Policy violations (the event, and Chromium's console
    message naming the "Content Security Policy") are recorded."""
    options = {"viewport": {"width": 1280, "height": 900}, **options}
    context = browser.new_context(base_url=live_server.url, **options)
    page = context.new_page()
    page.dialogs, page.foreign_requests, page.csp_violations = [], [], []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    own = urlsplit(live_server.url).netloc
    page.on("request", lambda r: urlsplit(r.url).netloc in ("", own) or page.foreign_requests.append(r.url))
    page.on("console", lambda m: "Content Security Policy" in m.text and page.csp_violations.append(m.text))
    context.expose_function("reportCspViolation", lambda violation: page.csp_violations.append(violation))
    context.add_init_script(REPORT_CSP_VIOLATIONS)
    return page


def close(page):
    page.context.close()
    assert page.dialogs == [], "a dialog opened: record text ran as script"
    assert page.foreign_requests == [], "the UI loaded something from another host"
    assert page.csp_violations == [], "the Content-Security-Policy refused something the page needs"


@pytest.fixture
def page(browser, live_server):
    page = new_page(browser, live_server)
    yield page
    close(page)


@pytest.fixture
def corpus(transactional_db):
    load_corpus()


@pytest.fixture
def alice(transactional_db):
    return seeing_all_products(User.objects.create_user("alice", password=PASSWORD, is_staff=True))


@pytest.fixture
def bob(transactional_db):
    return seeing_all_products(User.objects.create_user("bob", password=PASSWORD))


def log_in(page, user, live_server):
    """Give the browser a session, as the login form would (that form has its own test)."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])


@pytest.fixture
def as_alice(page, alice, corpus, live_server):
    log_in(page, alice, live_server)
    return page


def shown_keys(page) -> list[str]:
    return page.locator(".result").evaluate_all("items => items.map(item => item.dataset.key)")


def contract(page, **extra) -> dict:
    """What service.call answers for the page's own URL: what REST and MCP answer for it."""
    params = QueryDict(urlsplit(page.url).query, mutable=True)
    params.setdefault("detail", "full")
    for name, value in extra.items():
        params[name] = value
    return service.call("search", params)


def screenshot(page, name: str, full_page: bool = True):
    page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=full_page)


DOCS_SCREENSHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"
# The headings a screenshot shows: visible, and inside the viewport (or the element) it was taken of.
SHOWN_HEADINGS = """([element, wholePage]) => {
  const frame = element ? element.getBoundingClientRect() : {top: 0, bottom: innerHeight, left: 0, right: innerWidth};
  return Array.from((element || document).querySelectorAll("h1, h2, h3, h4")).filter(heading => {
    const box = heading.getBoundingClientRect();
    if (!box.width || !box.height || getComputedStyle(heading).visibility === "hidden") return false;
    const inside = box.left < frame.right && box.right > frame.left;
    return inside && (wholePage && !element || (box.top < frame.bottom && box.bottom > frame.top));
  }).map(heading => heading.innerText.replace(/\\s+/g, " ").trim()).filter(text => text);
}"""


def docs_screenshot(page, name: str, full_page: bool = True, element=None):
    """A screenshot docs/ shows, and the sections it shows (its headings, numbers aside: counts
    and keys come and go with the data, a section with its page) beside it, in
    docs/screenshots/<name>.sections. `make screenshots` (UPDATE_DOCS_SCREENSHOTS) takes both
    anew; any other run fails when the page's sections are no longer the screenshot's, so a
    page that changed cannot leave docs/ showing the page it was."""
    path = SCREENSHOTS / f"{name}.png"
    (element or page).screenshot(path=path, **({} if element else {"full_page": full_page}))
    handle = element.element_handle() if element else None
    shown = [re.sub(r"\d+", "#", heading) for heading in page.evaluate(SHOWN_HEADINGS, [handle, full_page])]
    recorded = DOCS_SCREENSHOTS / f"{name}.sections"
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):  # `make screenshots`; a plain run leaves the checkout clean
        shutil.copy(path, DOCS_SCREENSHOTS / f"{name}.png")
        recorded.write_text("".join(f"{heading}\n" for heading in shown), encoding="utf-8")
        return
    assert recorded.is_file(), f"{recorded} is missing: run `make screenshots`"
    assert shown == recorded.read_text(encoding="utf-8").splitlines(), (
        f"the page's sections are no longer those docs/screenshots/{name}.png shows: run `make screenshots`"
    )


# -- search ---------------------------------------------------------------------------------------


def test_alice_logs_in_types_and_sees_ranked_results(page, alice, corpus):
    page.goto("/search/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/search/$"))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/search/$"))

    page.get_by_label("Search QA knowledge").press_sequentially("season pass renewal", delay=15)

    # No Enter: the results arrive as she types, and the URL follows, ready to share.
    expect(page).to_have_url(re.compile(r"/search/\?query=season\+pass\+renewal$"))
    expected = [hit["key"] for hit in contract(page)["results"]]
    expect(page.locator(".result")).to_have_count(len(expected))
    assert shown_keys(page) == expected
    assert expected[0] == "FEAT-7"  # the exact title first
    expect(page.locator(".result mark").first).to_be_visible()
    expect(page.get_by_role("status")).to_have_text(re.compile(r"^\d+ results?$"))
    docs_screenshot(page, "search", full_page=False)


def test_a_corrected_query_offers_the_words_as_typed_and_a_new_query_is_corrected_again(as_alice):
    page = as_alice
    page.goto("/search/?query=renwal&mode=keyword")
    note = page.locator("#corrected")
    expect(note).to_have_text(re.compile(r"^Showing results for renew\w*\. Search instead for renwal\.$"))
    corrected = shown_keys(page)
    assert corrected and corrected == [hit["key"] for hit in contract(page)["results"]]

    note.get_by_role("link", name="renwal").click()

    expect(page).to_have_url(re.compile(r"query=renwal&mode=keyword&correct=false$"))
    expect(page.locator("#corrected")).to_have_count(0)
    expect(page.locator(".result")).to_have_count(0)  # no record says "renwal"
    assert contract(page)["total"] == 0

    page.get_by_label("Search QA knowledge").fill("seasn")  # a new query: corrected as ever

    expect(page.locator("#corrected")).to_contain_text("Search instead for seasn")
    assert "correct=false" not in page.url


def test_a_facet_filters_and_the_cursor_pages(as_alice):
    page = as_alice
    page.goto("/search/?limit=5")  # limit has no control; the form carries it
    page.get_by_label("Search QA knowledge").fill("renewal")
    expect(page).to_have_url(re.compile(r"query=renewal&limit=5$"))

    page.get_by_role("checkbox", name=re.compile(r"^low \d+$")).check()

    expect(page).to_have_url(re.compile(r"query=renewal&limit=5&severity=low$"))
    response = contract(page)
    total = response["total"]
    assert 5 < total <= 10 and response["next_cursor"]
    expect(page.locator(".result")).to_have_count(5)
    assert shown_keys(page) == [hit["key"] for hit in response["results"]]
    expect(page.locator(".result .severity-low")).to_have_count(5)
    expect(page.get_by_role("checkbox", name=f"low {total}")).to_be_checked()
    expect(page.get_by_role("checkbox", name=f"bug {total}")).not_to_be_checked()  # other facets count what is shown
    screenshot(page, "facet")

    page.get_by_role("link", name="Next page").click()

    expect(page).to_have_url(re.compile(r"&cursor="))
    expect(page.locator(".result")).to_have_count(total - 5)
    assert shown_keys(page) == [hit["key"] for hit in contract(page)["results"]]
    assert page.locator(".result-list").get_attribute("start") == "6"
    page.get_by_role("link", name="First page").click()
    expect(page.locator(".result")).to_have_count(5)


def test_fields_typed_in_the_query_are_chips_the_keyboard_removes(as_alice):
    page = as_alice
    page.goto("/search/?mode=keyword")
    page.get_by_label("Search QA knowledge").fill("receipt status:fixed severity:medium,low")

    chip = page.get_by_role("link", name="Remove filter status:fixed")
    expect(chip).to_be_visible()
    expect(page.get_by_role("link", name="Remove filter severity:medium,low")).to_be_visible()
    expected = contract(page)
    assert [f["token"] for f in expected["filters"]] == ["status:fixed", "severity:medium,low"]
    assert shown_keys(page) == [hit["key"] for hit in expected["results"]]
    expect(page.locator(".result .status-fixed")).to_have_count(len(expected["results"]))
    docs_screenshot(page, "search-chips", full_page=False)

    # From the search box, Tab reaches the chip; Enter takes its field out of the query and searches again.
    page.get_by_label("Search QA knowledge").focus()
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "Remove filter status:fixed":
            break
    page.keyboard.press("Enter")

    expect(page.get_by_label("Search QA knowledge")).to_have_value("receipt severity:medium,low")
    expect(page.get_by_label("Search QA knowledge")).to_be_focused()
    expect(page).to_have_url(re.compile(r"query=receipt\+severity%3Amedium%2Clow&mode=keyword$"))
    expect(page.get_by_role("link", name="Remove filter status:fixed")).to_have_count(0)
    expect(page.locator(".result .status-open")).not_to_have_count(0)
    assert shown_keys(page) == [hit["key"] for hit in contract(page)["results"]]

    # A field that cannot be is explained where the results were.
    page.get_by_label("Search QA knowledge").fill("receipt severity:urgent")
    expect(page.get_by_role("alert")).to_contain_text('query: severity:urgent: "urgent" is not one of')


def test_without_javascript_the_server_renders_the_results(browser, live_server, alice, corpus):
    page = new_page(browser, live_server, java_script_enabled=False)
    log_in(page, alice, live_server)
    page.goto("/search/")
    page.get_by_label("Search QA knowledge").fill("renewal")
    page.get_by_role("button", name="Search", exact=True).click()

    expect(page).to_have_url(re.compile(r"query=renewal&sort=relevant&mode=hybrid$"))
    assert shown_keys(page) == [hit["key"] for hit in contract(page)["results"]]

    page.get_by_role("checkbox", name=re.compile(r"^test \d+$")).check()
    page.get_by_role("button", name="Apply filters").click()

    expect(page).to_have_url(re.compile(r"entities=test"))
    assert shown_keys(page) == ["TEST-3"]
    screenshot(page, "no-javascript")
    page.context.close()


# -- records --------------------------------------------------------------------------------------


def test_alice_opens_a_bug_and_sees_its_likely_duplicates(as_alice):
    page = as_alice
    page.goto("/search/?query=renewal+button+android")
    page.get_by_role("link", name="Renewal button does nothing on Android 14").click()

    expect(page).to_have_url(re.compile(r"/records/BUG-12/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("BUG-12 Renewal button does nothing on Android 14")
    expect(page.locator("#duplicates li").first).to_contain_text("BUG-20 Renewal button unresponsive on Android 14")
    expect(page.locator(".raw-data")).to_contain_text('"reporter": "dana"')
    expect(page.locator(".details")).to_contain_text("TEST-3 Renew an expired pass with a saved card")
    docs_screenshot(page, "record-bug")

    page.locator(".details").get_by_role("link", name="FEAT-7 Season pass renewal").click()

    expect(page.get_by_role("heading", name="Tests 1")).to_be_visible()
    expect(page.get_by_role("heading", name="Bugs 14")).to_be_visible()
    expect(page.locator("#related-bugs + ul li")).to_have_count(14)
    screenshot(page, "record-feature")


def test_a_title_made_of_html_stays_text(as_alice):
    page = as_alice
    page.goto("/search/")
    page.get_by_label("Search QA knowledge").fill("export footer")

    title = page.locator('.result[data-key="BUG-66"] .result-title')
    expect(title).to_have_text(XSS_TITLE)
    title.click()
    expect(page.locator("#record-title")).to_have_text(XSS_TITLE)
    expect(page.locator(".raw-data")).to_contain_text("</pre><script>alert(3)</script>")
    expect(page.locator("main")).to_contain_text("<script>alert(2)</script> appears in the PDF export footer")
    assert page.locator("img, main script").count() == 0
    page.wait_for_timeout(300)  # an onerror handler would have run by now; the fixture checks for dialogs


# -- keyboard -------------------------------------------------------------------------------------


def test_keyboard_ctrl_k_arrows_and_enter(as_alice):
    page = as_alice
    page.goto("/search/?query=receipt")
    page.get_by_role("link", name="Dashboard").focus()

    page.keyboard.press("Control+k")
    expect(page.locator("#query")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(page.locator(".result-link").nth(0)).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    second = page.locator(".result-link").nth(1)
    expect(second).to_be_focused()
    key = page.locator(".result").nth(1).get_attribute("data-key")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/records/{key}/$"))

    # Elsewhere, Ctrl-K opens the spotlight.
    page.keyboard.press("Control+k")
    expect(page.get_by_role("dialog", name="Quick search")).to_be_visible()
    expect(page.locator("#spotlight-query")).to_be_focused()
    page.keyboard.type("pdf export")
    expect(page.locator("#spotlight-results li").first).to_contain_text("FEAT-9 PDF export")
    screenshot(page, "spotlight", full_page=False)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/records/FEAT-9/$"))


# -- who may see it -------------------------------------------------------------------------------


def test_bob_and_visitors_are_refused(page, bob, live_server):
    page.goto("/dashboard/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/dashboard/$"))

    page.get_by_label("Username").fill("bob")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("for a staff account")

    log_in(page, bob, live_server)  # logged in some other way: still refused
    page.goto("/search/?query=renewal")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next="))
    expect(page.get_by_role("status")).to_contain_text("You are logged in as bob, who is not a staff member")
    assert page.locator(".result").count() == 0
    screenshot(page, "refused")


# -- content security policy ----------------------------------------------------------------------
# The page fixture fails a test on any violation Chromium reports; these tests
# visit what the others do not (the admin, Swagger UI) and check that the
# JavaScript the policy lets through still does its work.


def settle(page, path: str):
    page.goto(path)
    page.wait_for_load_state("networkidle")  # late fetches and styles have reported by now


def test_the_policy_leaves_the_uis_own_javascript_working(page, alice, corpus):
    settle(page, "/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()  # form-action 'self'
    expect(page).to_have_url(re.compile(r"/search/$"))

    page.get_by_label("Search QA knowledge").fill("renewal")  # results by fetch as she types
    expect(page).to_have_url(re.compile(r"\?query=renewal$"))
    expect(page.locator(".result").first).to_be_visible()

    settle(page, "/records/BUG-12/")
    page.keyboard.press("Control+k")
    page.keyboard.type("pdf export")
    expect(page.locator("#spotlight-results li").first).to_contain_text("FEAT-9 PDF export")

    settle(page, "/dashboard/")
    expect(page.locator(".chart rect").first).to_be_visible()
    assert page.csp_violations == []

    # Neither listener is deaf: an inline script is refused, and both hear it.
    page.evaluate("document.body.append(Object.assign(document.createElement('script'), {textContent: '1'}))")
    page.wait_for_timeout(300)
    heard = page.csp_violations
    assert any(v.startswith("script-src-elem refused inline at ") for v in heard), heard  # the event
    assert any(v.startswith("Executing inline script violates") for v in heard), heard  # the console
    heard.clear()


def test_the_policy_leaves_the_admin_working(page, alice, corpus):
    alice.is_superuser = True
    alice.save()
    settle(page, "/admin/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Products, features, tests and bugs")).to_be_visible()

    settle(page, "/admin/backlog/bug/?severity__exact=high")
    page.locator("#action-toggle").check()  # actions.js counts the selection
    expect(page.locator(".action-counter")).to_have_text(re.compile(r"^\d+ of \d+ selected$"))
    severity = page.locator(".field-severity_badge .severity").first
    assert severity.evaluate("el => getComputedStyle(el).fontWeight") == "600"  # backlog/admin.css, not style=""

    settle(page, f"/admin/backlog/bug/{Bug.objects.get(key='BUG-12').pk}/change/")
    expect(page.locator("textarea.raw-data-editor")).to_have_css("font-family", "monospace")
    page.locator("#id_product + .select2").click()  # the autocomplete asks the admin by XHR
    page.locator(".select2-search__field").fill("led")
    expect(page.locator(".select2-results__option")).to_have_text(["PRD-2 Ledgerly"])
    screenshot(page, "admin-bug", full_page=False)


def test_a_curator_links_a_duplicate_in_the_admin_and_the_record_pages_show_it(page, alice, corpus, live_server):
    alice.is_superuser = True
    alice.save()
    log_in(page, alice, live_server)
    original, copy = Bug.objects.get(key="BUG-12"), Bug.objects.get(key="BUG-20")

    settle(page, f"/admin/backlog/bug/{copy.pk}/change/")
    page.locator("#id_duplicate_of + .select2").click()  # an autocomplete, searched by key or title
    page.locator(".select2-search__field").fill("BUG-12")
    page.locator(".select2-results__option", has_text="BUG-12").click()
    page.locator("input[name=_continue]").first.click()
    expect(page.locator(".messagelist .success")).to_be_visible()

    copy.refresh_from_db()
    assert (copy.duplicate_of_id, copy.status) == (original.pk, "duplicate")
    settle(page, f"/admin/backlog/bug/{original.pk}/change/")
    expect(page.locator(".field-duplicate_list a")).to_have_text(["BUG-20"])
    settle(page, "/records/BUG-20/")
    original_link = page.locator("dt", has_text="Duplicate of").locator("xpath=following-sibling::dd[1]//a")
    expect(original_link).to_have_text(re.compile(r"^BUG-12 "))
    original_link.click()
    expect(page).to_have_url(re.compile(r"/records/BUG-12/$"))
    duplicates = page.get_by_role("region", name=re.compile(r"^Duplicates"))
    expect(duplicates.get_by_role("link")).to_have_text([re.compile(r"^BUG-20 ")])


def test_the_policy_leaves_swagger_ui_working(page, db):
    settle(page, "/api/docs")
    expect(page.locator(".opblock-summary-path", has_text="/api/search").first).to_be_visible()
    page.locator(".opblock-summary-path", has_text="/api/search").first.click()
    expect(page.get_by_role("button", name="Try it out").first).to_be_visible()


# -- accessibility --------------------------------------------------------------------------------

PAGES = [
    "/search/?query=renewal",
    "/search/?query=renewal+severity%3Ahigh+product%3A%22tramline+mobile%22",
    "/records/BUG-12/",
    "/records/FEAT-7/",
    "/dashboard/",
]

FOCUSED_CHECKS = """() => {
  const problems = [];
  if (document.documentElement.lang !== "en") problems.push("html has no lang");
  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea, progress")) {
    const named = el.labels.length || el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
    if (!named) problems.push("no label: " + el.outerHTML.slice(0, 80));
  }
  for (const img of document.querySelectorAll("img:not([alt])")) problems.push("no alt: " + img.src);
  for (const svg of document.querySelectorAll("svg")) {
    if (svg.getAttribute("role") !== "img" || !svg.querySelector("title")) problems.push("svg without role/title");
  }
  const headings = [...document.querySelectorAll("h1, h2, h3, h4")].map(h => +h.tagName[1]);
  if (headings.filter(level => level === 1).length !== 1) problems.push("not exactly one h1");
  headings.forEach((level, i) => { if (i && level > headings[i - 1] + 1) problems.push("heading skips a level"); });
  const ids = [...document.querySelectorAll("[id]")].map(el => el.id);
  if (new Set(ids).size !== ids.length) problems.push("duplicate ids");
  return problems;
}"""

# Relative luminance contrast (WCAG 2) of an element's text colour on the first opaque background behind it.
CONTRAST = """(selector) => {
  const rgb = s => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const c = [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const el = document.querySelector(selector);
  let bg = el, color = getComputedStyle(el).backgroundColor;
  while (bg && (color === "rgba(0, 0, 0, 0)" || color === "transparent")) {
    bg = bg.parentElement;
    color = bg ? getComputedStyle(bg).backgroundColor : "rgb(255, 255, 255)";
  }
  const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(rgb(color))].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""

TEXT_SAMPLES = {
    "/search/?query=renewal": [
        "body",
        ".result-title",
        ".result-meta",
        "mark",
        ".count",
        ".hint",
        ".badge.severity-medium",
        ".site-nav a",
        "button[type=submit]",
        ".snippet-field",
        ".range",
    ],
    "/search/?query=renewal+severity%3Ahigh+product%3A%22tramline+mobile%22": [".chip-token", ".chip-detail"],
    "/records/BUG-12/": [".details dt", ".ref-list time", ".raw-data", ".badge.severity-high", ".key"],
    "/records/FEAT-7/": [".badge.status-open", ".badge.severity-low"],
    "/dashboard/": [".big-figure span", ".counts td", ".badge.severity-critical"],
}


def test_focused_accessibility_checks(as_alice):
    page = as_alice
    for path in PAGES:
        page.goto(path)
        assert page.evaluate(FOCUSED_CHECKS) == [], path
        for selector in TEXT_SAMPLES.get(path, []):
            assert page.evaluate(CONTRAST, selector) >= 4.5, (path, selector)
    page.goto("/dashboard/")
    fill = page.locator(".chart .tick").first.evaluate("el => getComputedStyle(el).fill")
    muted = page.locator(".big-figure span").evaluate("el => getComputedStyle(el).color")
    assert fill == muted  # the axis labels use the muted text colour checked above
    docs_screenshot(page, "dashboard")

    # Focus order: skip link, the header, the search box, then the filters, then the results.
    page.goto("/search/?query=renewal")
    order = []
    for _ in range(40):
        page.keyboard.press("Tab")
        order.append(page.evaluate("() => document.activeElement.id || document.activeElement.className"))
    assert order[0] == "skip-link"
    assert order.index("query") < order.index("facet-entities-bug") < order.index("result-link")


@pytest.fixture(scope="module")
def axe_source() -> str:
    """axe-core, fetched once with npm into .local/ (a test tool; nothing is committed)."""
    script = AXE_DIR / "axe.min.js"
    if not script.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed; axe-core cannot be fetched")
        AXE_DIR.mkdir(parents=True, exist_ok=True)
        packed = subprocess.run(
            ["npm", "pack", f"axe-core@{AXE_VERSION}", "--silent", "--pack-destination", str(AXE_DIR)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if packed.returncode != 0:
            pytest.skip(f"npm pack axe-core failed: {packed.stderr.strip()[:200]}")
        with tarfile.open(AXE_DIR / packed.stdout.strip().splitlines()[-1]) as archive:
            script.write_bytes(archive.extractfile("package/axe.min.js").read())
    return script.read_text()


@pytest.fixture
def alice_with_tools(browser, live_server, alice, corpus):
    """Alice's page with the Content-Security-Policy bypassed (Playwright's
    bypass_csp), for a test tool injected as an inline script: the policy
    rightly refuses axe-core, and every other test runs under the policy."""
    alice.user_permissions.add(Permission.objects.get(codename="add_bug"))
    page = new_page(browser, live_server, bypass_csp=True)
    log_in(page, alice, live_server)
    yield page
    close(page)


def test_axe_finds_no_wcag_aa_violations(alice_with_tools, axe_source):
    page = alice_with_tools
    for path in ["/accounts/login/", *PAGES]:
        page.goto(path)
        page.add_script_tag(content=axe_source)
        violations = page.evaluate(
            "async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}))"
            ".violations.map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', '))"
        )
        assert violations == [], path
    page.goto("/records/BUG-12/")
    page.keyboard.press("Control+k")
    page.keyboard.type("renewal")
    expect(page.locator("#spotlight-results li").first).to_be_visible()
    page.add_script_tag(content=axe_source)
    assert page.evaluate("async () => (await axe.run('#spotlight')).violations.map(v => v.id)") == []
    # Report a bug, with its "Reported before?" panel filled as the title is typed.
    page.goto("/bugs/new/")
    page.locator("#id_title").fill("Renew button does nothing on Android")
    expect(page.locator("#duplicates-panel .duplicate").first).to_be_visible()
    page.add_script_tag(content=axe_source)
    violations = page.evaluate(
        "async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}))"
        ".violations.map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', '))"
    )
    assert violations == [], "/bugs/new/"


def test_on_a_phone_the_header_is_two_rows_and_results_start_on_the_first_screen(browser, live_server, alice, corpus):
    page = new_page(browser, live_server, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        log_in(page, alice, live_server)
        page.goto("/search/?query=season+pass+renewal")
        expect(page.locator(".result").first).to_be_visible()

        header = page.locator(".site-header").bounding_box()
        first = page.locator(".result").first.bounding_box()
        line = page.locator(".brand").bounding_box()["height"]
        assert header["height"] < 3 * line + 8, header  # two rows: brand and log out, then the sections
        assert first["y"] + 60 < 844, first  # the first result starts on the first screen
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing scrolls sideways
        docs_screenshot(page, "search-phone", full_page=False)
    finally:
        close(page)


def test_the_admins_bug_list_fits_a_1280_pixel_screen(page, alice, corpus, live_server):
    alice.is_superuser = True
    alice.save()
    log_in(page, alice, live_server)
    settle(page, "/admin/backlog/bug/")

    results = page.locator("#changelist .results")
    width, visible = results.evaluate("el => [el.scrollWidth, el.clientWidth]")
    rows = page.locator("#result_list tbody tr")
    title = rows.first.locator(".field-title")
    line = title.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)")
    assert width <= visible, (width, visible)  # no sideways scrolling for severity, status or created
    assert title.bounding_box()["height"] <= 2 * line + 12  # a title takes at most two lines
    screenshot(page, "admin-bug-list", full_page=False)


# -- export and saved searches ----------------------------------------------------------------------


def test_the_export_link_follows_the_live_search_and_saving_it_lands_on_the_dashboard(as_alice):
    page = as_alice
    page.goto("/search/")
    page.get_by_label("Search QA knowledge").fill("renewal")
    page.get_by_role("checkbox", name=re.compile(r"^low \d+$")).check()
    expect(page).to_have_url(re.compile(r"query=renewal&severity=low$"))
    expected = service.ranked({"query": "renewal", "severity": "low"})

    # The links were swapped in with the results: they carry the filter chosen a moment ago.
    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    assert download.value.suggested_filename.startswith("search-renewal-")
    lines = Path(download.value.path()).read_text(encoding="utf-8-sig").splitlines()
    assert lines[0] == "rank,key,kind,product,feature,title,status,severity,created_at,updated_at,url"
    assert len(lines) - 1 == len(expected.ids) and all(",low," in line for line in lines[1:])

    page.get_by_role("link", name="Save this search").click()
    page.get_by_label("Name").fill("Low renewal bugs")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(r"/dashboard/$"))
    expect(page.get_by_role("status").filter(has_text="Saved “Low renewal bugs”")).to_be_visible()
    row = page.locator("#saved-searches tr", has_text="Low renewal bugs")
    expect(row).to_contain_text("nothing new")
    screenshot(page, "dashboard-saved", full_page=False)
    row.get_by_role("link", name="Low renewal bugs").click()
    expect(page).to_have_url(re.compile(r"/search/\?query=renewal&mode=hybrid&severity=low$"))
    expect(page.locator(".result")).to_have_count(len(expected.ids))
