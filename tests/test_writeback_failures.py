"""A confirmed triage link reaches the bug in GitHub: one comment a bug a run, exactly once.

The story: SeaMonkey's team (tests/test_writeback.py's fixtures: GitHub on
loopback, write back on) uploads the nightly JUnit report; Wanda confirms
that the failing reply-all test is an issue GitHub already has. The issue
gets one comment naming the test, the run and when it failed; confirming it
again, for another cause of the same run, or after an answer lost on the
way, adds none.
"""

import sys

import anyio
import pytest
from django.test import Client
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from backlog.models import Bug
from connectors.models import Source
from tests.upstream.github import FakeGitHub
from writeback import worker
from writeback.models import Operation, Status, UpstreamWrite

from . import test_writeback as story
from .conftest import client_with_token
from .test_mcp import ROOT, server_env
from .test_writeback_ui import text

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]
github, wanda, due_now = story.github, story.wanda, story.due_now  # its fixtures, and a helper

REPORT = b"""<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="mail" tests="3" failures="2" errors="0">
  <testcase classname="mail.compose.ReplyAllTest" name="testKeepsCcRecipients" time="0.4">
    <failure type="AssertionError" message="expected 3 recipients, got 1">AssertionError: expected 3 recipients, got 1
    at mail.compose.ReplyAll.recipients(ReplyAll.java:41)</failure>
  </testcase>
  <testcase classname="mail.store.MboxTest" name="testCompactKeepsFlags" time="0.2">
    <failure type="IllegalStateException" message="folder locked">IllegalStateException: folder locked
    at mail.store.Mbox.compact(Mbox.java:210)</failure>
  </testcase>
  <testcase classname="mail.compose.ReplyTest" name="testQuotes" time="0.1"/>
</testsuite>
"""


def upload(client) -> dict:
    answer = client.post("/api/runs?product=SEAMONKEY&name=nightly.xml", REPORT, content_type="application/xml")
    assert answer.status_code == 200, answer.json()
    return answer.json()


def signature(run: dict, test: str) -> str:
    return next(g["signature"] for g in run["groups"] if any(f["test"] == test for f in g["failures"]))


def decide(client, run: dict, test: str, bug: str, decision: str = "confirmed"):
    body = {"signature": signature(run, test), "bug": bug, "decision": decision}
    return client.post(f"/api/runs/{run['run']}/decisions", body, format="json")


def comments(github: FakeGitHub, number: int) -> list[str]:
    return [c["body"] for c in github.repos[github.main]["comments"].get(number, [])]


def a_bug() -> tuple[str, int]:
    bug = Bug.objects.filter(product__key="SEAMONKEY").order_by("key").first()
    return bug.key, int(bug.key.rsplit("-", 1)[1])


REPLY_ALL = "mail.compose.ReplyAllTest.testKeepsCcRecipients"
MBOX = "mail.store.MboxTest.testCompactKeepsFlags"


def test_a_confirmed_link_comments_once_on_the_issue_naming_the_test_the_run_and_when(github, wanda):
    client = client_with_token(wanda)
    run = upload(client)
    key, number = a_bug()
    before = comments(github, number)

    answer = decide(client, run, REPLY_ALL, key)

    assert answer.status_code == 200, answer.json()
    write = UpstreamWrite.objects.get()
    confirmed = next(g for g in answer.json()["groups"] if g["signature"] == signature(run, REPLY_ALL))
    assert confirmed["suggestions"][0]["key"] == key and confirmed["suggestions"][0]["write"] == write.pk
    assert (write.operation, write.status, write.surface, write.requested_by) == (
        Operation.COMMENT,
        Status.PENDING,
        "rest",
        wanda,
    )
    assert worker.send_due() == 1
    write.refresh_from_db()
    (comment,) = comments(github, number)[len(before) :]
    when = write.created_at  # the run was stored just before: the same minute, or the one after
    assert comment.startswith(f"Failing test `{REPLY_ALL}` in SEAMONKEY run {run['run']} (nightly.xml), failed ")
    assert "Linked to this bug by Wanda through QA Search." in comment
    assert f"<!-- qa-search:write:{write.marker} -->" in comment and when.strftime("%Y-%m-%d") in comment
    assert (write.status, write.upstream_key, write.record_key) == (Status.SENT, f"mozilla/seamonkey#{number}", key)
    assert write.upstream_url.startswith(f"https://github.com/mozilla/seamonkey/issues/{number}#issuecomment-")
    assert client.get(f"/api/writes/{write.pk}").json()["status"] == "sent"

    # The same bug for the run's other cause, again after a rejection: the decisions stand, no comment.
    assert decide(client, run, MBOX, key).status_code == 200
    assert decide(client, run, REPLY_ALL, key, "rejected").status_code == 200
    assert decide(client, run, REPLY_ALL, key).status_code == 200
    assert UpstreamWrite.objects.count() == 1 and worker.send_due() == 0
    assert len(comments(github, number)) == len(before) + 1

    # The next run's confirmation is news: one more comment.
    later = upload(client)
    assert decide(client, later, REPLY_ALL, key).status_code == 200
    assert worker.send_due() == 1
    assert len(comments(github, number)) == len(before) + 2


def test_the_triage_page_shows_the_comment_pending_sent_with_its_link_or_failed_in_github_s_words(github, wanda):
    client = client_with_token(wanda)
    run = upload(client)
    key, number = a_bug()
    assert decide(client, run, REPLY_ALL, key).status_code == 200
    page = Client()
    page.force_login(wanda)
    wanda.is_staff = True
    wanda.save(update_fields=["is_staff"])

    assert f"A comment to mozilla/seamonkey#{number} is on its way" in text(page.get(f"/triage/?run={run['run']}"))
    worker.send_due()
    write = UpstreamWrite.objects.get()
    html = page.get(f"/triage/?run={run['run']}").content.decode()
    assert f'<a href="{write.upstream_url}" rel="noopener noreferrer">mozilla/seamonkey#{number}</a>' in html

    github.repos[github.main]["meta"]["has_issues"] = False  # GitHub's 410 for the next run's comment
    later = upload(client)
    assert decide(client, later, REPLY_ALL, key).status_code == 200
    due_now()
    worker.send_due()
    failed = UpstreamWrite.objects.exclude(pk=write.pk).get()
    assert failed.status == Status.FAILED and failed.error
    shown = text(page.get(f"/triage/?run={later['run']}"))
    assert f"The comment to mozilla/seamonkey#{number} failed: {failed.error}" in shown


def test_a_comment_whose_answer_was_lost_is_found_by_its_marker_not_made_twice(github, wanda, settings):
    settings.SYNC_HTTP_DEADLINE = 1
    client = client_with_token(wanda)
    run = upload(client)
    key, number = a_bug()
    before = len(comments(github, number))
    github.lose_answers(1, delay=2.5)
    assert decide(client, run, REPLY_ALL, key).status_code == 200

    worker.send_due()  # made upstream, its answer lost: pending, in doubt
    write = UpstreamWrite.objects.get()
    assert write.status == Status.PENDING and write.error, write.error
    due_now()
    worker.send_due()  # asks for the marker first: found

    write.refresh_from_db()
    assert write.status == Status.SENT and write.attempts == 2, (write.status, write.error)
    assert len(comments(github, number)) == before + 1


def test_no_comment_when_turned_off_or_the_source_writes_nothing_back_and_the_decision_is_kept(github, wanda, settings):
    client = client_with_token(wanda)
    run = upload(client)
    key, number = a_bug()
    before = len(comments(github, number))

    settings.WRITEBACK_FAILURE_COMMENTS = False
    assert decide(client, run, REPLY_ALL, key).status_code == 200
    settings.WRITEBACK_FAILURE_COMMENTS = True
    Source.objects.update(write_back=False)
    assert decide(client, run, MBOX, key).status_code == 200

    assert UpstreamWrite.objects.count() == 0 and worker.send_due() == 0
    assert len(comments(github, number)) == before
    stored = client.get(f"/api/runs/{run['run']}").json()
    decided = [s for g in stored["groups"] for s in g["suggestions"] if s.get("decision") == "confirmed"]
    assert [s["key"] for s in decided] == [key, key] and all("write" not in s for s in decided)


def test_a_read_only_token_confirms_nothing_and_writes_nothing(github, wanda):
    run = upload(client_with_token(wanda))
    key, _ = a_bug()
    refused = decide(client_with_token(wanda, scope="read"), run, REPLY_ALL, key)
    assert refused.status_code == 403 and UpstreamWrite.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_an_agent_links_a_failure_over_mcp_and_the_bug_gets_one_comment(github, wanda):
    """`manage.py mcp --user wanda` over stdio: triage_run's group, then link_failure on it."""
    from django.db import connection

    run = upload(client_with_token(wanda))
    key, number = a_bug()
    before = comments(github, number)
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--user", "wanda"],
        cwd=str(ROOT),
        env={**server_env(connection.settings_dict["NAME"]), "GITHUB_TOKEN": github.token},
    )
    asked = {"run": run["run"], "signature": signature(run, REPLY_ALL), "bug": key, "decision": "confirmed"}

    async def session():
        async with McpClient(parameters) as client:
            return await client.call_tool("link_failure", asked), await client.call_tool("link_failure", asked)

    linked, again = anyio.run(session)

    assert not linked.is_error, linked.content[0].text
    answer = linked.structured_content
    write = UpstreamWrite.objects.get()
    assert {k: answer[k] for k in ("run", "bug", "decision")} == {
        "run": run["run"],
        "bug": key,
        "decision": "confirmed",
    }
    assert answer["write"]["id"] == write.pk and (write.operation, write.surface) == (Operation.COMMENT, "mcp")
    assert not again.is_error and again.structured_content["write"] is None  # one comment a bug a run
    worker.send_due()
    (comment,) = comments(github, number)[len(before) :]
    assert comment.startswith(f"Failing test `{REPLY_ALL}` in SEAMONKEY run {run['run']}")
