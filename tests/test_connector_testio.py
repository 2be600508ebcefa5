"""Syncing TestIO: Orbit Pay, a mobile wallet tested by the crowd every week,
served as the TestIO Customer API on loopback (tests/upstream/testio.py).

The story: Orbit Pay's QA lead points the service at TestIO product 4711.
The first sync brings a year of weekly exploratory tests (Android and iOS
in turn) and the bugs testers filed in them. Then the customer accepts a
bug of the test still running, a bug of an old test is deleted, and the
release 5.53 test starts with two bugs; the second sync reads only the
newest page of tests, refreshes the bugs of the tests still moving, and
the sweep removes the deleted bug.
"""

import io
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from backlog.models import Bug, Feature, Product, QATest
from connectors.models import RunStatus, Source, SyncedRecord, SyncRun
from connectors.sources import testio as connector
from search import service
from tests.upstream.testio import PUSH, QR, FakeTestIO

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]

TESTS, BUGS, FEATURES = 52, 127, 5
# Three pages of tests, and the empty fourth that ends the listing: it has no count,
# and a page shorter than asked is not its end (a server may serve fewer).
PAGES = [f"/products/4711/exploratory_tests?page={n}&per_page=25" for n in (1, 2, 3, 4)]
ALL_BUGS = "/bugs?filter_product_ids=4711&page=1&per_page=500"


@pytest.fixture
def testio(monkeypatch):
    fake = FakeTestIO.orbit_pay().start()
    monkeypatch.setenv("TESTIO_TOKEN", fake.token)
    yield fake
    fake.stop()


def sync(testio: FakeTestIO, *args: str, product: str = "4711") -> str:
    out = io.StringIO()
    call_command(
        "sync",
        "testio",
        "--url",
        testio.base,
        "--project",
        product,
        "--no-progress",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def asked(testio: FakeTestIO, since: int = 0) -> list[str]:
    """The requests made from the `since`th on, as path and query."""
    return [
        r.path.removeprefix("/customer/v2")
        + ("?" + "&".join(f"{k}={v}" for k, v in r.query.items()) if r.query else "")
        for r in testio.requests[since:]
    ]


def bugs_of(testio: FakeTestIO, *tests: dict) -> str:
    ids = ",".join(str(test["id"]) for test in tests)
    return f"/bugs?filter_product_ids=4711&filter_test_cycle_ids={ids}&page=1&per_page=500"


def test_a_first_sync_brings_every_test_and_bug_with_its_feature_and_devices(testio):
    newest = testio.tests_of(4711)[0]
    crash = next(b for b in testio.bugs.values() if b["test"]["id"] == newest["id"])

    out = sync(testio)

    assert f"created {FEATURES + TESTS + BUGS}, updated 0, deleted 0" in out
    assert Product.objects.get(key="ORBIT-PAY").name == "Orbit Pay"
    assert (QATest.objects.count(), Bug.objects.count(), Feature.objects.count()) == (TESTS, BUGS, FEATURES)
    # Every test newest first (four pages), the bugs of 25 tests a request, oldest tests first; then the sweep.
    oldest_first = list(reversed(testio.tests_of(4711)))
    assert asked(testio) == [
        "/products/4711",
        *PAGES,
        bugs_of(testio, *oldest_first[:25]),
        bugs_of(testio, *oldest_first[25:50]),
        bugs_of(testio, *oldest_first[50:]),
        *PAGES,
        ALL_BUGS,
    ]
    assert {r.headers["authorization"] for r in testio.requests} == {"Token testio-token"}

    bug = Bug.objects.get(key=f"ORBIT-PAY-{crash['id']}")
    assert (bug.title, bug.severity, bug.status) == (
        "App crashes when sending money to a contact with an emoji in the name",
        "critical",
        "open",
    )
    assert (bug.test.key, bug.feature.key, bug.feature.name) == (
        f"ORBIT-PAY-T{newest['id']}",
        "ORBIT-PAY.send-money",
        "Send money",
    )
    assert bug.steps == "Open Send\nTap 'Choose contact'\nPick a contact named 'Mom 💐'"
    assert bug.environment == "Samsung Galaxy S23, Android 14 (Smartphones)"
    assert (bug.actual_result, bug.expected_result) == (
        "The app closes as soon as the contact is picked",
        "The amount screen opens for the contact",
    )
    assert bug.created_at == datetime.fromisoformat(crash["reported_at"])
    assert bug.raw_data["author"] == {"name": "mkowalska"} and bug.raw_data["test"]["id"] == newest["id"]

    test = QATest.objects.get(key=f"ORBIT-PAY-T{newest['id']}")
    assert (test.title, test.status, test.feature.name) == (
        "Release 5.52 exploratory test (Android)",
        "active",
        "Send money",
    )
    assert test.description == (
        "Goal: Find functional bugs in Orbit Pay 5.52 before it ships to the stores\n\n"
        "Instructions: Use the test account from the test environment. Top up with the sandbox card "
        "4111 1111 1111 1111. Record a video for every crash.\n\n"
        "Out of scope: Card issuing and the web dashboard\n\nFeatures: Send money"
    )
    assert test.created_at == datetime.fromisoformat(newest["start_at"])
    statuses = {status: QATest.objects.filter(status=status).count() for status in ("active", "archived")}
    assert statuses == {"active": 2, "archived": 50}  # running and customer_finalized; archived and cancelled
    by_status = {s: Bug.objects.filter(status=s).count() for s in ("open", "accepted", "rejected", "duplicate")}
    assert by_status == {"open": 29, "accepted": 86, "rejected": 8, "duplicate": 4}  # duplicate: rejected as known
    visual = next(b for b in testio.bugs.values() if b["severity"] == "visual")
    assert Bug.objects.get(key=f"ORBIT-PAY-{visual['id']}").severity == "low"
    # Found by search like any imported record: by what the tester saw, and on which device.
    hits = service.call("search", {"query": "charged twice 3-D Secure", "mode": "keyword"})["results"]
    assert hits[0]["title"] == "Top-up charged twice after 3-D Secure times out"


def test_the_second_sync_reads_the_newest_page_and_follows_an_edit_a_deletion_and_a_new_test(testio):
    sync(testio)
    sent = len(testio.requests)
    week0, week1, week2, week3 = testio.tests_of(4711)[:4]  # running, finalized, archived 12 and 19 days ago
    accepted = next(b for b in testio.bugs.values() if b["test"]["id"] == week0["id"])
    testio.edit_bug(accepted["id"], status="accepted")
    old = testio.tests_of(4711)[40]
    deleted = next(b for b in testio.bugs.values() if b["test"]["id"] == old["id"])
    testio.delete_bug(deleted["id"])
    start = testio.tick(60)
    new = testio.add_test(
        4711,
        "Release 5.53 exploratory test (iOS)",
        features=[QR, PUSH],
        start=start,
        end=start + timedelta(days=3),
        status="running",
        platform=("ios", "iOS"),
        goal="Find functional bugs in the new QR checkout of Orbit Pay 5.53",
    )
    first = testio.add_bug(
        new["id"],
        "Paying a QR code twice in a row shows the first receipt again",
        feature=QR,
        actual="The receipt of the first payment is shown",
        expected="The second receipt",
        steps=["Pay a QR code", "Pay another QR code"],
        reported=start + timedelta(hours=2),
        device=("Apple", "iPhone 15", "iOS 18", "Smartphones"),
        severity="high",
    )
    second = testio.add_bug(
        new["id"],
        "No notification for a QR payment made offline",
        feature=PUSH,
        actual="Nothing is notified once back online",
        expected="A notification",
        steps=["Turn on airplane mode", "Pay a QR code", "Turn off airplane mode"],
        reported=start + timedelta(hours=3),
        device=("Apple", "iPhone 15", "iOS 18", "Smartphones"),
        severity="low",
    )

    out = sync(testio, "--sweep")  # by hand, TestIO's costly sweep runs only when asked or due

    assert "created 3, updated 1, deleted 1" in out
    # Page 1 holds week 3's test, synced before and settled: the walk stops there. The bugs asked
    # for are those of the tests still moving (ended under 14 days ago, or open) and the new one.
    assert asked(testio, sent) == [
        "/products/4711",
        PAGES[0],
        bugs_of(testio, week2, week1, week0, new),
        *PAGES,  # the sweep
        ALL_BUGS,
    ]
    assert week3 in testio.tests_of(4711)[:25]
    run = SyncRun.objects.order_by("-started_at").first()
    assert run.fetched == 25 + 3 + 4 + 1 + 2 and run.requests == 8  # the page's tests, the bugs of four
    assert Bug.objects.get(key=f"ORBIT-PAY-{accepted['id']}").status == "accepted"
    assert not Bug.objects.filter(key=f"ORBIT-PAY-{deleted['id']}").exists()
    assert not SyncedRecord.objects.filter(kind="bug", upstream_id=str(deleted["id"])).exists()
    added = {
        b.key: (b.test.key, b.feature.name, b.severity) for b in Bug.objects.filter(test__key=f"ORBIT-PAY-T{new['id']}")
    }
    assert added == {
        f"ORBIT-PAY-{first['id']}": (f"ORBIT-PAY-T{new['id']}", "Pay by QR code", "high"),
        f"ORBIT-PAY-{second['id']}": (f"ORBIT-PAY-T{new['id']}", "Payment notifications", "low"),
    }
    assert QATest.objects.get(key=f"ORBIT-PAY-T{new['id']}").feature is None  # a test of two features
    assert (QATest.objects.count(), Bug.objects.count()) == (TESTS + 1, BUGS + 1)

    # A third sync with nothing new writes nothing.
    assert "created 0, updated 0, deleted 0" in sync(testio)


def test_a_test_left_open_long_after_it_ended_is_followed_until_it_is_archived(testio):
    forgotten = testio.tests_of(4711)[33]  # on page 2: it ended 33 weeks ago, and the customer never closed it
    forgotten["status"] = "customer_finalized"
    week0, week1, week2 = testio.tests_of(4711)[:3]
    sync(testio)
    assert QATest.objects.get(key=f"ORBIT-PAY-T{forgotten['id']}").status == "active"
    sent = len(testio.requests)

    sync(testio, "--no-sweep")

    # Held open, so the walk goes on to page 2 to see it, and its bugs are read again.
    assert asked(testio, sent) == [
        "/products/4711",
        *PAGES[:2],
        bugs_of(testio, forgotten),
        bugs_of(testio, week2, week1, week0),
    ]

    forgotten["status"] = "archived"
    sent = len(testio.requests)
    sync(testio, "--no-sweep")

    assert QATest.objects.get(key=f"ORBIT-PAY-T{forgotten['id']}").status == "archived"
    assert asked(testio, sent) == ["/products/4711", *PAGES[:2], bugs_of(testio, week2, week1, week0)]
    sent = len(testio.requests)
    sync(testio, "--no-sweep")
    assert asked(testio, sent) == ["/products/4711", PAGES[0], bugs_of(testio, week2, week1, week0)]


def test_a_late_edit_to_a_settled_tests_bug_waits_for_a_full_sync(testio):
    """The rule's price: a test archived weeks ago is not asked for its bugs
    again; the customer's late verdict on one arrives with `--full`."""
    sync(testio)
    settled = testio.tests_of(4711)[10]
    bug = next(b for b in testio.bugs.values() if b["test"]["id"] == settled["id"])
    testio.edit_bug(bug["id"], status="rejected", known=True)
    key = f"ORBIT-PAY-{bug['id']}"
    before = Bug.objects.get(key=key).status

    assert "updated 0" in sync(testio)
    assert Bug.objects.get(key=key).status == before != "duplicate"

    sent = len(testio.requests)
    out = sync(testio, "--full", "--no-sweep")

    assert "created 0, updated 1, deleted 0" in out
    assert Bug.objects.get(key=key).status == "duplicate"
    assert asked(testio, sent)[:5] == ["/products/4711", *PAGES]


def test_bad_credentials_and_an_unknown_product_write_nothing(testio, monkeypatch):
    monkeypatch.setenv("TESTIO_TOKEN", "expired-token")
    with pytest.raises(
        CommandError,
        match=r"TestIO refused the credentials \(401 from .*/customer/v2/products/4711: "
        r"Invalid API token.*\); check the API token in TESTIO_TOKEN",
    ):
        sync(testio)
    monkeypatch.setenv("TESTIO_TOKEN", testio.token)
    with pytest.raises(
        CommandError,
        match=r"TestIO has no product '999', or the token cannot see it "
        r"\(404 .*Product with id 999 not found\); nothing was written",
    ):
        sync(testio, product="999")
    monkeypatch.delenv("TESTIO_TOKEN")
    with pytest.raises(CommandError, match="TESTIO_TOKEN is not set"):
        sync(testio)
    assert not Source.objects.exists() and not Product.objects.exists()
    assert not QATest.objects.exists() and not Bug.objects.exists()
    assert asked(testio) == ["/products/4711", "/products/999"]  # each stopped at its first request


def test_429_is_retried_after_the_wait_the_api_asks_for(testio):
    testio.fail(
        429,
        times=2,
        headers={"Retry-After": "1"},
        path="/customer/v2/bugs",
        body={"error": "Rate limit exceeded. Retry in 1 second."},
    )

    out = sync(testio)

    assert f"created {FEATURES + TESTS + BUGS}" in out and Bug.objects.count() == BUGS
    arrivals = [r.at for r in testio.requests if r.path == "/customer/v2/bugs"][:3]
    assert arrivals[1] - arrivals[0] >= 0.95 and arrivals[2] - arrivals[1] >= 0.95


@pytest.mark.usefixtures("no_back_off")
def test_a_server_that_dies_mid_sync_loses_nothing_and_the_next_sync_completes(testio):
    testio.die_after(7)  # the product, four pages of tests, the bugs of the 50 oldest tests

    with pytest.raises(CommandError, match="could not be reached.*connection refused"):
        sync(testio)

    source = Source.objects.get()
    oldest_first = list(reversed(testio.tests_of(4711)))
    written = {f"ORBIT-PAY-T{t['id']}" for t in oldest_first[:50]}
    assert set(QATest.objects.values_list("key", flat=True)) == written  # the two newest wait
    their_bugs = [b for b in testio.bugs.values() if f"ORBIT-PAY-T{b['test']['id']}" in written]
    assert Bug.objects.count() == len(their_bugs) == BUGS - 5
    assert source.checkpoint is None  # not a complete pass: the next sync is a full one again
    assert SyncRun.objects.get().status == RunStatus.FAILED

    testio.revive()
    out = sync(testio)

    assert "created 7, updated 0, deleted 0" in out  # the two newest tests and their 1 + 4 bugs
    assert (QATest.objects.count(), Bug.objects.count()) == (TESTS, BUGS)
    assert Source.objects.get().checkpoint is not None


def test_a_server_that_ignores_paging_is_refused_before_anything_is_swept(testio):
    sync(testio)
    testio.ignore_paging = True  # like TestIO's staging host: the newest 150 tests, whatever the page

    with pytest.raises(CommandError, match=r"TestIO ignored page=1&per_page=25 \(it sent 52 tests\)"):
        sync(testio)

    assert (QATest.objects.count(), Bug.objects.count()) == (TESTS, BUGS)


def test_bugs_are_read_to_the_count_the_api_gives_even_when_it_pages_below_what_was_asked(testio):
    """A server that serves fewer bugs a page than asked (50 of 500) is read on to
    `meta.record_count`: a short page read as the end would sweep 77 live bugs away."""
    sync(testio)
    testio.bug_page_cap = 50
    sent = len(testio.requests)

    out = sync(testio, "--sweep")

    assert "created 0, updated 0, deleted 0" in out and Bug.objects.count() == BUGS
    assert asked(testio, sent)[-3:] == [
        ALL_BUGS,
        ALL_BUGS.replace("page=1", "page=2"),
        ALL_BUGS.replace("page=1", "page=3"),
    ]


def test_a_bug_names_its_feature_through_its_test_and_steps_may_come_as_one_string():
    """testio-mcp reads `test_feature.id` from real bugs: the test's feature of that
    id names the product feature (`feature_id`). The docs show `steps` as one string."""
    source = Source(kind="testio", url="http://unused", project="4711", product_key="Orbit", token_env="TESTIO_TOKEN")
    tio = connector.TestIO(source, None, "t")
    test = {
        "id": 2200,
        "features": [{"id": 88001, "feature_id": 502, "title": "Card top-up", "description": "Top up from a card"}],
    }
    bug = {
        "id": 9,
        "title": "Top-up fails",
        "severity": "content",
        "status": "rejected",
        "known": True,
        "steps": "1. Open Wallet\n\n2. Tap Top up\n",
        "test": {"id": 2200},
        "test_feature": {"id": 88001},
        "devices": [
            {
                "vendor": {"name": "Google"},
                "device": {"name": "Pixel 8"},
                "operating_system": {"name": "Android", "version": "15"},
                "browsers": [{"name": "Chrome"}],
            }
        ],
    }

    mapped = tio.map({"type": "bug", "bug": bug, "test": test})

    assert mapped.feature == connector.FeatureRef("feature:502", "Card top-up", "Top up from a card")
    assert (mapped.kind, mapped.upstream_id) == ("bug", "9")
    assert {k: mapped.record[k] for k in ("key", "product", "test", "severity", "status")} == {
        "key": "ORBIT-9",
        "product": "ORBIT",
        "test": "ORBIT-T2200",
        "severity": "low",
        "status": "duplicate",
    }
    assert mapped.record["raw_data"]["steps"] == ["1. Open Wallet", "2. Tap Top up"]
    assert mapped.record["raw_data"]["environment"] == "Google Pixel 8, Android 15, Chrome"
    custom = tio.map({"type": "bug", "bug": {**bug, "severity": "custom", "status": "forwarded"}, "test": test})
    assert "severity" not in custom.record and custom.record["status"] == "open"
    assert tio.map({"type": "comment"}) is None
