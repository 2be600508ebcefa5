"""Upstreams that lie, loop and stall: what a sync writes, where its token goes, and when it ends.

The story: Ledgerly's team (product PRD-2, its bug BUG-20) shares the
service with a team that syncs its own trackers. One of those trackers is
hostile or broken: it hands out keys that belong to Ledgerly, names its
repository like Ledgerly's product, redirects to another host, pages in
circles, trickles its answers a byte at a time, and sends dates, ids and
bodies no vendor documents. Whatever it does, Ledgerly's records stay as
they are, the token goes nowhere else, every sync ends in bounded time
with a line saying what was wrong, and every run is stored with its cause.
"""

import io
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from backlog.imports import import_records
from backlog.models import Bug, Product
from connectors import sync as syncing
from connectors.management.commands.sync import Command as SyncCommand
from connectors.models import RunStatus, Source, SyncedRecord, SyncRun
from tests.conftest import VAT_BUG, jsonl
from tests.upstream.github import FakeGitHub, seamonkey
from tests.upstream.hostile import Sink, Stalling
from tests.upstream.jira import FakeJira
from tests.upstream.testio import FakeTestIO

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

SEARCH = "/rest/api/3/search/jql"
LISTING = "/repos/mozilla/seamonkey/issues"


@pytest.fixture
def ledgerly(tramline):
    """Tramline's records, and Ledgerly's VAT bug BUG-20 in PRD-2."""
    assert import_records(jsonl(VAT_BUG).splitlines()).written
    return Bug.objects.get(key="BUG-20")


class LyingJira(FakeJira):
    """A Jira Cloud site whose issues' fields may hold anything: its own
    search orders what it cannot read as the oldest."""

    @staticmethod
    def updated(issue: dict) -> datetime:
        try:
            return datetime.fromisoformat(issue["fields"]["updated"]).astimezone(UTC)
        except (TypeError, ValueError, OverflowError):
            return datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture
def host(monkeypatch):
    """The hostile team's Jira project HOST, five ordinary bugs in it."""
    fake = LyingJira(project="HOST", project_name="Host tracker")
    for n in range(5):
        fake.add(f"Host bug number {n}", "It fails.")
    fake.start()
    monkeypatch.setenv("JIRA_EMAIL", fake.email)
    monkeypatch.setenv("JIRA_API_TOKEN", fake.token)
    yield fake
    fake.stop()


def jira_sync(jira: FakeJira, *args: str, project: str = "HOST") -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "sync", "jira", "--url", jira.url, "--project", project, "--no-progress", *args, stdout=out, stderr=err
    )
    return out.getvalue(), err.getvalue()


@pytest.fixture
def github(monkeypatch):
    fake = seamonkey().start()
    monkeypatch.setenv("GITHUB_TOKEN", fake.token)
    yield fake
    fake.stop()


def github_sync(github: FakeGitHub, *args: str, repo: str = "mozilla/seamonkey", url: str | None = None) -> str:
    out = io.StringIO()
    call_command(
        "sync", "github", "--repo", repo, "--url", url or github.url, "--no-progress", *args, stdout=out, stderr=out
    )
    return out.getvalue()


@pytest.fixture
def sink():
    fake = Sink().start()
    yield fake
    fake.stop()


def ledgerly_untouched(bug: Bug) -> None:
    bug.refresh_from_db()
    assert (bug.product.key, bug.title, bug.severity) == ("PRD-2", VAT_BUG["title"], "critical")
    assert Product.objects.get(key="PRD-2").name == "Ledgerly"
    assert not SyncedRecord.objects.filter(key__iexact="BUG-20").exists()


# -- another product's records ---------------------------------------------------------------------------


def test_an_issue_with_another_products_key_is_refused_the_page_goes_on_and_the_sweep_leaves_it(host, ledgerly):
    hostile = host.add("Taken over", "Written over Ledgerly's bug")
    hostile["key"] = "BUG-20"

    out, err = jira_sync(host, "--product", "HOSTC")

    assert "created 5," in out and "skipped 1" in out  # its own five bugs
    assert "BUG-20 was not written: the key is taken by a record this source did not write" in err
    ledgerly_untouched(ledgerly)
    assert Bug.objects.filter(product__key="HOSTC").count() == 5

    host.delete("BUG-20")  # gone upstream: the sweep deletes only what this source wrote
    out, _ = jira_sync(host, "--product", "HOSTC")
    assert "deleted 0" in out
    ledgerly_untouched(ledgerly)


def test_a_second_source_with_the_same_keys_takes_nothing_from_the_first(host, monkeypatch):
    jira_sync(host)
    mirror = LyingJira(project="HOST", project_name="A mirror").start()
    try:
        for n in range(5):
            mirror.add(f"Mirror's own words {n}", "Other text.")
        mirror.add("One of its own")
        out, err = jira_sync(mirror, "--product", "MIRROR")
    finally:
        mirror.stop()

    assert "created 1," in out and "skipped 5" in out  # HOST-6; HOST-1..5 are the first source's
    assert err.count("the key is taken by a record this source did not write") == 5
    assert set(Bug.objects.filter(product__key="HOST").values_list("title", flat=True)) == {
        f"Host bug number {n}" for n in range(5)
    }
    assert Bug.objects.get(key="HOST-6").product.key == "MIRROR"


def test_a_repository_named_like_an_existing_product_is_refused_unless_the_operator_names_it(github, ledgerly):
    github.add_repo("someorg/prd-2", "Not Ledgerly at all")
    github.main = "someorg/prd-2"
    github.add("An issue of someorg", "Its body")

    with pytest.raises(CommandError, match=r"product PRD-2 exists and was not made by this source.*--product PRD-2"):
        github_sync(github, repo="someorg/prd-2")
    assert not Source.objects.exists() and Bug.objects.filter(product__key="PRD-2").count() == 1

    Group.objects.create(name="Tramline QA")
    with pytest.raises(CommandError, match=r"--team sets who sees a product this source makes; PRD-2 existed"):
        github_sync(github, "--product", "PRD-2", "--team", "Tramline QA", repo="someorg/prd-2")
    assert not Source.objects.exists()

    out = github_sync(github, "--product", "PRD-2", repo="someorg/prd-2")

    assert "created 1," in out
    ledgerly = Product.objects.get(key="PRD-2")
    assert (ledgerly.name, ledgerly.description) == ("Ledgerly", "Invoicing for small firms")  # never renamed
    assert not SyncedRecord.objects.filter(kind="product").exists()  # fed, not owned


# -- credentials stay at their origin ----------------------------------------------------------------------


def test_a_redirect_to_another_host_is_refused_and_the_token_never_reaches_it(github, sink):
    github.fail(301, times=1, headers={"Location": f"{sink.url}/repos/mozilla/seamonkey"}, path="/repos/")

    with pytest.raises(CommandError, match=r"pointed to 127\.0\.0\.1:\d+, another host.*credentials stay"):
        github_sync(github)

    assert sink.requests == [] and not Product.objects.filter(name="sink").exists()


def test_a_next_link_to_another_host_is_refused_with_the_pages_before_kept(github, sink):
    github.fail(
        200,
        times=1,
        body=[github.issue(1), github.issue(3)],  # out of order: the listing goes on by its next link
        headers={"Link": f'<{sink.url}/repos/mozilla/seamonkey/issues?page=2>; rel="next"'},
        path="/repos/mozilla/seamonkey/issues",
    )
    with pytest.raises(CommandError, match=r"another host than the one configured"):
        github_sync(github)

    assert sink.credentials_seen() == [] and sink.requests == []
    run = SyncRun.objects.get()
    assert run.status == RunStatus.FAILED and "another host" in run.errors[-1]


def test_a_url_with_a_password_is_refused_everywhere_it_could_be_stored(host):
    with_password = host.url.replace("http://", "http://svc:hunter2@")

    with pytest.raises(CommandError, match=r"--url holds a user or password"):
        call_command("sync", "jira", "--url", with_password, "--project", "HOST", "--no-progress", stdout=io.StringIO())
    assert not Source.objects.exists() and host.requests == []

    source = Source(kind="jira", url=with_password, project="HOST", name="jira:HOST", token_env="JIRA_API_TOKEN")
    with pytest.raises(ValidationError, match="take the user and password out of the URL"):
        source.full_clean()
    source.save()  # as an older version could have: a sync refuses it and says why
    with pytest.raises(syncing.SyncError, match=r"holds a user or password") as refused:
        syncing.run(source)
    assert "hunter2" not in str(refused.value)


# -- syncs that end ----------------------------------------------------------------------------------------


def test_a_jira_page_token_that_never_changes_ends_the_listing(host):
    jira_sync(host)
    page = {"issues": [host.shaped(next(iter(host.issues.values())), ["*navigable"])], "isLast": False}
    host.fail(200, times=1000, body={**page, "nextPageToken": "SAME"}, path=SEARCH)
    sent = len(host.requests)

    with pytest.raises(CommandError, match=r"Jira sent a page it had sent before \(.*SAME.*\)"):
        jira_sync(host)

    assert len(host.requests) - sent <= 4  # the check's search, its project, two pages: then it stops


def test_a_github_next_link_to_itself_ends_the_listing(github):
    loop = f"{github.url}/repos/mozilla/seamonkey/issues?page=2"
    github.fail(
        200,
        times=1000,
        body=[github.issue(1)],
        headers={"Link": f'<{loop}>; rel="next"'},
        path="/repos/mozilla/seamonkey/issues",
    )

    with pytest.raises(CommandError, match=r"GitHub sent a page it had sent before"):
        github_sync(github)

    assert len(github.requests) <= 5


def test_an_upstream_that_trickles_a_byte_at_a_time_is_cut_at_the_request_deadline(settings, monkeypatch):
    settings.SYNC_HTTP_DEADLINE = 2
    monkeypatch.setenv("JIRA_EMAIL", "bot@example.com")
    monkeypatch.setenv("JIRA_API_TOKEN", "t")
    slow = Stalling("trickle", interval=0.3).start()  # a byte every 0.3 s: the per-byte timeout never trips
    try:
        began = time.monotonic()
        with pytest.raises(CommandError, match=r"sent no whole answer within 2 s \(SYNC_HTTP_DEADLINE"):
            jira_sync(slow)
        took = time.monotonic() - began
    finally:
        slow.stop()
    assert took < 6 and slow.connections == 1  # one try, not retried: a deadline is not a hiccup


def test_a_sync_ends_at_its_own_deadline_whatever_the_retries_ask(host, settings):
    jira_sync(host)
    settings.SYNC_RUN_DEADLINE = 2
    settings.SYNC_HTTP_MAX_WAIT = 30
    host.fail(503, times=1000, headers={"Retry-After": "30"}, path=SEARCH)

    began = time.monotonic()
    with pytest.raises(CommandError, match=r"SYNC_RUN_DEADLINE|sync again later"):
        jira_sync(host)

    assert time.monotonic() - began < 6
    assert SyncRun.objects.order_by("-started_at").first().status == RunStatus.FAILED


# -- upstream faults end in one line, and a stored run ----------------------------------------------------


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("updated", "9999-12-31T23:59:59.000-1200", "is out of range in UTC"),
        ("created", "0001-01-01T00:00:00.000+0100", "is out of range in UTC"),
        ("created", "yesterday-ish", "is not an ISO 8601 time"),
        ("key", "HOST-" + "9" * 70, "is not a Jira issue key"),
        ("id", "1" * 150, "its upstream id is longer than 100 characters"),
        ("id", "-5", "is not a Jira issue id"),
        ("issuelinks", "not a list", "AttributeError"),
    ],
)
def test_an_issue_that_cannot_be_read_is_skipped_and_named_the_rest_is_written(host, field, value, why):
    bad = host.add("Unreadable", "Its fields lie")
    if field in ("key", "id"):
        bad[field] = value
    else:
        bad["fields"][field] = value

    out, err = jira_sync(host)

    assert "created 5," in out and "skipped 1" in out  # the five others
    assert why in err
    run = SyncRun.objects.get()
    assert run.status == RunStatus.OK and any(why in error for error in run.errors)


@pytest.mark.parametrize(
    "status, body, headers, said",
    [
        (200, "<html><body>Sign in</body></html>", {"Content-Type": "text/html"}, r"did not answer JSON \(text/html"),
        (301, "", {"Location": "/login"}, r"answered 301, a redirect to /login; redirects are not followed"),
        (302, b"", {}, r"answered 302, a redirect to nowhere"),
        (200, "[" * 5000 + "]" * 5000, {"Content-Type": "application/json"}, r"JSON nested too deeply"),
        (200, [1, 2], {}, r"sent a list where an object was expected"),
        (400, {"errorMessages": 5, "errors": ["a", "list"]}, {}, r"400 from http://127\.0\.0\.1:\d+/rest/api/3/"),
    ],
)
def test_an_answer_that_cannot_be_read_ends_the_sync_in_one_line_with_its_run_stored(host, status, body, headers, said):
    jira_sync(host)
    host.fail(status, times=1, body=body, headers=headers, path=SEARCH)

    with pytest.raises(CommandError, match=said) as failed:
        jira_sync(host)

    assert "\n" not in str(failed.value) and "Traceback" not in str(failed.value)
    run = SyncRun.objects.order_by("-started_at").first()
    assert run.status == RunStatus.FAILED and run.errors and "interrupted" not in run.errors[-1]


@pytest.mark.parametrize("retry_after", ["soon", "-5", "Wed, 99 Foo 2026 25:61:00 GMT"])
def test_a_retry_after_that_is_no_time_is_waited_as_a_back_off(host, retry_after):
    host.fail(429, times=1, headers={"Retry-After": retry_after}, path=SEARCH)

    out, _ = jira_sync(host)

    assert "created 5," in out


@pytest.mark.usefixtures("no_back_off")
def test_a_connection_closed_in_the_middle_of_a_body_is_tried_again_then_said(monkeypatch):
    monkeypatch.setenv("JIRA_EMAIL", "bot@example.com")
    monkeypatch.setenv("JIRA_API_TOKEN", "t")
    cut = Stalling("cut").start()
    try:
        with pytest.raises(CommandError, match=r"could not be reached \(the connection closed in the middle"):
            jira_sync(cut)
    finally:
        cut.stop()
    assert cut.connections == 3  # quick_retries: three tries


def test_a_check_that_meets_html_on_a_configured_source_stores_the_run_with_its_cause(host):
    jira_sync(host)
    source = Source.objects.get()
    host.fail(200, times=5, body="<html>maintenance</html>", headers={"Content-Type": "text/html"})

    with pytest.raises(syncing.SyncError, match="did not answer JSON"):
        syncing.run(source)

    run = source.runs.order_by("-started_at").first()
    assert run.status == RunStatus.FAILED and "did not answer JSON" in run.errors[-1]


def test_a_github_listing_that_is_not_a_list_and_a_number_that_is_no_number(github):
    github.issue(2)["number"] = "abc"
    out = github_sync(github)
    assert "skipped 1" in out and "number 'abc' is not a number" in out.replace('"', "'")

    github.fail(200, times=1, body={"message": "not a list"}, path="/repos/mozilla/seamonkey/issues")
    with pytest.raises(CommandError, match=r"sent an object where a list was expected"):
        github_sync(github)

    out = github_sync(github, "--sweep")  # the sweep lists "abc" too, and leaves it be
    assert "deleted 0" in out


def test_the_same_repository_on_two_api_hosts_is_two_sources(github):
    github_sync(github)
    other = seamonkey().start()
    try:
        # The same repository name on another API host: a source of its own, its own name.
        with pytest.raises(CommandError, match=r"product SEAMONKEY exists and was not made by this source"):
            github_sync(other, url=other.url)
        out = github_sync(other, "--product", "SEAMONKEY-GHE", url=other.url)
    finally:
        other.stop()
    assert "created" in out
    assert sorted(Source.objects.values_list("name", flat=True)) == [
        "github:mozilla/seamonkey",
        f"github:mozilla/seamonkey@{other.url.split('://')[1]}",
    ]


def test_a_time_in_the_far_future_never_becomes_the_checkpoint(host):
    late = host.add("From the future", "Its clock is wrong")
    late["fields"]["updated"] = "2999-01-01T00:00:00.000+0000"

    jira_sync(host)

    assert Source.objects.get().checkpoint <= datetime.now(UTC)


# -- a listing a sweep trusts ------------------------------------------------------------------------------


def test_testio_bugs_paged_below_what_was_asked_without_a_count_are_read_to_the_empty_page(monkeypatch):
    testio = FakeTestIO.orbit_pay().start()
    monkeypatch.setenv("TESTIO_TOKEN", testio.token)
    testio.bug_page_cap, testio.bug_meta = 100, False
    try:
        call_command("sync", "testio", "--url", testio.base, "--project", "4711", "--no-progress", stdout=io.StringIO())
    finally:
        testio.stop()
    assert Bug.objects.count() == len(testio.bugs) > 100


def test_a_sweep_that_would_delete_most_records_stops_unless_allowed(host, settings):
    for n in range(40):
        host.add(f"Another host bug {n}")
    jira_sync(host)
    settings.SYNC_SWEEP_MIN_RECORDS = 10
    for issue in list(host.issues.values())[:30]:
        host.delete(issue["key"])

    with pytest.raises(CommandError, match=r"would delete 30 of the 45 records .* more than 20%.*--allow-mass-delete"):
        jira_sync(host)
    assert Bug.objects.filter(product__key="HOST").count() == 45

    out, _ = jira_sync(host, "--allow-mass-delete")
    assert "deleted 30" in out and Bug.objects.filter(product__key="HOST").count() == 15


# -- the schedule ------------------------------------------------------------------------------------------


def test_a_source_that_keeps_failing_is_asked_less_often():
    source = Source.objects.create(
        name="flaky", kind="jira", url="https://flaky.example", project="F", token_env="T", schedule_minutes=30
    )
    now = datetime.now(UTC)
    for minutes_ago in (200, 130, 60):  # three failures in a row, the last an hour ago
        SyncRun.objects.create(source=source, started_at=now - timedelta(minutes=minutes_ago), status=RunStatus.FAILED)

    assert not source.due(now)  # 30 minutes doubled twice: two hours after the last try
    assert source.due(now + timedelta(minutes=61))
    SyncRun.objects.create(source=source, started_at=now, status=RunStatus.OK)
    assert source.due(now + timedelta(minutes=30))  # a good run: back to its schedule


def test_a_url_without_a_scheme_is_one_line(host):
    with pytest.raises(CommandError, match=r"is not an http\(s\) address: give it whole, like https://example"):
        call_command(
            "sync", "jira", "--url", "example.atlassian.net", "--project", "HOST", "--no-progress", stdout=io.StringIO()
        )


@pytest.mark.django_db(transaction=True)
def test_under_watch_a_source_stuck_on_a_slow_upstream_never_delays_another(host, settings, monkeypatch):
    settings.SYNC_HTTP_DEADLINE = 60
    monkeypatch.setenv("STUCK_EMAIL", "bot@example.com")
    monkeypatch.setenv("STUCK_TOKEN", "t")
    slow = Stalling("trickle", interval=0.5).start()
    stuck = Source.objects.create(
        name="stuck", kind="jira", url=slow.url, project="SLOW", user_env="STUCK_EMAIL", token_env="STUCK_TOKEN"
    )
    good = Source.objects.create(
        name="good", kind="jira", url=host.url, project="HOST", user_env="JIRA_EMAIL", token_env="JIRA_API_TOKEN"
    )
    worker = SyncCommand(stdout=io.StringIO(), stderr=io.StringIO())
    try:
        worker.round()  # the stuck source first, by its id: each starts in a thread of its own
        worker.syncing[good.pk].join(timeout=30)

        assert Bug.objects.filter(product__key="HOST").count() == 5
        assert worker.syncing[stuck.pk].is_alive()  # still reading its first answer, a byte at a time
        worker.round()  # a minute later: the stuck one is not started twice
        assert [thread.name for thread in threading.enumerate()].count("sync stuck") == 1
    finally:
        slow.stop()
        worker.wait()
    assert stuck.runs.get().status == RunStatus.FAILED and good.runs.get().status == RunStatus.OK
