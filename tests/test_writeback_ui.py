"""The report-a-bug page files in the team's GitHub (issue 48, the staff UI's door).

The story of tests/test_writeback.py, on the staff UI: SeaMonkey's QA team
syncs mozilla/seamonkey (the loopback GitHub of tests/upstream/github.py)
with write back on. Wanda, on the team, files from the report-a-bug page
and from a triaged run's "Report as new bug"; the page shows the write
pending, sent or failed. Rita may read but not file; Nate is on another
team; PRD-1, synced from no tracker, is filed here only, and the page says so.
"""

import io
import re
from html import unescape

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from playwright.sync_api import expect

from backlog.models import Bug, Product
from connectors.models import Source
from triage import service as triage
from ui.triage import _with_report_links
from writeback.models import Status, UpstreamWrite

from .test_triage import fixture
from .test_ui_browser import PASSWORD, browser, close, log_in, new_page  # noqa: F401
from .test_writeback import DRAFT, ISSUES, created, due_now, github, posts  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

FORM = {name: DRAFT[name] for name in DRAFT if name != "labels"} | {"action": "file"}


def staff(django_user_model, name: str, team: str | None, may_file: bool = True):
    user = django_user_model.objects.create_user(name, password=PASSWORD, first_name=name.title(), is_staff=True)
    if team:
        user.groups.add(Group.objects.get_or_create(name=team)[0])
    if may_file:
        user.user_permissions.add(Permission.objects.get(codename="add_bug"))
    return user


@pytest.fixture
def wanda(github, django_user_model, client):  # noqa: F811
    client.force_login(staff(django_user_model, "wanda", "seamonkey-qa"))
    return client


def rendered_key(page: str) -> str:
    return re.search(r'name="idempotency_key" value="([^"]+)"', page)[1]


def open_form(client, url="/bugs/new/") -> dict:
    """The page's form as rendered: its idempotency key, made for it."""
    return {"idempotency_key": rendered_key(client.get(url).content.decode())}


def submit(client, form: dict):
    """Post the form and follow its redirect to the write's page."""
    return client.post("/bugs/new/", form, follow=True)


def text(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def test_a_team_member_files_from_the_page_and_lands_on_github_s_key_and_the_record(wanda, github):  # noqa: F811
    page = submit(wanda, {**open_form(wanda), **FORM})

    (issue,) = created(github)
    number = issue["number"]
    write = UpstreamWrite.objects.get()
    assert (write.surface, write.status, write.requested_by.username) == ("ui", Status.SENT, "wanda")
    assert page.redirect_chain == [(f"/bugs/new/?write={write.pk}", 302)]
    html = page.content.decode()
    assert f'href="https://github.com/mozilla/seamonkey/issues/{number}"' in html
    assert f'href="/records/SEAMONKEY-{number}/"' in html
    assert f"Filed mozilla/seamonkey#{number}" in text(page)
    assert "Filed by Wanda through QA Search" in issue["body"] and "### Steps to reproduce" in issue["body"]
    assert Bug.objects.get(key=f"SEAMONKEY-{number}").title == DRAFT["title"]
    assert not Bug.objects.filter(key__startswith="BUG-").exists()  # no local copy pretending to be upstream
    assert 'http-equiv="refresh"' not in html and wanda.get(f"/records/SEAMONKEY-{number}/").status_code == 200


def test_filed_as_a_duplicate_from_the_page_it_is_one_issue_closed_upstream_as_a_duplicate(wanda, github):  # noqa: F811
    issues = github.repos[github.main]["issues"].values()
    original = next(i["number"] for i in issues if i["state"] == "open" and "pull_request" not in i)
    form = {**open_form(wanda), **FORM, "duplicate_of": f"SEAMONKEY-{original}"}

    page = submit(wanda, form)
    submit(wanda, form)  # sent twice (a double click): the same write

    (issue,) = created(github)
    number = issue["number"]
    filing, marking = UpstreamWrite.objects.order_by("pk")
    assert (filing.operation, filing.status, marking.operation, marking.status) == ("file", "sent", "duplicate", "sent")
    assert marking.draft["key"] == f"SEAMONKEY-{number}" and marking.requested_by.username == "wanda"
    issue = github.issue(number)
    assert (issue["state"], issue["state_reason"]) == ("closed", "duplicate")
    assert github.repos[github.main]["comments"][number][0]["body"].startswith(f"Duplicate of #{original}\n")
    bug = Bug.objects.get(key=f"SEAMONKEY-{number}")
    assert (bug.status, bug.duplicate_of.key) == ("duplicate", f"SEAMONKEY-{original}")  # upstream's answer
    assert f"Filed mozilla/seamonkey#{number}" in text(page)
    assert not Bug.objects.filter(key__startswith="BUG-").exists()


def test_the_page_says_beside_the_button_where_the_bug_goes(wanda):
    page = text(wanda.get("/bugs/new/?product=SEAMONKEY"))

    assert "Files the issue in GitHub Issues (mozilla/seamonkey); the record here is made from its answer." in page


def test_github_s_422_is_shown_in_its_own_words_with_the_draft_kept_to_try_again(wanda, github):  # noqa: F811
    error = {"resource": "Issue", "code": "invalid", "field": "labels"}
    github.fail(422, body={"message": "Validation Failed", "errors": [error]}, path=ISSUES)
    form = {**open_form(wanda), **FORM}

    page = submit(wanda, form)

    assert UpstreamWrite.objects.get().status == Status.FAILED and created(github) == []
    assert "Not filed: github:mozilla/seamonkey refused it" in text(page) and "Validation Failed" in text(page)
    html = page.content.decode()
    for name in ("steps", "expected_result", "actual_result"):  # what was typed is in the form again
        assert DRAFT[name] in unescape(html)
    assert f'value="{DRAFT["title"]}"' in unescape(html)
    assert not Bug.objects.filter(title=DRAFT["title"]).exists()

    again = submit(wanda, {**FORM, "idempotency_key": rendered_key(html)})  # a new key: a new write

    assert UpstreamWrite.objects.filter(status=Status.SENT).count() == 1 and len(created(github)) == 1
    assert "Filed mozilla/seamonkey#" in text(again)


def test_a_slow_github_leaves_the_write_pending_then_the_page_looks_again_and_finds_it_sent(wanda, github, settings):  # noqa: F811
    settings.WRITEBACK_WAIT_SECONDS = 0  # left to the worker
    page = submit(wanda, {**open_form(wanda), **FORM})

    write = UpstreamWrite.objects.get()
    assert "Being filed in github:mozilla/seamonkey" in text(page) and created(github) == []
    html = page.content.decode()
    assert '<meta http-equiv="refresh" content="3">' in html and f'href="?write={write.pk}"' in html

    due_now()
    call_command("writeback", stdout=io.StringIO())
    again = wanda.get(f"/bugs/new/?write={write.pk}")

    (issue,) = created(github)
    assert f"Filed mozilla/seamonkey#{issue['number']}" in text(again)
    assert f"SEAMONKEY-{issue['number']}" in text(again)


def test_a_double_submit_with_the_form_s_key_is_one_write_and_one_issue(wanda, github):  # noqa: F811
    form = {**open_form(wanda), **FORM}

    first, second = submit(wanda, form), submit(wanda, form)

    assert UpstreamWrite.objects.count() == 1 and len(created(github)) == 1 and posts(github) == 1
    assert first.redirect_chain == second.redirect_chain
    assert "Filed mozilla/seamonkey#" in text(second)


def test_who_may_file_only_a_team_member_with_the_right_to_add_bugs(github, django_user_model, client):  # noqa: F811
    client.force_login(staff(django_user_model, "rita", "seamonkey-qa", may_file=False))
    assert client.post("/bugs/new/", {**FORM, "idempotency_key": "k1"}).status_code == 403

    client.force_login(staff(django_user_model, "nate", "ledgerly-qa"))
    refused = client.post("/bugs/new/", {**FORM, "idempotency_key": "k2"})
    assert refused.status_code == 400 and "Select a valid choice" in text(refused)
    assert posts(github) == 0 and not UpstreamWrite.objects.exists()

    # A write of Wanda's is not Nate's to see.
    client.force_login(staff(django_user_model, "wanda", "seamonkey-qa"))
    write = submit(client, {**FORM, "idempotency_key": "k3"}).redirect_chain[0][0]
    client.force_login(django_user_model.objects.get(username="nate"))
    assert client.get(write).status_code == 404


def test_a_product_no_source_writes_back_for_is_filed_here_only_and_the_page_says_why(wanda, github):  # noqa: F811
    Source.objects.update(write_back=False)

    page = text(wanda.get("/bugs/new/?product=SEAMONKEY"))
    assert (
        "Filed here only: github:mozilla/seamonkey, the tracker SEAMONKEY is synced from, does not take writes "
        "from QA Search. An administrator can turn on “Write back” on that source (admin › Connectors › Sources); "
        "until then the tracker will not see this bug."
    ) in page

    filed = submit(wanda, {**open_form(wanda), **FORM})
    bug = Bug.objects.get(title=DRAFT["title"])
    assert bug.key.startswith("BUG-") and f"Filed {bug.key}." in text(filed)
    assert posts(github) == 0 and not UpstreamWrite.objects.exists()

    Product.objects.create(key="PRD-1", name="Passes").teams.add(Group.objects.get(name="seamonkey-qa"))
    local = text(wanda.get("/bugs/new/?product=PRD-1"))
    assert "Filed here only: PRD-1 is not synced from a tracker, so there is no other place to file it." in local


def test_a_triaged_failure_s_report_as_new_bug_files_in_github_the_same_way(wanda, github):  # noqa: F811
    user = wanda.get("/bugs/new/").wsgi_request.user
    answer = triage.call({"product": "SEAMONKEY"}, user, data=fixture("pytest"), name="pytest.xml")
    (group, link), *_ = _with_report_links(answer)

    page = wanda.get(link).content.decode()
    form = {"idempotency_key": rendered_key(page), "product": "SEAMONKEY", "action": "file"}
    form |= {name: group["draft"][name] for name in ("title", "description")}
    assert f'value="{group["draft"]["title"]}"' in unescape(page)
    filed = submit(wanda, form)

    (issue,) = created(github)
    assert issue["title"] == group["draft"]["title"] and issue["body"].startswith("Failing test: ")
    assert f"Filed mozilla/seamonkey#{issue['number']}" in text(filed)
    assert UpstreamWrite.objects.get().surface == "ui"


def file_from_the_page(page, product: str, where: str, draft: dict = DRAFT) -> None:
    """On report-a-bug in Chromium: the draft for `product`, the page saying `where` it is filed, then "File bug"."""
    page.goto("/bugs/new/")
    page.locator("#id_product").select_option(product)
    expect(page.locator("#filed-where")).to_contain_text(where)
    for name in ("title", "steps", "actual_result"):
        page.locator(f"#id_{name}").fill(draft[name])
    page.get_by_role("button", name="File bug").click()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_in_chromium_filing_from_the_page_lands_on_the_github_key_and_the_record(
    github,  # noqa: F811
    browser,  # noqa: F811
    live_server,
    django_user_model,
):
    page = new_page(browser, live_server)
    log_in(page, staff(django_user_model, "wanda", "seamonkey-qa"), live_server)
    file_from_the_page(page, "SEAMONKEY", "Files the issue in GitHub Issues (mozilla/seamonkey)")

    (issue,) = created(github)
    key = f"mozilla/seamonkey#{issue['number']}"
    expect(page.get_by_role("heading", name=f"Filed {key}")).to_be_visible()
    expect(page.get_by_role("link", name=key)).to_have_attribute("href", issue["html_url"])
    page.get_by_role("link", name=f"SEAMONKEY-{issue['number']}").click()
    expect(page).to_have_url(f"{live_server.url}/records/SEAMONKEY-{issue['number']}/")
    expect(page.get_by_role("heading", name=DRAFT["title"])).to_be_visible()
    close(page)
