# ruff: noqa: F811 (the story's fixtures, from tests/test_writeback.py, and the browser's)
"""Marking a duplicate from a bug's record page: "Duplicate of" there is GitHub's own mark (issue 48).

The story of tests/test_writeback.py on the staff UI: SeaMonkey's QA team
syncs mozilla/seamonkey (the loopback GitHub of tests/upstream/github.py)
with write back on. Wanda, on the team and allowed to change bugs (not a
superuser), opens the later of two issues that are one bug, types the
earlier's key under "Duplicate of" and submits. GitHub gets the comment
"Duplicate of #N" and closes the issue as a duplicate; the page shows the
write sent, and the link here is what GitHub answered. A key she cannot
see is refused on the page, and nothing is written.
"""

import io
import re
from html import unescape

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from playwright.sync_api import expect

from backlog.models import Bug, Product
from connectors.models import Source
from writeback.models import Status, UpstreamWrite

from . import test_writeback as story
from .test_ui_browser import browser, close, log_in, new_page  # noqa: F401
from .test_writeback_duplicates import comments, two_open

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

github, wanda = story.github, story.wanda


@pytest.fixture
def curator(github, wanda):
    """Wanda as the staff UI has her: staff, on seamonkey-qa, allowed to change bugs."""
    wanda.is_staff = True
    wanda.save(update_fields=["is_staff"])
    wanda.user_permissions.add(Permission.objects.get(codename="change_bug"))
    return wanda


def text(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def rendered_key(page: str) -> str:
    return re.search(r'name="idempotency_key" value="([^"]+)"', page)[1]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_in_chromium_a_curator_marks_a_duplicate_and_github_closes_it_as_one(github, curator, browser, live_server):
    original, duplicate = two_open(github)
    page = new_page(browser, live_server)
    log_in(page, curator, live_server)
    page.goto(f"/records/SEAMONKEY-{duplicate}/")
    expect(page.locator("#mark-where")).to_contain_text("Marked in GitHub Issues (mozilla/seamonkey)")

    page.get_by_label("Duplicate of").fill(f"SEAMONKEY-{original}")
    page.get_by_role("button", name="Mark duplicate").click()

    write = UpstreamWrite.objects.get()
    expect(page).to_have_url(f"{live_server.url}/records/SEAMONKEY-{duplicate}/?write={write.pk}")
    heading = f"Marked mozilla/seamonkey#{duplicate} a duplicate of SEAMONKEY-{original}"
    expect(page.get_by_role("heading", name=heading)).to_be_visible()
    issue = github.issue(duplicate)
    expect(page.get_by_role("link", name=f"mozilla/seamonkey#{duplicate}")).to_have_attribute("href", issue["html_url"])
    # GitHub's own mark, once, saying who asked; the issue closed as a duplicate.
    (comment,) = comments(github, duplicate)
    assert comment.startswith(f"Duplicate of #{original}\n\nMarked by Wanda through QA Search")
    assert (issue["state"], issue["state_reason"]) == ("closed", "duplicate")
    assert (write.surface, write.status, write.requested_by.username) == ("ui", Status.SENT, "wanda")
    # The link here is GitHub's answer, shown among the details; the form is no longer offered.
    assert Bug.objects.get(key=f"SEAMONKEY-{duplicate}").duplicate_of.key == f"SEAMONKEY-{original}"
    details = page.locator("dl.details")
    expect(details.get_by_role("link", name=re.compile(f"^SEAMONKEY-{original} "))).to_be_visible()
    expect(details).to_contain_text("Duplicate of")
    expect(page.locator("#duplicate-of")).to_have_count(0)
    close(page)


def test_a_key_the_curator_cannot_see_is_refused_on_the_page_and_nothing_is_written(github, curator, client):
    _, duplicate = two_open(github)
    hidden = Product.objects.create(key="LEDGERLY", name="Ledgerly")  # no team of Wanda's
    Bug.objects.create(key="LEDGERLY-1", product=hidden, title="Totals are off by a cent")
    client.force_login(curator)
    record = f"/records/SEAMONKEY-{duplicate}/"

    form = {"of": "LEDGERLY-1", "idempotency_key": rendered_key(client.get(record).content.decode())}
    page = client.post(f"{record}duplicate", form, follow=True)

    assert page.redirect_chain == [(record, 302)] and page.status_code == 200
    assert "Not marked: no bug 'LEDGERLY-1' you can see" in text(page)
    assert not UpstreamWrite.objects.exists() and comments(github, duplicate) == []
    assert (
        github.issue(duplicate)["state"] == "open"
        and Bug.objects.get(key=f"SEAMONKEY-{duplicate}").duplicate_of is None
    )
    assert 'id="duplicate-of"' in page.content.decode()  # offered again, to name another


def test_the_form_is_offered_only_where_the_mark_can_go_and_to_who_may_change_bugs(github, curator, client):
    original, duplicate = two_open(github)
    client.force_login(curator)
    record = f"/records/SEAMONKEY-{duplicate}/"
    Source.objects.update(write_back=False)

    off = client.get(record)
    assert 'id="duplicate-of"' not in off.content.decode()
    assert (
        "Not offered: github:mozilla/seamonkey, the tracker SEAMONKEY-"
        f"{duplicate} is synced from, does not take writes from QA Search."
    ) in text(off)
    refused = client.post(f"{record}duplicate", {"of": f"SEAMONKEY-{original}", "idempotency_key": "k1"}, follow=True)
    assert "Not marked: github:mozilla/seamonkey does not write back" in text(refused)

    Source.objects.update(write_back=True)
    curator.user_permissions.clear()
    client.force_login(curator)
    assert 'id="mark-duplicate"' not in client.get(record).content.decode()
    assert (
        client.post(f"{record}duplicate", {"of": f"SEAMONKEY-{original}", "idempotency_key": "k2"}).status_code == 403
    )
    assert client.get(f"{record}duplicate").status_code == 405
    assert not UpstreamWrite.objects.exists() and comments(github, duplicate) == []


def test_a_slow_github_leaves_the_mark_pending_and_the_page_looks_again(github, curator, client, settings):
    settings.WRITEBACK_WAIT_SECONDS = 0  # left to the worker
    original, duplicate = two_open(github)
    client.force_login(curator)
    record = f"/records/SEAMONKEY-{duplicate}/"
    form = {"of": f"SEAMONKEY-{original}", "idempotency_key": rendered_key(client.get(record).content.decode())}

    first, again = client.post(f"{record}duplicate", form, follow=True), client.post(f"{record}duplicate", form)

    write = UpstreamWrite.objects.get()  # the form's key: one write for a double click
    assert again["Location"] == f"{record}?write={write.pk}" and write.status == Status.PENDING
    assert "Being marked in github:mozilla/seamonkey" in text(first)
    assert f"“Duplicate of SEAMONKEY-{original}” appears here once the tracker answers" in text(first)
    assert '<meta http-equiv="refresh" content="3">' in first.content.decode() and comments(github, duplicate) == []

    story.due_now()
    call_command("writeback", stdout=io.StringIO())
    sent = client.get(f"{record}?write={write.pk}")
    assert f"Marked mozilla/seamonkey#{duplicate} a duplicate of SEAMONKEY-{original}" in text(sent)
    assert len(comments(github, duplicate)) == 1 and 'http-equiv="refresh"' not in sent.content.decode()
