# ruff: noqa: F811 (the story's fixtures, from tests/test_writeback.py)
"""Marking a duplicate upstream: "Duplicate of X" here is GitHub's own mark there, exactly once.

The story goes on from tests/test_writeback.py: Wanda (on "seamonkey-qa",
which syncs mozilla/seamonkey and writes back) finds two open issues that
are one bug. She marks the later a duplicate of the earlier, from a script
(REST) or her agent (MCP). GitHub gets its own mark, the comment
"Duplicate of #N", and the issue closed as a duplicate; the link here is
what GitHub answers, as a sync would read it. A lost answer, a retried
call, a read-only token, bugs of two trackers: one comment or none.
"""

import io
import json
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime

import anyio
import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client as PageClient
from django.urls import reverse
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from accounts.models import Scope
from backlog import audit
from backlog.models import Bug
from connectors.models import Delivery, DeliveryStatus, Source
from tests.upstream import hooks
from tests.upstream.github import FakeGitHub
from writeback.models import Operation, Status, UpstreamWrite

from .conftest import client_with_token
from .test_duplicate_links import change_form
from .test_mcp import ROOT, server_env
from .test_writeback import SECRET, due_now, github, nate, wanda  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]


def two_open(github: FakeGitHub) -> tuple[int, int]:
    """Two open issues of SeaMonkey's (not pull requests): the original, then its duplicate."""
    issues = github.repos[github.main]["issues"].values()
    numbers = [i["number"] for i in issues if i["state"] == "open" and "pull_request" not in i]
    return numbers[0], numbers[1]


def mark(client, duplicate: int, original: int | str, key: str | None = None, product: str = "SEAMONKEY"):
    headers = {"Idempotency-Key": key} if key else {}
    of = original if isinstance(original, str) else f"{product}-{original}"
    return client.post(f"/api/bugs/SEAMONKEY-{duplicate}/duplicate-of", {"of": of}, format="json", headers=headers)


def comments(github: FakeGitHub, number: int) -> list[str]:
    return [c["body"] for c in github.repos[github.main]["comments"][number]]


def test_marked_over_rest_github_closes_it_as_a_duplicate_and_the_link_here_is_its_answer(github, wanda, client):
    original, duplicate = two_open(github)

    answer = mark(client_with_token(wanda), duplicate, original)

    assert answer.status_code == 201, answer.json()
    write = answer.json()
    assert (write["operation"], write["status"], write["attempts"], write["error"]) == ("duplicate", "sent", 1, None)
    assert (write["upstream_key"], write["record_key"]) == (f"mozilla/seamonkey#{duplicate}", f"SEAMONKEY-{duplicate}")
    assert answer["Location"] == f"/api/writes/{write['id']}"
    issue = github.issue(duplicate)
    assert (issue["state"], issue["state_reason"]) == ("closed", "duplicate")
    marker = UpstreamWrite.objects.get().marker
    assert comments(github, duplicate) == [
        f"Duplicate of #{original}\n\nMarked by Wanda through QA Search\n\n<!-- qa-search:write:{marker} -->"
    ]
    bug = Bug.objects.get(key=f"SEAMONKEY-{duplicate}")
    assert (bug.status, bug.duplicate_of.key) == ("duplicate", f"SEAMONKEY-{original}")
    assert bug.updated_at.isoformat().replace("+00:00", "Z") == issue["updated_at"]  # GitHub's time, not ours
    history = audit.history(bug)
    assert [(e["what"], e["surface"], e["who"]) for e in history][-1] == ("update", "writeback", "wanda")

    # GitHub's webhooks for the comment and the close change nothing.
    comment = github.repos[github.main]["comments"][duplicate][0]
    hooks.github(github, "issue_comment", "created", duplicate, SECRET, comment=comment).through(client)
    hooks.github(github, "issues", "closed", duplicate, SECRET).through(client)
    call_command("hooks", stdout=io.StringIO())
    outcomes = [(d.status, d.outcome) for d in Delivery.objects.order_by("pk")]
    assert all(s == DeliveryStatus.DONE and "created 0, updated 0" in o for s, o in outcomes), outcomes
    assert len(audit.history(Bug.objects.get(key=bug.key))) == len(history)

    # Asked again with another key: it is one already, as GitHub has it; nothing is sent.
    again = mark(client_with_token(wanda), duplicate, original)
    assert again.status_code == 409 and "already a duplicate" in again.json()["error"]["message"]
    assert len(comments(github, duplicate)) == 1 and UpstreamWrite.objects.count() == 1


def test_an_answer_lost_on_the_way_then_a_retry_is_still_one_comment(github, wanda, settings):
    settings.WRITEBACK_WAIT_SECONDS = 1
    original, duplicate = two_open(github)
    github.lose_answers(times=1, delay=2)

    answer = mark(client_with_token(wanda), duplicate, original)

    # GitHub took the comment; its answer did not come in time: the write waits, in doubt, nothing changed here.
    assert answer.status_code == 201 and answer.json()["status"] == "pending", answer.json()
    assert len(comments(github, duplicate)) == 1
    assert Bug.objects.get(key=f"SEAMONKEY-{duplicate}").duplicate_of is None
    due_now()
    call_command("writeback", stdout=io.StringIO())

    write = UpstreamWrite.objects.get()
    assert (write.status, write.attempts) == (Status.SENT, 2), write.error
    assert len(comments(github, duplicate)) == 1  # the marked comment was found: not posted again
    assert (github.issue(duplicate)["state"], github.issue(duplicate)["state_reason"]) == ("closed", "duplicate")
    assert Bug.objects.get(key=f"SEAMONKEY-{duplicate}").duplicate_of.key == f"SEAMONKEY-{original}"


def test_the_same_idempotency_key_twice_is_one_write_and_one_comment(github, wanda):
    original, duplicate = two_open(github)
    client = client_with_token(wanda)

    first, again = mark(client, duplicate, original, key="dup-1"), mark(client, duplicate, original, key="dup-1")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json() and UpstreamWrite.objects.get().operation == Operation.DUPLICATE
    assert len(comments(github, duplicate)) == 1


def test_bugs_of_two_sources_a_read_only_token_and_an_outsider_are_refused(github, wanda, nate, settings):
    original, duplicate = two_open(github)
    other = github.add_repo("mozilla/comm-central")
    github.add(
        "Address book search ignores nicknames",
        "Searching by nickname finds nobody.",
        repo=other,
        created=datetime(2026, 2, 1, tzinfo=UTC),
    )
    args = ["--repo", other, "--url", github.url, "--team", "seamonkey-qa", "--no-progress"]
    call_command("sync", "github", *args, stdout=io.StringIO())
    Source.objects.update(write_back=True)

    apart = mark(client_with_token(wanda), duplicate, "COMM-CENTRAL-1")
    assert apart.status_code == 409, apart.json()
    assert (
        "from github:mozilla/seamonkey and COMM-CENTRAL-1 from github:mozilla/comm-central"
        in (apart.json()["error"]["message"])
    )
    read_only = mark(client_with_token(wanda, Scope.READ), duplicate, original)
    assert read_only.status_code == 403 and "read-only" in read_only.json()["error"]["message"]
    outsider = mark(client_with_token(nate), duplicate, original)
    assert outsider.status_code == 404 and "no bug 'SEAMONKEY-" in outsider.json()["error"]["message"]
    itself = mark(client_with_token(wanda), duplicate, duplicate)
    assert itself.status_code == 400 and "cannot be a duplicate of itself" in itself.json()["error"]["message"]
    Source.objects.update(write_back=False)
    off = mark(client_with_token(wanda), duplicate, original)
    assert off.status_code == 409 and off.json()["error"]["code"] == "write_back_off"

    assert not UpstreamWrite.objects.exists() and comments(github, duplicate) == []
    assert github.issue(duplicate)["state"] == "open"


def test_an_issue_deleted_upstream_fails_with_github_s_words_and_changes_nothing_here(github, wanda):
    original, duplicate = two_open(github)
    github.delete(duplicate)

    write = mark(client_with_token(wanda), duplicate, original).json()

    assert write["status"] == "failed" and "This issue was deleted" in write["error"], write
    assert Bug.objects.get(key=f"SEAMONKEY-{duplicate}").duplicate_of is None


@pytest.mark.django_db(transaction=True)
def test_an_agent_marks_a_duplicate_over_mcp(github, wanda):
    """`manage.py mcp --user wanda` over stdio, as her agent runs it."""
    from django.db import connection

    original, duplicate = two_open(github)
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--user", "wanda"],
        cwd=str(ROOT),
        env={**server_env(connection.settings_dict["NAME"]), "GITHUB_TOKEN": github.token},
    )
    arguments = {"key": f"SEAMONKEY-{duplicate}", "of": f"SEAMONKEY-{original}", "idempotency_key": "agent-dup-1"}

    async def session():
        async with Client(parameters) as client:
            return await client.call_tool("mark_duplicate", arguments), await client.call_tool(
                "mark_duplicate", arguments
            )

    marked, again = anyio.run(session)

    assert not marked.is_error, marked.content[0].text
    write = marked.structured_content
    assert (write["operation"], write["status"], write["record_key"]) == ("duplicate", "sent", arguments["key"])
    assert again.structured_content == write and len(comments(github, duplicate)) == 1
    assert Bug.objects.get(key=arguments["key"]).duplicate_of.key == arguments["of"]
    assert UpstreamWrite.objects.get().surface == "mcp"


def test_the_fake_answers_as_github_documents_a_bad_state_reason_an_unknown_issue_and_issues_off(github, wanda):
    original, duplicate = two_open(github)
    where = f"{github.url}/repos/mozilla/seamonkey/issues"

    def send(method: str, url: str, body: dict) -> tuple[int, dict]:
        headers = {"Authorization": f"Bearer {github.token}", "Content-Type": "application/json"}
        request = urllib.request.Request(url, json.dumps(body).encode(), headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.load(answer)
        except urllib.error.HTTPError as refused:
            return refused.code, json.load(refused)

    status, bad = send("PATCH", f"{where}/{duplicate}", {"state": "closed", "state_reason": "dupe"})
    assert status == 422 and bad["errors"][0]["field"] == "state_reason"
    assert send("POST", f"{where}/99999/comments", {"body": "x"})[0] == 404
    github.disable_issues()

    write = mark(client_with_token(wanda), duplicate, original).json()

    assert write["status"] == "failed" and "Issues are disabled for this repo" in write["error"], write
    assert comments(github, duplicate) == [] and github.issue(duplicate)["state"] == "open"


def test_a_curator_linking_a_duplicate_in_the_admin_marks_it_in_github_and_the_link_comes_back(github, wanda):
    original, duplicate = two_open(github)
    curator = wanda
    curator.is_staff = True
    curator.save(update_fields=["is_staff"])
    curator.user_permissions.add(*Permission.objects.filter(codename__in=["view_bug", "change_bug"]))
    page = PageClient()
    page.force_login(curator)
    bug, first = (Bug.objects.get(key=f"SEAMONKEY-{n}") for n in (duplicate, original))
    form = change_form(bug, duplicate_of=first.pk)

    saved = page.post(reverse("admin:backlog_bug_change", args=[bug.pk]), form, follow=True)

    write = UpstreamWrite.objects.get()
    assert (write.operation, write.status, write.surface) == (Operation.DUPLICATE, Status.SENT, "admin")
    assert f"{bug.key} as a duplicate of {first.key}: marked in mozilla/seamonkey#{duplicate}" in saved.content.decode()
    assert (github.issue(duplicate)["state"], github.issue(duplicate)["state_reason"]) == ("closed", "duplicate")
    assert len(comments(github, duplicate)) == 1
    bug.refresh_from_db()
    assert (bug.status, bug.duplicate_of_id) == ("duplicate", first.pk)  # GitHub's answer, written back here
    assert bug.updated_at.isoformat().replace("+00:00", "Z") == github.issue(duplicate)["updated_at"]  # not the form's
