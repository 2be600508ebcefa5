"""Writing back to Jira: a bug filed here lands in the team's Jira, exactly once, and comes back as the truth.

The story: Apache Hadoop's QA team ("hadoop-qa") syncs the Jira project
HADOOP (tests/upstream/jira_write.py, Jira's REST API on loopback), on a
Cloud site (REST v3, ADF) and on a Data Center one (REST v2, wiki markup),
and has turned on write back. Wanda is on the team: she files what she
finds, marks duplicates, and a triaged failure comments on a bug. Jira may
require a field we cannot fill, refuse a field, refuse her token, lose an
answer, or have a workflow that cannot resolve an issue as a duplicate;
whatever it does, one call makes at most one issue, one link, one comment.
"""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from backlog.models import Bug
from connectors.models import Source, SyncedRecord
from connectors.sync import connect
from search import service as search
from tests.upstream.jira_write import NO_PERMISSION, FakeJiraWrites
from writeback import worker
from writeback.models import Operation, Status, UpstreamWrite

from .conftest import client_with_token
from .test_ui_browser import browser, close, log_in, new_page  # noqa: F401
from .test_writeback_ui import file_from_the_page, staff

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

DRAFT = {
    "product": "HADOOP",
    "title": "DataNode keeps serving a replica after its block was deleted",
    "description": "A client reads stale bytes from a DataNode after the file was deleted and written again.",
    "steps": "1. Write /tmp/a on a three-node cluster\n2. Delete it and write it again",
    "expected_result": "The new bytes are read.",
    "actual_result": "The old block's bytes are read from one DataNode.",
    "environment": "Hadoop 3.3.6, three DataNodes, Ubuntu 22.04",
    "severity": "critical",
    "labels": ["hdfs", "data loss"],
}
SECTIONS = ["Steps to reproduce", "Expected", "Actual"]


@pytest.fixture(params=["cloud", "dc"])
def jira(request, monkeypatch, settings):
    """HADOOP on a Jira site, synced by the team, writing back."""
    fake = FakeJiraWrites.from_gitbugs(20, cloud=request.param == "cloud").start()
    if fake.cloud:
        monkeypatch.setenv("JIRA_EMAIL", fake.email)
    else:
        monkeypatch.delenv("JIRA_EMAIL", raising=False)
    monkeypatch.setenv("JIRA_API_TOKEN", fake.token)
    settings.WRITEBACK_WAIT_SECONDS = 5
    Group.objects.get_or_create(name="hadoop-qa")
    args = ["--url", fake.url, "--project", "HADOOP", "--team", "hadoop-qa", "--no-progress"]
    call_command("sync", "jira", *args, stdout=io.StringIO())
    Source.objects.update(write_back=True)
    yield fake
    fake.stop()


@pytest.fixture
def wanda(jira, django_user_model):
    user = django_user_model.objects.create_user("wanda", password="a-long-passphrase", first_name="Wanda")
    user.groups.add(Group.objects.get(name="hadoop-qa"))
    return user


def file(user, draft=DRAFT):
    return client_with_token(user).post("/api/bugs/file", draft, format="json")


def sent(jira: FakeJiraWrites, path: str, method: str = "POST") -> list:
    return [r for r in jira.requests if r.method == method and r.path == f"/rest/api/{jira.api}/{path}"]


def due_now() -> None:
    UpstreamWrite.objects.filter(status=Status.PENDING).update(next_try_at=timezone.now() - timedelta(seconds=1))


def headings(document: dict) -> list[str]:
    return [node["content"][0]["text"] for node in document["content"] if node["type"] == "heading"]


def test_a_team_member_files_a_bug_that_is_jira_s_issue_searchable_at_once(jira, wanda):
    answer = file(wanda)

    assert answer.status_code == 201, answer.json()
    write = answer.json()
    (issue,) = jira.made()
    key = issue["key"]
    assert (write["status"], write["attempts"], write["error"]) == ("sent", 1, None)
    assert (write["upstream_key"], write["record_key"]) == (key, key)
    assert write["upstream_url"] == f"{jira.url}/browse/{key}"
    marker = UpstreamWrite.objects.get().marker
    assert jira.properties[issue["id"]] == {"qa-search": {"write": marker}}
    (create,) = sent(jira, "issue")
    fields = create.json()["fields"]
    assert fields["issuetype"] == {"id": "1"} and fields["project"] == {"key": "HADOOP"}
    assert fields["priority"] == {"id": "2"}  # Critical, not Blocker: the priority of the severity's own name
    assert fields["labels"] == ["hdfs", "data-loss"]  # Jira's labels take no spaces
    description = issue["fields"]["description"]
    if jira.cloud:  # ADF: a heading node a section; the environment in its own field
        assert headings(description) == SECTIONS
        assert description["content"][-1]["content"] == [{"type": "text", "text": "Filed by Wanda through QA Search"}]
        assert issue["fields"]["environment"]["content"][0]["content"][0]["text"] == DRAFT["environment"]
    else:
        assert description == (
            f"{DRAFT['description']}\n\nh3. Steps to reproduce\n{DRAFT['steps']}\n\n"
            f"h3. Expected\n{DRAFT['expected_result']}\n\nh3. Actual\n{DRAFT['actual_result']}\n\n"
            "Filed by Wanda through QA Search"
        )
        assert issue["fields"]["environment"] == DRAFT["environment"]

    bug = Bug.objects.get(key=key)
    assert (bug.title, bug.severity, bug.status) == (DRAFT["title"], "critical", "open")
    assert "Steps to reproduce" in bug.description and bug.description.endswith("Filed by Wanda through QA Search")
    assert SyncedRecord.objects.get(key=key).upstream_id == issue["id"]
    hits = search.call("search", {"query": "datanode serving replica block deleted", "mode": "keyword"}, wanda)
    assert hits["results"][0]["key"] == key


def test_where_the_screen_offers_no_priority_labels_or_environment_they_are_not_sent(jira, wanda):
    jira.offers = set()

    assert file(wanda).json()["status"] == "sent"

    (create,) = sent(jira, "issue")
    assert set(create.json()["fields"]) == {"project", "issuetype", "summary", "description"}
    (issue,) = jira.made()
    description = issue["fields"]["description"]
    if jira.cloud:
        assert headings(description) == [*SECTIONS, "Environment"]
    else:
        assert f"h3. Environment\n{DRAFT['environment']}" in description


def test_a_required_field_qa_search_cannot_fill_refuses_the_write_by_its_name_and_sends_nothing(jira, wanda):
    jira.required = {"customfield_10010": "Sprint", "customfield_10050": "Customer"}

    write = file(wanda).json()

    assert write["status"] == "failed", write
    assert write["error"].startswith("HADOOP's Bug needs Sprint, Customer that QA Search cannot fill: ")
    assert sent(jira, "issue") == [] and jira.made() == []
    assert not Bug.objects.filter(title=DRAFT["title"]).exists()


def test_jira_s_400_is_shown_field_by_field_by_the_fields_names(jira, wanda):
    jira.validators = {"customfield_10010": ("Sprint", "Sprint is required.")}

    write = file(wanda).json()

    assert (write["status"], write["error"]) == ("failed", "Sprint: Sprint is required."), write
    assert len(sent(jira, "issue")) == 1 and jira.made() == []


def test_a_token_that_may_not_create_fails_in_jira_s_own_words(jira, wanda):
    jira.may_create = False

    write = file(wanda).json()

    assert write["status"] == "failed" and write["error"] == NO_PERMISSION, write
    assert worker.send_due() == 0 and jira.made() == []


@pytest.mark.parametrize("lagging", [False, True], ids=["indexed", "index-lagging"])
def test_an_answer_lost_on_the_way_is_found_by_its_marker_and_makes_one_issue(jira, wanda, settings, lagging):
    settings.WRITEBACK_WAIT_SECONDS = 1
    jira.lose_answers(times=1, delay=2)
    if lagging:  # Jira's search has not seen the new issue yet: its key is read from the database
        jira.lag_index()

    write = file(wanda).json()

    assert write["status"] == "pending" and "try 1 of" in write["error"], write
    assert len(jira.made()) == 1
    due_now()
    assert worker.send_due() == 1

    (issue,) = jira.made()
    write = UpstreamWrite.objects.get()
    assert len(sent(jira, "issue")) == 1  # asked for the marker, found it, sent nothing again
    assert (write.status, write.attempts, write.record_key) == (Status.SENT, 2, issue["key"])
    read = [r.path for r in jira.requests if r.path.endswith("/properties/qa-search")]
    assert read[-1] == f"/rest/api/{jira.api}/issue/{issue['id']}/properties/qa-search"
    # Lagging, the search since the write finds nothing: the keys after the project's highest are read directly.
    probed = any("ORDER BY key DESC" in (r.query.get("jql") or "") for r in jira.requests)
    assert probed == lagging


def mark(user, duplicate: str, original: str):
    return client_with_token(user).post(f"/api/bugs/{duplicate}/duplicate-of", {"of": original}, format="json")


def two_open(jira: FakeJiraWrites) -> tuple[dict, dict]:
    issues = [i for i in jira.issues.values() if i["fields"]["status"]["statusCategory"]["key"] != "done"]
    return issues[0], issues[1]


def test_marked_over_rest_jira_links_and_resolves_it_as_a_duplicate(jira, wanda):
    original, duplicate = two_open(jira)
    if not jira.cloud:  # this site calls its Duplicate type otherwise; the source's mapping says so
        jira.rename_duplicate("Copy")
        Source.objects.update(mapping={"duplicate_link": ["Copy"]})

    answer = mark(wanda, duplicate["key"], original["key"])

    assert answer.status_code == 201, answer.json()
    write = answer.json()
    assert (write["operation"], write["status"], write["error"]) == ("duplicate", "sent", None), write
    assert (write["upstream_key"], write["record_key"]) == (duplicate["key"], duplicate["key"])
    (link,) = sent(jira, "issueLink")
    body = link.json()
    assert (body["inwardIssue"], body["outwardIssue"], body["type"]) == (
        {"id": duplicate["id"]},
        {"id": original["id"]},
        {"id": "10002"},
    )
    (comment,) = jira.comments_on(duplicate["key"])
    marker = UpstreamWrite.objects.get().marker
    assert comment["properties"] == [{"key": "qa-search", "value": {"write": marker}}]
    words = f"Duplicate of {original['key']} — marked by Wanda through QA Search"
    assert (comment["body"]["content"][0]["content"][0]["text"] if jira.cloud else comment["body"]) == words
    assert duplicate["fields"]["resolution"]["name"] == "Duplicate"
    (transition,) = sent(jira, f"issue/{duplicate['id']}/transitions")
    assert transition.json() == {"transition": {"id": "5"}, "fields": {"resolution": {"id": "3"}}}

    bug = Bug.objects.get(key=duplicate["key"])
    assert (bug.status, bug.duplicate_of.key) == ("duplicate", original["key"])  # Jira's answer, read again
    assert UpstreamWrite.objects.get().note == ""


def test_a_workflow_with_no_duplicate_resolution_links_and_says_so(jira, wanda):
    original, duplicate = two_open(jira)
    status = duplicate["fields"]["status"]["name"]
    jira.without_resolution.add(status)

    write = mark(wanda, duplicate["key"], original["key"]).json()

    assert write["status"] == "sent" and write["error"] is None, write
    assert len(sent(jira, "issueLink")) == 1 and sent(jira, f"issue/{duplicate['id']}/transitions") == []
    note = f"HADOOP's workflow has no transition from {status!r} that resolves as Duplicate: linked, left unresolved"
    assert UpstreamWrite.objects.get().note == note
    bug = Bug.objects.get(key=duplicate["key"])
    assert (
        bug.duplicate_of.key == original["key"]
        and bug.status != "duplicate"
        and duplicate["fields"]["resolution"] is None
    )


def test_a_mark_retried_after_a_busy_jira_sends_no_second_link(jira, wanda):
    original, duplicate = two_open(jira)
    jira.fail(
        503,
        body={"errorMessages": ["Service Unavailable"]},
        path=f"/rest/api/{jira.api}/issue/{duplicate['id']}/transitions",
        times=3,  # each of the read's three tries (quick_retries): the write is left pending
    )

    write = mark(wanda, duplicate["key"], original["key"]).json()

    assert write["status"] == "pending" and "server busy (503)" in write["error"], write
    assert len(sent(jira, "issueLink")) == 1  # linked before the transition was asked for
    due_now()
    assert worker.send_due() == 1

    write = UpstreamWrite.objects.get()
    assert (write.status, write.attempts) == (Status.SENT, 2)
    assert len(sent(jira, "issueLink")) == 1 and len(jira.comments_on(duplicate["key"])) == 1
    assert len([link for link in duplicate["fields"]["issuelinks"] if "outwardIssue" in link]) == 1
    assert Bug.objects.get(key=duplicate["key"]).status == "duplicate"


def test_a_comment_carries_its_marker_and_a_lost_answer_is_found_among_the_comments(jira, wanda, settings):
    _, issue = two_open(jira)
    for number in range(3):  # comments of others first: the marked one is on a later page
        jira.add_comment(issue["id"], {"body": f"a note {number}"})
    source = Source.objects.get()
    connector = connect(source)

    made = connector.comment(issue["id"], "Failing test `test_read` in HADOOP run 4.", "m-1")

    assert made["url"] == f"{jira.url}/browse/{issue['key']}?focusedCommentId={made['id']}"
    assert jira.comments_on(issue["key"])[-1]["properties"] == [{"key": "qa-search", "value": {"write": "m-1"}}]
    assert connector.find_marked_comment(issue["id"], "m-1")["id"] == made["id"]
    assert connector.find_marked_comment(issue["id"], "m-2") is None

    # Through the outbox: the answer lost, the next attempt finds the comment and posts none.
    jira.lose_answers(times=1, delay=2)
    draft = {"key": issue["key"], "number": issue["id"], "upstream": issue["key"], "body": "Failing test `t2`."}
    bug = Bug.objects.get(key=issue["key"])
    UpstreamWrite.objects.create(
        source=source, product=bug.product, operation=Operation.COMMENT, draft=draft, surface="rest", requested_by=wanda
    )
    worker.send_now(UpstreamWrite.objects.get().pk, 1)
    due_now()
    worker.send_due()

    write = UpstreamWrite.objects.get()
    assert write.status == Status.SENT, write.error
    assert len(sent(jira, f"issue/{issue['id']}/comment")) == 2  # one by hand, one through the outbox
    (posted,) = [c for c in jira.comments_on(issue["key"]) if c["body"] and "t2" in str(c["body"])]
    assert write.upstream_url == f"{jira.url}/browse/{issue['key']}?focusedCommentId={posted['id']}"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_in_chromium_filing_from_the_page_lands_on_the_jira_key(jira, browser, live_server, django_user_model):  # noqa: F811
    page = new_page(browser, live_server)
    log_in(page, staff(django_user_model, "wanda", "hadoop-qa"), live_server)
    file_from_the_page(page, "HADOOP", "(HADOOP); the record here is made from its answer", DRAFT)

    expect(page.get_by_role("heading", name="Filed HADOOP-")).to_be_visible()
    (issue,) = jira.made()
    expect(page.get_by_role("heading", name=f"Filed {issue['key']}")).to_be_visible()
    expect(page.get_by_role("link", name=issue["key"]).first).to_have_attribute(
        "href", f"{jira.url}/browse/{issue['key']}"
    )
    close(page)
