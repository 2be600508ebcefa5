"""Writing back: a bug filed here lands in the team's GitHub, exactly once, and comes back as the truth.

The story: SeaMonkey's QA team ("seamonkey-qa") syncs mozilla/seamonkey
(tests/upstream/github.py, GitHub's REST API on loopback) and has turned on
write back for it. Wanda is on the team and files what she finds, from
her scripts (REST) and her agent (MCP). Nate is on another team. GitHub
may lose an answer on the way, refuse a draft, turn issues off, or be busy;
whatever it does, one call makes at most one issue, and the record here is
the issue GitHub answered.
"""

import io
import sys
import threading
from datetime import timedelta

import anyio
import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.utils import timezone
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from accounts.models import Scope
from backlog import audit
from backlog.models import Bug
from connectors.models import Delivery, DeliveryStatus, Source
from search import service as search
from tests.upstream import hooks
from tests.upstream.github import FakeGitHub, seamonkey
from writeback import worker
from writeback.models import Status, UpstreamWrite

from .conftest import client_with_token
from .test_mcp import ROOT, server_env

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

SECRET = "a6f1c0e2b9d84d7f9c3e5a1b2c4d6e8f"
ISSUES = "/repos/mozilla/seamonkey/issues"
DRAFT = {
    "product": "SEAMONKEY",
    "title": "Reply-all drops the Cc recipients of a message sent to a list",
    "description": "Replying to all on a list message keeps the list but loses everyone in Cc.",
    "steps": "1. Receive a list message with two people in Cc\n2. Reply All",
    "expected_result": "The list and both Cc recipients are addressed.",
    "actual_result": "Only the list is addressed.",
    "environment": "SeaMonkey 2.53.18.2, Windows 11",
    "severity": "high",
    "labels": ["bug", "area: mail"],
}


@pytest.fixture
def github(monkeypatch, settings):
    fake = seamonkey().start()
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
    settings.WRITEBACK_WAIT_SECONDS = 5
    Group.objects.create(name="seamonkey-qa")
    args = ["--repo", "mozilla/seamonkey", "--url", fake.url, "--team", "seamonkey-qa", "--no-progress"]
    call_command("sync", "github", *args, stdout=io.StringIO())
    Source.objects.update(write_back=True)
    yield fake
    fake.stop()


@pytest.fixture
def wanda(django_user_model):
    user = django_user_model.objects.create_user("wanda", password="a-long-passphrase", first_name="Wanda")
    user.groups.add(Group.objects.get(name="seamonkey-qa"))
    return user


@pytest.fixture
def nate(django_user_model):
    user = django_user_model.objects.create_user("nate", password="another-long-passphrase")
    user.groups.add(Group.objects.create(name="ledgerly-qa"))
    return user


def file(client, draft=DRAFT, key: str | None = None):
    headers = {"Idempotency-Key": key} if key else {}
    return client.post("/api/bugs/file", draft, format="json", headers=headers)


def created(github: FakeGitHub) -> list[dict]:
    """The issues GitHub holds that QA Search filed."""
    return [i for i in github.repos[github.main]["issues"].values() if i["user"]["login"] == github.login]


def posts(github: FakeGitHub) -> int:
    return sum(r.method == "POST" and r.path == ISSUES for r in github.requests)


def due_now() -> None:
    """The back-off waited out."""
    UpstreamWrite.objects.filter(status=Status.PENDING).update(next_try_at=timezone.now() - timedelta(seconds=1))


def test_a_team_member_files_a_bug_that_is_github_s_issue_searchable_at_once(github, wanda, client):
    answer = file(client_with_token(wanda))

    assert answer.status_code == 201, answer.json()
    write = answer.json()
    (issue,) = created(github)
    number = issue["number"]
    assert write["status"] == "sent" and write["attempts"] == 1 and write["error"] is None
    assert (write["upstream_key"], write["record_key"]) == (f"mozilla/seamonkey#{number}", f"SEAMONKEY-{number}")
    assert write["upstream_url"] == f"https://github.com/mozilla/seamonkey/issues/{number}"
    assert answer["Location"] == f"/api/writes/{write['id']}"
    # GitHub got the draft as Markdown, who filed it, and the marker as a hidden line.
    marker = UpstreamWrite.objects.get().marker
    assert issue["body"] == (
        "Replying to all on a list message keeps the list but loses everyone in Cc.\n\n"
        "### Steps to reproduce\n\n1. Receive a list message with two people in Cc\n2. Reply All\n\n"
        "### Expected\n\nThe list and both Cc recipients are addressed.\n\n"
        "### Actual\n\nOnly the list is addressed.\n\n"
        "### Environment\n\nSeaMonkey 2.53.18.2, Windows 11\n\n"
        f"Filed by Wanda through QA Search\n\n<!-- qa-search:write:{marker} -->"
    )
    assert [label["name"] for label in issue["labels"]] == ["bug", "area: mail", "severity: high"]

    # The record is GitHub's issue as a sync reads it: its key, times, severity and feature; no marker.
    bug = Bug.objects.get(key=f"SEAMONKEY-{number}")
    assert (bug.title, bug.severity, bug.status, bug.feature.name) == (DRAFT["title"], "high", "open", "mail")
    assert bug.description.endswith("Filed by Wanda through QA Search") and "qa-search:write" not in bug.description
    assert bug.created_at.isoformat().replace("+00:00", "Z") == issue["created_at"]
    hits = search.call("search", {"query": "reply-all drops cc recipients", "mode": "keyword"}, wanda)["results"]
    assert hits[0]["key"] == bug.key
    assert client_with_token(wanda).get(f"/api/writes/{write['id']}").json() == write

    # GitHub's webhook for the new issue changes nothing.
    hooks.github(github, "issues", "opened", number, SECRET).through(client)
    call_command("hooks", stdout=io.StringIO())
    delivery = Delivery.objects.get()
    assert delivery.status == DeliveryStatus.DONE and "created 0, updated 0" in delivery.outcome, delivery.outcome
    history = audit.history(Bug.objects.get(key=bug.key))
    assert [(e["what"], e["surface"], e["who"]) for e in history] == [("insert", "writeback", "wanda")]


def test_an_answer_lost_on_the_way_is_settled_by_the_marker_and_makes_one_issue(github, wanda, settings):
    settings.WRITEBACK_WAIT_SECONDS = 1
    github.lose_answers(times=1, delay=2)

    answer = file(client_with_token(wanda))

    # GitHub made the issue; its answer did not come in time: the write waits, in doubt.
    assert answer.status_code == 201 and answer.json()["status"] == "pending", answer.json()
    assert len(created(github)) == 1 and not Bug.objects.filter(title=DRAFT["title"]).exists()
    assert "try 1 of" in answer.json()["error"]
    due_now()
    call_command("writeback", stdout=io.StringIO())

    (issue,) = created(github)
    write = UpstreamWrite.objects.get()
    assert posts(github) == 1  # asked for the marker, found it, sent nothing again
    assert (write.status, write.attempts, write.record_key) == (Status.SENT, 2, f"SEAMONKEY-{issue['number']}")
    assert Bug.objects.get(key=write.record_key).title == DRAFT["title"]


def test_the_same_idempotency_key_twice_is_one_write_and_one_issue(github, wanda):
    client = client_with_token(wanda)

    first, again = file(client, key="wanda-cc-1"), file(client, key="wanda-cc-1")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json() and UpstreamWrite.objects.count() == 1 and len(created(github)) == 1
    other = file(client, {**DRAFT, "title": "Another bug"}, key="wanda-cc-1")
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"
    assert "send a new key for a new bug" in other.json()["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_two_senders_at_once_send_a_write_once(github, wanda, settings):
    settings.WRITEBACK_WAIT_SECONDS = 0  # left to the workers
    assert file(client_with_token(wanda)).json()["status"] == "pending"
    github.lose_answers(times=1, delay=0.5)  # a slow answer: both senders are at it meanwhile
    done = []

    def sender():
        done.append(worker.send_due())

    senders = [threading.Thread(target=sender) for _ in range(2)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join(30)

    assert sorted(done) == [0, 1] and posts(github) == 1 and len(created(github)) == 1
    assert UpstreamWrite.objects.get().status == Status.SENT


def test_who_may_file_a_team_member_with_a_token_that_writes_on_a_source_that_writes_back(github, wanda, nate):
    read_only = file(client_with_token(wanda, Scope.READ))
    assert read_only.status_code == 403 and "read-only" in read_only.json()["error"]["message"]

    outsider = file(client_with_token(nate))
    assert outsider.status_code == 404 and "no product 'SEAMONKEY' you can see" in outsider.json()["error"]["message"]

    Source.objects.update(write_back=False)
    off = file(client_with_token(wanda))
    assert off.status_code == 409 and off.json()["error"]["code"] == "write_back_off"
    assert (
        "turns on 'Write back' on it (admin › Connectors › Sources › github:mozilla/seamonkey)"
        in (off.json()["error"]["message"])
    )
    assert posts(github) == 0 and not UpstreamWrite.objects.exists()
    assert client_with_token(nate).get("/api/writes/1").status_code == 404


@pytest.mark.parametrize(
    "refusal, words",
    [
        ("validation", "Validation Failed"),
        ("issues off", "Issues are disabled for this repo"),
        ("no permission", "Resource not accessible by personal access token"),
    ],
)
def test_a_write_github_refuses_fails_with_its_own_words_and_leaves_no_record(github, wanda, refusal, words):
    if refusal == "validation":
        error = {"resource": "Issue", "code": "invalid", "field": "labels"}
        github.fail(422, body={"message": "Validation Failed", "errors": [error]}, path=ISSUES)
    elif refusal == "issues off":
        github.disable_issues()
    else:
        github.may_write = False
    bugs = Bug.objects.count()

    write = file(client_with_token(wanda)).json()

    assert write["status"] == "failed" and words in write["error"], write
    assert (write["record_key"], write["upstream_key"]) == (None, None)
    assert Bug.objects.count() == bugs and created(github) == []
    assert worker.send_due() == 0  # failed stays failed: nothing is sent again


def test_a_busy_github_is_asked_again_after_the_back_off_marker_first(github, wanda):
    github.fail(503, body={"message": "Service Unavailable"}, path=ISSUES)

    write = file(client_with_token(wanda)).json()

    assert write["status"] == "pending" and "server busy (503)" in write["error"]
    assert worker.send_due() == 0  # not before its back-off
    due_now()
    before = len(github.requests)
    assert worker.send_due() == 1
    asked = [(r.method, r.path, r.query.get("sort")) for r in github.requests[before:]]
    assert asked == [("GET", ISSUES, "created"), ("POST", ISSUES, None)]  # the marker first, then the write
    assert UpstreamWrite.objects.get().status == Status.SENT and len(created(github)) == 1


def test_writes_asked_for_while_github_is_down_wait_behind_the_first_and_land_in_order(github, wanda):
    github.fail(503, body={"message": "Service Unavailable"}, times=1000, path=ISSUES)
    client = client_with_token(wanda)
    titles = [f"Offline queue {n}: the draft is kept while GitHub is down" for n in range(4)]
    answers = [file(client, {**DRAFT, "title": title}).json() for title in titles]
    # The first tried and waits out its back-off; the later ones wait behind it, untried.
    assert [(a["status"], a["attempts"]) for a in answers] == [("pending", 1)] + [("pending", 0)] * 3
    due_now()
    assert worker.send_due() == 1  # only the first is tried again, GitHub still down
    assert UpstreamWrite.objects.filter(attempts=0).count() == 3

    github.faults.clear()  # GitHub is back
    due_now()
    assert worker.send_due() == 4
    writes = list(UpstreamWrite.objects.order_by("id"))
    assert [w.status for w in writes] == [Status.SENT] * 4
    numbers = [int(w.upstream_key.rsplit("#", 1)[1]) for w in writes]
    assert numbers == sorted(numbers)
    assert [issue["title"] for issue in sorted(created(github), key=lambda issue: issue["number"])] == titles


@pytest.mark.django_db(transaction=True)
def test_an_agent_checks_for_duplicates_then_files_the_bug_over_mcp(github, wanda):
    """`manage.py mcp --user wanda` over stdio, as her agent runs it."""
    from django.db import connection

    parameters = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--user", "wanda"],
        cwd=str(ROOT),
        env={**server_env(connection.settings_dict["NAME"]), "GITHUB_TOKEN": github.token},
    )
    draft = {key: value for key, value in DRAFT.items() if key not in ("product", "severity", "labels")}

    async def session():
        async with Client(parameters) as client:
            check = await client.call_tool("check_duplicates", {**draft, "product": "SEAMONKEY", "mode": "keyword"})
            filed = await client.call_tool("file_bug", {**DRAFT, "idempotency_key": "agent-1"})
            again = await client.call_tool("file_bug", {**DRAFT, "idempotency_key": "agent-1"})
            return check, filed, again

    check, filed, again = anyio.run(session)

    # Nothing like it is known (the closest share a word or two): the agent files it.
    assert not check.is_error and all(hit["band"] != "high" for hit in check.structured_content["results"])
    assert not filed.is_error, filed.content[0].text
    write = filed.structured_content
    assert write["status"] == "sent" and write["record_key"].startswith("SEAMONKEY-")
    assert again.structured_content == write and len(created(github)) == 1
    assert UpstreamWrite.objects.get().surface == "mcp"
