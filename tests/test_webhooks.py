"""Webhooks: what the trackers push is searchable within seconds, and only what a source owns.

The loopback vendors (tests/upstream) change their data and send the
deliveries their vendor would (tests/upstream/hooks.py: shape, headers,
signature) to `POST /hooks/<kind>`; `manage.py hooks` processes them, as
`serve`'s webhook processor does. Each story starts from a first sync, as a
team's does: the webhook keeps an already synced source fresh.
"""

import io
import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backlog import audit
from backlog.models import Bug, Product, QATest
from connectors import hooks as hooks_module
from connectors.hooks import gate
from connectors.models import Delivery, DeliveryStatus, Source, SyncedRecord, SyncRun
from search import service
from tests.upstream import hooks
from tests.upstream.github import FakeGitHub, seamonkey
from tests.upstream.jira import FakeJira
from tests.upstream.testrail import FakeTestRail

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

SECRET = "a6f1c0e2b9d84d7f9c3e5a1b2c4d6e8f"


@pytest.fixture
def github(monkeypatch):
    fake = seamonkey().start()
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
    out = io.StringIO()
    call_command("sync", "github", "--repo", "mozilla/seamonkey", "--url", fake.url, "--no-progress", stdout=out)
    yield fake
    fake.stop()


@pytest.fixture
def jira(monkeypatch):
    fake = FakeJira.from_gitbugs(30).start()
    monkeypatch.setenv("JIRA_EMAIL", fake.email)
    monkeypatch.setenv("JIRA_API_TOKEN", fake.token)
    monkeypatch.setenv("JIRA_WEBHOOK_SECRET", SECRET)
    call_command("sync", "jira", "--url", fake.url, "--project", "HADOOP", "--no-progress", stdout=io.StringIO())
    yield fake
    fake.stop()


def processed() -> list[Delivery]:
    call_command("hooks", stdout=io.StringIO())
    return list(Delivery.objects.order_by("received_at", "id"))


def keys_found(query: str) -> list[str]:
    return [hit["key"] for hit in service.call("search", {"query": query, "mode": "keyword"})["results"]]


def test_a_new_github_issue_is_found_by_search_once_its_delivery_is_processed(github, client):
    added = github.add(
        "Composer: pasting a table from a spreadsheet freezes the window",
        "Paste 40 rows from LibreOffice Calc into a new message: the composer hangs for a minute.",
        labels=["bug", "area: mail", "severity: high"],
    )
    before = len(github.requests)
    answer = hooks.github(github, "issues", "opened", added["number"], SECRET).through(client)

    assert answer.status_code == 202 and answer.json()["status"] == "accepted"
    assert not Bug.objects.filter(key=f"SEAMONKEY-{added['number']}").exists()  # answered first, processed after
    (delivery,) = processed()
    assert delivery.status == DeliveryStatus.DONE, delivery.outcome
    assert delivery.outcome.startswith("created 1")
    bug = Bug.objects.get(key=f"SEAMONKEY-{added['number']}")
    assert (bug.severity, bug.feature.name) == ("high", "mail")
    assert keys_found("pasting spreadsheet table freezes composer")[0] == bug.key
    # The payload held the issue: nothing was asked of GitHub.
    assert github.requests[before:] == []


def test_edits_duplicates_deletions_and_transfers_arrive_the_way_a_sync_would_write_them(github, client):
    github.edit(13, title="Message filters stop after the first rule when the second one moves mail")
    hooks.github(github, "issues", "edited", 13, SECRET).through(client)
    github.comment(47, "Duplicate of #12")
    hooks.github(github, "issue_comment", "created", 47, SECRET, comment={"body": "Duplicate of #12"}).through(client)
    github.edit(47, state="closed", state_reason="duplicate")
    hooks.github(github, "issues", "closed", 47, SECRET).through(client)
    deleted = dict(github.issue(24))
    github.delete(24)
    hooks.github(github, "issues", "deleted", 24, SECRET, issue=deleted).through(client)
    moved = dict(github.issue(4))
    github.transfer(4, to="mozilla/chatzilla")
    hooks.github(github, "issues", "transferred", 4, SECRET, issue=moved).through(client)

    deliveries = processed()

    assert [d.status for d in deliveries] == [DeliveryStatus.DONE] * 5, [d.outcome for d in deliveries]
    assert Bug.objects.get(key="SEAMONKEY-13").title.endswith("when the second one moves mail")
    # The audit trail says how each state came: the first sync wrote it, the webhook changed it.
    history = audit.history(Bug.objects.get(key="SEAMONKEY-13"))
    assert [(e["what"], e["surface"], e["who"]) for e in history] == [
        ("insert", "sync", "github:mozilla/seamonkey"),
        ("update", "webhook", "github:mozilla/seamonkey"),
    ]
    assert history[1]["changed"]["title"][1].endswith("when the second one moves mail")
    duplicate = Bug.objects.get(key="SEAMONKEY-47")
    assert (duplicate.status, duplicate.duplicate_of.key) == ("duplicate", "SEAMONKEY-12")
    assert not Bug.objects.filter(key__in=["SEAMONKEY-24", "SEAMONKEY-4"]).exists()
    assert not SyncedRecord.objects.filter(key__in=["SEAMONKEY-24", "SEAMONKEY-4"]).exists()
    # The sync after finds nothing the webhooks missed.
    out = io.StringIO()
    call_command("sync", "github:mozilla/seamonkey", "--no-progress", stdout=out)
    run = SyncRun.objects.latest("started_at")
    assert (run.created, run.updated, run.deleted, run.missed) == (0, 0, 0, 0), out.getvalue()


def test_the_same_delivery_twice_is_taken_once_and_changes_nothing_the_second_time(github, client):
    github.edit(13, title="Filters: the second rule never runs")
    delivery = hooks.github(github, "issues", "edited", 13, SECRET)
    first, again = delivery.through(client), delivery.through(client)

    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["status"] == "duplicate"
    assert Delivery.objects.count() == 1
    processed()
    assert delivery.through(client).json()["status"] == "duplicate"  # after processing too
    assert Delivery.objects.count() == 1 and processed()[0].outcome.startswith("created 0, updated 1")


def test_an_older_event_never_overwrites_a_newer_state_and_a_deleted_issue_does_not_come_back(github, client):
    github.edit(13, title="First wording of the filter bug")
    older = hooks.github(github, "issues", "edited", 13, SECRET)
    github.edit(13, title="Second wording of the filter bug")
    newer = hooks.github(github, "issues", "edited", 13, SECRET)
    added = github.add("A crash when a feed has no title", "Subscribe to a feed without a title: crash.")
    opened = hooks.github(github, "issues", "opened", added["number"], SECRET)
    was = dict(github.issue(added["number"]))
    github.delete(added["number"])
    gone = hooks.github(github, "issues", "deleted", added["number"], SECRET, issue=was)

    for delivery in (newer, older, gone, opened):  # as a network may reorder them
        assert delivery.through(client).status_code == 202
    deliveries = processed()

    assert Bug.objects.get(key="SEAMONKEY-13").title == "Second wording of the filter bug"
    assert "unchanged 1" in deliveries[1].outcome
    assert not Bug.objects.filter(key=f"SEAMONKEY-{added['number']}").exists()
    assert not SyncedRecord.objects.filter(upstream_id=str(added["number"])).exists()


def test_an_edit_of_an_issue_never_seen_is_read_from_github_and_an_issue_gone_since_is_not_written(github, client):
    github.edit(13, title="Filters lose the second rule")
    SyncedRecord.objects.filter(upstream_id="13").delete()
    Bug.objects.filter(key="SEAMONKEY-13").delete()  # as if the first sync had never seen it
    edited = hooks.github(github, "issues", "edited", 13, SECRET)
    was = dict(github.issue(31))
    github.delete(31)
    SyncedRecord.objects.filter(upstream_id="31").delete()
    Bug.objects.filter(key="SEAMONKEY-31").delete()
    late = hooks.github(github, "issues", "labeled", 31, SECRET, issue=was)  # sent before the deletion, late
    before = len(github.requests)

    edited.through(client), late.through(client)
    processed()

    assert Bug.objects.get(key="SEAMONKEY-13").title == "Filters lose the second rule"
    assert not Bug.objects.filter(key="SEAMONKEY-31").exists()
    assert (
        github.paths("/repos/mozilla/seamonkey/issues/")[-2:]
        == [
            "/repos/mozilla/seamonkey/issues/13",
            "/repos/mozilla/seamonkey/issues/31",
        ]
        and len(github.requests) - before == 2
    )


def test_bad_deliveries_get_a_clear_4xx_and_write_nothing(github, client, settings):
    added = github.add("A new crash", "It crashes.")
    good = hooks.github(github, "issues", "opened", added["number"], SECRET)
    unsigned = hooks.Delivery(
        "github", {k: v for k, v in good.headers.items() if k != "X-Hub-Signature-256"}, good.body
    )
    settings.WEBHOOK_MAX_BYTES = 64 * 1024
    huge = hooks.github(github, "issues", "opened", added["number"], SECRET, padding="x" * 70_000)
    not_json = hooks.Delivery("github", good.headers, b"{not json")
    not_json = hooks.Delivery(
        "github", {**good.headers, "X-Hub-Signature-256": hooks.signature(SECRET, b"{not json")}, b"{not json"
    )

    answers = {
        "wrong secret": good.resigned("guessed-secret").through(client),
        "no signature": unsigned.through(client),
        "too large": huge.through(client),
        "not JSON": not_json.through(client),
        "unknown kind": hooks.Delivery("gitlab", good.headers, good.body).through(client),
        "a GET": client.get("/hooks/github"),
    }

    assert {what: a.status_code for what, a in answers.items()} == {
        "wrong secret": 401,
        "no signature": 401,
        "too large": 413,
        "not JSON": 400,
        "unknown kind": 404,
        "a GET": 405,
    }
    assert "does not match the body" in answers["wrong secret"].json()["error"]["message"]
    assert "GITHUB_WEBHOOK_SECRET" not in answers["wrong secret"].text  # a stranger learns nothing of the setup
    assert "is missing" in answers["no signature"].json()["error"]["message"]
    assert "/hooks/jira" in answers["unknown kind"].json()["error"]["message"]
    assert Delivery.objects.count() == 0 and processed() == []
    assert not Bug.objects.filter(key=f"SEAMONKEY-{added['number']}").exists()
    gate.flush()  # counted in memory, added to the source by a flush (connectors/hooks/gate.py)
    assert Source.objects.get().hook_refused == 2


def test_without_a_secret_set_no_delivery_is_taken_and_only_the_log_says_why(github, client, monkeypatch, caplog):
    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET")
    answer = hooks.github(github, "issues", "edited", 13, SECRET).through(client)
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "bad_signature"
    assert "GITHUB_WEBHOOK_SECRET" not in answer.text and Delivery.objects.count() == 0
    assert "GITHUB_WEBHOOK_SECRET is empty" in caplog.text  # the operator's log names it


def test_a_flood_of_unsigned_deliveries_reads_and_writes_nothing_but_one_count(github, client):
    """Anyone can POST here: refusing must cost far less than a search. The sources are kept
    in the process a few seconds, and the refusals counted in memory, added by one flush."""
    unsigned = hooks.github(github, "issues", "opened", 13, SECRET).resigned("guessed-secret")
    assert unsigned.through(client).status_code == 401  # the sources read once

    with CaptureQueriesContext(connection) as refusing:
        answers = [unsigned.through(client).status_code for _ in range(50)]
    with CaptureQueriesContext(connection) as flushing:
        gate.flush()

    assert answers == [401] * 50 and refusing.captured_queries == []
    assert [q["sql"].split()[0] for q in flushing.captured_queries].count("UPDATE") == 1
    assert Source.objects.get().hook_refused == 51 and Source.objects.get().hook_refused_at is not None


def test_an_event_for_a_repository_no_source_syncs_is_counted_and_dropped(github, client):
    other = FakeGitHub(owner="mozilla", repo="chatzilla")
    other.add("ChatZilla: /join fails on a server with a password", "It fails.")
    answer = hooks.github(other, "issues", "opened", 1, SECRET).through(client)

    assert answer.status_code == 200 and answer.json()["status"] == "ignored"
    assert "mozilla/chatzilla" in answer.json()["message"]
    assert Delivery.objects.count() == 0 and Source.objects.get().hook_ignored == 1


def test_a_delivery_cannot_write_over_a_record_its_source_does_not_own(github, client):
    intruder = github.add("Owned elsewhere", "An issue whose key a curator's import holds.")
    key = f"SEAMONKEY-{intruder['number']}"
    Bug.objects.create(key=key, product=Product.objects.get(key="SEAMONKEY"), title="A curator's own record")

    hooks.github(github, "issues", "opened", intruder["number"], SECRET).through(client)
    (delivery,) = processed()

    assert Bug.objects.get(key=key).title == "A curator's own record"
    assert "the key is taken by a record this source did not write" in delivery.outcome
    assert not SyncedRecord.objects.filter(key=key).exists()


@pytest.mark.usefixtures("no_back_off")
def test_a_failed_try_writes_nothing_and_is_tried_again(github, client):
    github.edit(13, title="Filters: a later wording")
    SyncedRecord.objects.filter(upstream_id="13").delete()  # so the processor reads the issue from GitHub
    hooks.github(github, "issues", "edited", 13, SECRET).through(client)
    github.fail(500, times=50, path="/repos/mozilla/seamonkey/issues/13")

    (delivery,) = processed()

    assert delivery.status == DeliveryStatus.PENDING and delivery.attempts == 1
    assert "try 1 of 5 failed" in delivery.outcome
    assert Bug.objects.get(key="SEAMONKEY-13").title != "Filters: a later wording"


@pytest.mark.django_db(transaction=True)  # the processor's transaction and the next POST, in two sessions
def test_a_delivery_is_acknowledged_at_once_while_another_waits_on_github(github, client):
    """GitHub gives up on an answer after 10 s: the processor reading an issue
    again from a slow GitHub (inside its transaction) must not hold the next
    delivery's acknowledgement. It did: the processor locked the source's row
    FOR UPDATE, which the new Delivery's foreign key check (FOR KEY SHARE)
    and the last-delivery time's UPDATE both waited for."""
    github.edit(13, title="Filters: read again from a slow GitHub")
    SyncedRecord.objects.filter(upstream_id="13").delete()  # never seen: the processor asks GitHub for it
    Bug.objects.filter(key="SEAMONKEY-13").delete()
    hooks.github(github, "issues", "edited", 13, SECRET).through(client)
    reading, answer = threading.Event(), github.handle

    def slow(request):
        if request.path.endswith("/issues/13"):
            reading.set()
            time.sleep(3)
        return answer(request)

    github.handle = slow
    processor = threading.Thread(target=processed_in_its_own_session)
    processor.start()
    assert reading.wait(10)
    github.edit(21, title="Edited while the processor waits on GitHub")
    began = time.monotonic()
    second = hooks.github(github, "issues", "edited", 21, SECRET).through(client)
    acknowledged = time.monotonic() - began
    began = time.monotonic()  # nor an unsigned one's refusal, counted on the source's row
    forged = hooks.github(github, "issues", "edited", 21, "not-the-secret").through(client)
    refused = time.monotonic() - began
    processor.join(30)

    assert second.status_code == 202 and acknowledged < 1.5, acknowledged
    assert forged.status_code == 401 and refused < 1.5, refused
    assert Bug.objects.get(key="SEAMONKEY-13").title == "Filters: read again from a slow GitHub"
    assert Source.objects.get().hook_received_at is not None
    processed()
    assert Bug.objects.get(key="SEAMONKEY-21").title == "Edited while the processor waits on GitHub"


def processed_in_its_own_session() -> None:
    try:
        call_command("hooks", stdout=io.StringIO())
    finally:
        connections.close_all()


def test_register_webhook_creates_the_repository_hook_once_and_updates_it_after(github):
    url = "https://qa.example.com/hooks/github"
    out = io.StringIO()
    call_command("sync", "github:mozilla/seamonkey", "--register-webhook", url, "--no-progress", stdout=out)
    call_command("sync", "github:mozilla/seamonkey", "--register-webhook", url, "--no-progress", stdout=out)

    (hook,) = github.repos[github.main]["hooks"].values()
    assert hook["config"] == {"url": url, "content_type": "json", "secret": SECRET, "insecure_ssl": "0"}
    assert hook["events"] == ["issues", "issue_comment"] and hook["active"]
    assert f"webhook to {url} created" in out.getvalue() and f"webhook to {url} updated" in out.getvalue()
    with pytest.raises(CommandError, match="ending in /hooks/github"):
        call_command("sync", "github:mozilla/seamonkey", "--register-webhook", "https://qa.example.com/")


def test_a_sync_counts_what_the_webhooks_missed(github, client):
    hooks.github(github, "issues", "edited", 13, SECRET).through(client)  # the source takes webhooks
    processed()
    github.tick(60)
    github.edit(21, title="Edited while the webhook was down")
    github.tick(60)  # the sync comes well after the edit

    call_command("sync", "github:mozilla/seamonkey", "--no-progress", stdout=io.StringIO())

    run = SyncRun.objects.latest("started_at")
    assert (run.updated, run.missed) == (1, 1)


def test_jira_deliveries_are_read_again_by_id_and_follow_creates_edits_links_moves_and_deletions(jira, client):
    new = jira.add("NameNode hangs on startup when the edits log is empty", "The NameNode waits forever.")
    jira.edit("HADOOP-3", summary="DataNode reports the wrong capacity after a disk is replaced")
    jira.link_duplicate("HADOOP-5", "HADOOP-4")
    jira.projects["OTHER"] = {"id": "10011", "key": "OTHER", "name": "Other", "description": ""}
    moved = jira.move("HADOOP-7", "OTHER")
    gone = dict(jira.by_key("HADOOP-9"))
    jira.delete("HADOOP-9")
    deliveries = [
        hooks.jira(jira, "jira:issue_created", SECRET, issue=new),
        hooks.jira(jira, "jira:issue_updated", SECRET, issue=jira.by_key("HADOOP-3")),
        hooks.jira(jira, "issuelink_created", SECRET, link=(jira.by_key("HADOOP-5"), jira.by_key("HADOOP-4"))),
        hooks.jira(jira, "jira:issue_updated", SECRET, issue=moved),  # now OTHER-1: out of the source's project
        hooks.jira(jira, "jira:issue_deleted", SECRET, issue=gone),
    ]

    answers = [delivery.through(client).status_code for delivery in deliveries]
    results = processed()

    assert answers == [202, 202, 202, 200, 202]  # the moved issue is in OTHER: no source syncs it
    assert [r.status for r in results] == [DeliveryStatus.DONE] * 4, [r.outcome for r in results]
    assert Bug.objects.get(key=new["key"]).title.startswith("NameNode hangs on startup")
    assert Bug.objects.get(key="HADOOP-3").title.startswith("DataNode reports the wrong capacity")
    assert Bug.objects.get(key="HADOOP-5").duplicate_of.key == "HADOOP-4"
    assert not Bug.objects.filter(key="HADOOP-9").exists()
    # Each issue was read by id, as the sync reads it (the same fields); the deleted one too,
    # whose deletion is believed once Jira answers 404 for it.
    reads = [r for r in jira.requests if "/issue/" in r.path]
    assert {r.path.rsplit("/", 1)[1] for r in reads} == {
        new["id"],
        jira.by_key("HADOOP-3")["id"],
        jira.by_key("HADOOP-5")["id"],
        jira.by_key("HADOOP-4")["id"],
        gone["id"],
    }
    # A link event names no project: the moved issue's later update came to no source, and HADOOP-7 stays
    # until the sync's sweep finds it gone from the project.
    call_command("sync", "jira:HADOOP@" + jira.url.split("://")[1], "--no-progress", stdout=io.StringIO())
    assert not Bug.objects.filter(key="HADOOP-7").exists()


def test_testrail_case_events_with_the_shared_secret_header(monkeypatch, client):
    fake = FakeTestRail.catalog().start()
    monkeypatch.setenv("TESTRAIL_USER", fake.user)
    monkeypatch.setenv("TESTRAIL_API_KEY", fake.api_key)
    monkeypatch.setenv("TESTRAIL_WEBHOOK_SECRET", SECRET)
    try:
        call_command("sync", "testrail", "--url", fake.url, "--project", "3", "--no-progress", stdout=io.StringIO())
        first, second = sorted(fake.cases)[:2]
        fake.edit(first, title="Sign in with a one-time code sent by SMS or e-mail")
        fake.delete(second)
        answers = [
            hooks.testrail("case_updated", 3, first, SECRET).through(client),
            hooks.testrail("case_deleted", 3, second, SECRET).through(client),
            hooks.testrail("case_updated", 3, first, "not-the-secret").through(client),
            hooks.testrail("case_deleted", 3, first, SECRET).through(client),  # a lie: TestRail still has it
        ]
        results = processed()
    finally:
        fake.stop()

    assert [a.status_code for a in answers] == [202, 202, 401, 202]
    assert [r.status for r in results] == [DeliveryStatus.DONE] * 3, [r.outcome for r in results]
    product = Source.objects.get().product_key
    assert QATest.objects.get(key=f"{product}-C{first}").title.endswith("by SMS or e-mail")
    assert not QATest.objects.filter(key=f"{product}-C{second}").exists()


def test_the_dashboard_shows_the_last_delivery_refusals_and_what_a_sync_fixed(github, client, admin_client):
    hooks.github(github, "issues", "edited", 13, SECRET).through(client)
    hooks.github(github, "issues", "edited", 13, SECRET).resigned("wrong").through(client)
    processed()
    github.tick(60)
    github.edit(21, title="Edited while the webhook was down")
    github.tick(60)
    call_command("sync", "github:mozilla/seamonkey", "--no-progress", stdout=io.StringIO())
    gate.flush()  # what the refusal's flush adds within FLUSH_SECONDS

    page = admin_client.get("/dashboard/").content.decode()

    row = page.split('data-source="github:mozilla/seamonkey"')[1].split("</tr>")[0]
    assert "last delivery" in row and "1 refused (bad signature)" in row
    assert "the last sync fixed 1 record they missed" in row


def test_processed_deliveries_are_kept_for_a_week(github, client, settings):
    hooks.github(github, "issues", "edited", 13, SECRET).through(client)
    hooks.github(github, "issues", "edited", 14, SECRET).through(client)
    processed()
    Delivery.objects.filter(upstream_id="13").update(received_at=timezone.now() - timedelta(days=8))
    hooks.github(github, "issues", "edited", 15, SECRET).through(client)  # waiting: never pruned

    assert hooks_module.prune() == 1
    assert sorted(Delivery.objects.values_list("upstream_id", flat=True)) == ["14", "15"]


@pytest.mark.parametrize(
    "body, said",
    [
        (b'{"action": "opened", "issue": {"number": NaN}}', "not JSON"),
        (b'{"action": "opened", "issue": {"title": "a\\u0000b"}}', "NUL"),
        (b'{"action": "opened", "issue": {"title": "\\ud800"}}', "surrogate"),
        (b'{"action": "opened", "issue": {"number": 1e400}}', "out of range"),  # a float's infinity
    ],
)
def test_a_signed_body_postgresql_cannot_store_is_a_400_not_a_500(github, client, body, said):
    delivery = hooks.Delivery(
        "github",
        {"X-GitHub-Event": "issues", "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": hooks.signature(SECRET, body)},
        body,
    )
    answer = delivery.through(client)
    assert answer.status_code == 400 and said in answer.json()["error"]["message"], answer.content
    assert Delivery.objects.count() == 0


def test_past_a_sources_rate_or_the_backlog_a_delivery_is_told_to_come_back_and_nothing_is_stored(
    github, client, settings
):
    settings.WEBHOOK_RATE_PER_MINUTE = 2
    answers = [hooks.github(github, "issues", "edited", n, SECRET).through(client) for n in (13, 14, 15)]
    assert [a.status_code for a in answers] == [202, 202, 429]
    assert answers[2]["Retry-After"] == "60" and "WEBHOOK_RATE_PER_MINUTE" in answers[2].json()["error"]["message"]

    settings.WEBHOOK_RATE_PER_MINUTE, settings.WEBHOOK_BACKLOG = 3000, 2  # two wait to be processed
    full = hooks.github(github, "issues", "edited", 16, SECRET).through(client)
    assert (
        full.status_code == 503 and full["Retry-After"] == "30" and "WEBHOOK_BACKLOG" in full.json()["error"]["message"]
    )
    assert sorted(Delivery.objects.values_list("upstream_id", flat=True)) == ["13", "14"]


def test_a_deletion_is_believed_only_when_upstream_no_longer_has_the_issue(github, client):
    """A signed "deleted" (forged with a shared secret, replayed, or late) or a late
    "unlabeled" for an issue GitHub still has writes what GitHub says it is now."""
    github.edit(13, title="Filters still stop after the first rule")
    as_it_was = dict(github.issue(13))
    forged = hooks.github(github, "issues", "deleted", 13, SECRET, issue=as_it_was)
    github.delete(24)
    real = hooks.github(github, "issues", "deleted", 24, SECRET, issue={"number": 24})

    assert [forged.through(client).status_code, real.through(client).status_code] == [202, 202]
    outcomes = [d.outcome for d in processed()]

    assert Bug.objects.get(key="SEAMONKEY-13").title == "Filters still stop after the first rule", outcomes
    assert SyncedRecord.objects.filter(upstream_id="13").exists()
    assert not Bug.objects.filter(key="SEAMONKEY-24").exists(), outcomes


def test_a_github_delivery_naming_no_repository_reaches_no_source(github, client):
    github.edit(13, title="Written into every repository's product")
    answer = hooks.github(github, "issues", "edited", 13, SECRET, repository=None).through(client)

    assert answer.status_code == 200 and answer.json()["status"] == "ignored", answer.content
    assert Delivery.objects.count() == 0
    assert Bug.objects.get(key="SEAMONKEY-13").title != "Written into every repository's product"


def test_a_time_to_come_does_not_freeze_an_issue(github, client):
    """An issue sent with updated_at in year 9999 (a lie, or upstream's clock) is written,
    and the true edits after it are written too, by webhook and by sync."""
    lie = {**github.issue(13), "title": "From the future", "updated_at": "9999-12-31T00:00:00Z"}
    hooks.github(github, "issues", "edited", 13, SECRET, issue=lie).through(client)
    processed()
    github.edit(13, title="The true title, edited after")
    hooks.github(github, "issues", "edited", 13, SECRET).through(client)
    outcomes = [d.outcome for d in processed()]

    assert Bug.objects.get(key="SEAMONKEY-13").title == "The true title, edited after", outcomes
    github.edit(13, title="Edited again, found by the sync")
    call_command("sync", "github:mozilla/seamonkey", "--no-progress", stdout=io.StringIO())
    assert Bug.objects.get(key="SEAMONKEY-13").title == "Edited again, found by the sync"
