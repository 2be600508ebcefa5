"""Syncing TestRail: Parcelpoint's regression suite (a parcel-locker app, 31 cases
in 8 sections) served as a TestRail site on loopback (tests/upstream/testrail.py).

The story: the QA team points the service at TestRail project 3. The first
sync brings every case as a test, its section as its feature and its steps
with their expected results; then someone edits a case, deletes one and
writes one in a new section, and the second sync asks only for what was
updated since, while the sweep notices the deletion.
"""

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from backlog.models import Feature, Product, QATest
from connectors.models import RunStatus, Source, SyncedRecord, SyncRun
from search import service
from tests.upstream.testrail import FakeTestRail

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_retries")]


def serve(monkeypatch, fake: FakeTestRail) -> FakeTestRail:
    fake.start()
    monkeypatch.setenv("TESTRAIL_USER", fake.user)
    monkeypatch.setenv("TESTRAIL_API_KEY", fake.api_key)
    return fake


@pytest.fixture
def testrail(monkeypatch):
    fake = serve(monkeypatch, FakeTestRail.catalog())
    yield fake
    fake.stop()


def sync(testrail: FakeTestRail, *args: str, project: str = "3") -> str:
    out = io.StringIO()
    call_command(
        "sync",
        "testrail",
        "--url",
        testrail.url,
        "--project",
        project,
        "--no-progress",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def calls(testrail: FakeTestRail, since: int = 0) -> list[tuple[str, dict]]:
    return [(r.path, r.query) for r in testrail.requests[since:]]


def at(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def latest(testrail: FakeTestRail) -> datetime:
    return at(max(case["updated_on"] for case in testrail.cases.values()))


def key(case: dict) -> str:
    return f"PARCELPOINT-C{case['id']}"


def test_a_first_sync_brings_every_case_with_its_section_and_steps(testrail):
    out = sync(testrail)

    port = testrail.url.rsplit(":", 1)[1]
    assert out.startswith(f"testrail:3@127.0.0.1:{port}: created 39, updated 0, deleted 0, unchanged 0")  # 31 + 8
    assert out.endswith("(3 requests)\n")
    # One page of cases, the sections once, and no second listing for the sweep: the full read was one.
    assert calls(testrail) == [
        ("/api/v2/get_project/3", {}),
        ("/api/v2/get_cases/3", {"limit": "250", "offset": "0"}),
        ("/api/v2/get_sections/3", {"suite_id": "1"}),
    ]
    assert all(r.basic_auth() == (testrail.user, testrail.api_key) for r in testrail.requests)
    assert all(r.headers["content-type"] == "application/json" for r in testrail.requests)
    product = Product.objects.get()
    assert (product.key, product.name, product.description) == (
        "PARCELPOINT",
        "Parcelpoint",
        "Parcelpoint: regression and release tests",
    )
    assert QATest.objects.filter(product=product).count() == 31

    # A "Test Case (Steps)" case: each step with its expected result.
    sms = testrail.case("Sign in with a one-time code sent by SMS or WhatsApp")
    test = QATest.objects.get(key=key(sms))
    assert test.title == "Sign in with a one-time code sent by SMS or WhatsApp"
    assert test.steps == [
        "Open the app and tap Sign in → The phone number screen opens",
        "Enter +44 7700 900123 and tap Send code → An SMS with a 6-digit code arrives within 30 s",
        "Enter the code → The parcel list opens",
    ]
    assert test.description == "Preconditions:\nA registered account with a verified phone number\n\nReferences: PP-101"
    assert (test.feature.key, test.feature.name) == ("PARCELPOINT.sign-in", "Sign-in")
    assert test.feature.description == "Accounts, one-time codes and sessions"
    assert (test.status, test.created_at, test.updated_at) == ("active", at(sms["created_on"]), at(sms["updated_on"]))
    assert test.updated_at - test.created_at == timedelta(hours=5)  # edited after it was written
    # A step with no expected result is the step alone.
    assert (
        QATest.objects.get(key=key(testrail.case("The QR code scans with screen brightness at minimum"))).steps[0]
        == "Set the brightness to the minimum"
    )
    # A "Test Case (Text)" case: its steps line by line without their numbers, the expected result described.
    text = QATest.objects.get(key=key(testrail.case("The pickup deadline is extended once by 24 hours")))
    assert text.steps == ["Open a parcel ready for pickup", "Tap Extend by 24 h", "Tap Extend again"]
    assert text.description == (
        "Expected result:\nThe deadline moves 24 hours later once; the second time 'Already extended' is shown"
    )
    # An exploratory session: its mission and goals.
    session = QATest.objects.get(key=key(testrail.case("Explore returns of oversized parcels")))
    assert (session.steps, session.feature.name) == ([], "Returns")
    assert session.description == (
        "Mission:\nReturn a parcel that does not fit the largest compartment\n\n"
        "Goals:\nThe app says where to take it instead\nNo return code is wasted"
    )
    # A subsection is a feature of its own.
    assert sorted(Feature.objects.values_list("name", flat=True)) == [
        "Locker map",
        "Notifications",
        "PIN entry",
        "Parcel pickup",
        "Payments",
        "QR code",
        "Returns",
        "Sign-in",
    ]
    assert QATest.objects.filter(feature__key="PARCELPOINT.qr-code").count() == 5
    # The checkpoint: the latest update read (an edit, in the middle of the listing).
    assert Source.objects.get().checkpoint == latest(testrail)
    # Found by search like any imported record, by the words of a step.
    hits = service.call("search", {"query": "screenshot of the QR code", "mode": "keyword", "entities": ["test"]})
    assert hits["results"][0]["key"] == key(testrail.case("An expired QR code is refused by the locker"))


def test_the_second_sync_asks_only_for_what_changed_and_follows_an_edit_a_deletion_and_an_addition(testrail):
    sync(testrail)
    first_checkpoint = Source.objects.get().checkpoint
    sent = len(testrail.requests)

    pin = testrail.case("Open a compartment with the 6-digit PIN")
    testrail.edit(
        pin["id"],
        title="Open a compartment with the 6-digit PIN from the SMS",
        steps=[
            ("Open the SMS 'Your parcel is ready'", "It shows a 6-digit PIN"),
            ("Type the PIN on the locker's keypad and press OK", "The compartment door opens"),
        ],
    )
    blocked = testrail.case("Three wrong PINs block the keypad for 5 minutes")
    testrail.delete(blocked["id"])
    lost = testrail.add_section("Lost parcels", description="Parcels that are not where they should be")
    missing = testrail.add_case(
        lost,
        "Report a parcel missing from its compartment",
        steps=[
            ("Open the compartment with the QR code and find it empty", "The app asks 'Was the compartment empty?'"),
            ("Tap Yes", "A claim is opened and its number is shown"),
        ],
    )
    out = sync(testrail, "--sweep")  # by hand, TestRail's sweep (a full listing) runs only when asked or due

    assert "created 2, updated 1, deleted 1" in out  # the case and its section; the edit; the deletion
    since = int((first_checkpoint - timedelta(minutes=2)).timestamp()) - 1
    assert calls(testrail, sent) == [
        ("/api/v2/get_project/3", {}),
        ("/api/v2/get_cases/3", {"updated_after": str(since), "limit": "250", "offset": "0"}),
        ("/api/v2/get_sections/3", {"suite_id": "1"}),
        ("/api/v2/get_cases/3", {"limit": "250", "offset": "0"}),  # the sweep's full listing
    ]
    # The edited case, the new one, and the case edited last before the first sync (read again by the overlap).
    assert SyncRun.objects.order_by("-started_at").first().fetched == 3
    assert "unchanged 3" in out  # that case, its section and the edited case's section (written as they were)
    edited = QATest.objects.get(key=key(pin))
    assert edited.title == "Open a compartment with the 6-digit PIN from the SMS"
    assert edited.steps[0] == "Open the SMS 'Your parcel is ready' → It shows a 6-digit PIN"
    added = QATest.objects.get(key=key(missing))
    assert (added.feature.key, added.feature.name) == ("PARCELPOINT.lost-parcels", "Lost parcels")
    # Deleted upstream: gone from the records, the bookkeeping and search.
    assert not QATest.objects.filter(key=key(blocked)).exists()
    assert not SyncedRecord.objects.filter(upstream_id=str(blocked["id"])).exists()
    hits = service.call("search", {"query": "wrong PIN keypad blocked", "mode": "keyword", "entities": ["test"]})
    assert key(blocked) not in [hit["key"] for hit in hits["results"]]
    assert QATest.objects.count() == 31
    assert Source.objects.get().checkpoint == at(missing["updated_on"])

    # A third sync with nothing new writes nothing (the overlap reads the new case and its section again).
    out = sync(testrail)
    assert "created 0, updated 0, deleted 0, unchanged 2" in out


def test_pages_are_followed_by_their_next_link_and_the_checkpoint_waits_for_the_whole_listing(testrail):
    testrail.page_cap = 10  # a server that serves fewer than the 250 asked for

    sync(testrail)

    assert [q for path, q in calls(testrail) if path == "/api/v2/get_cases/3"] == [
        {"limit": "250", "offset": "0"},
        {"limit": "10", "offset": "10"},
        {"limit": "10", "offset": "20"},
        {"limit": "10", "offset": "30"},
    ]
    assert QATest.objects.count() == 31
    # get_cases is in section order: the latest update is on the first page, not the last.
    listing = testrail.listing()
    assert max(c["updated_on"] for c in listing[:10]) > max(c["updated_on"] for c in listing[10:])
    assert Source.objects.get().checkpoint == latest(testrail)


def test_an_edit_made_while_a_long_listing_runs_is_found_by_the_next_sync(testrail, monkeypatch):
    """A case on page 1 is edited after page 1 was read, then one on page 3: the
    latest time read is the second edit's, later than the first's by more than the
    two minutes the sync asks back. The connector holds the checkpoint back by
    the time the listing took (here by the site's own clock)."""
    monkeypatch.setattr("connectors.sources.testrail.monotonic", lambda: testrail.clock.timestamp())
    testrail.page_cap = 10
    listing = testrail.listing()
    early, late = listing[2], listing[25]
    original = testrail.handle

    def handle(request):
        if request.path == "/api/v2/get_cases/3" and request.query.get("offset") == "10":
            testrail.edit(early["id"], minutes=5, title="Five wrong codes lock sign-in for 30 minutes")
            testrail.edit(late["id"], minutes=5, title=late["title"] + " (reworded)")
        return original(request)

    testrail.handle = handle
    started = testrail.clock
    sync(testrail)
    del testrail.handle

    assert QATest.objects.get(key=key(early)).title == "Five wrong codes lock sign-in for 15 minutes"  # read before
    assert QATest.objects.get(key=key(late)).title.endswith("(reworded)")
    assert (
        Source.objects.get().checkpoint
        == at(late["updated_on"]) - timedelta(minutes=10 - 2)
        == started + timedelta(minutes=2)
    )
    sync(testrail)
    assert QATest.objects.get(key=key(early)).title == "Five wrong codes lock sign-in for 30 minutes"


def test_bad_credentials_and_an_unknown_project_write_nothing(testrail, monkeypatch):
    monkeypatch.setenv("TESTRAIL_API_KEY", "wrong")
    with pytest.raises(
        CommandError,
        match=r"TestRail refused the credentials \(401 .*Authentication failed: invalid "
        r"or missing user/password or session cookie\.\); check TESTRAIL_USER .* and TESTRAIL_API_KEY "
        r".*nothing was written",
    ):
        sync(testrail)
    monkeypatch.setenv("TESTRAIL_API_KEY", testrail.api_key)
    with pytest.raises(
        CommandError,
        match=r"TestRail has no project '99', or the token cannot see it \(400 .*"
        r"Field :project_id is not a valid or accessible project\.\).*nothing was written",
    ):
        sync(testrail, project="99")
    with pytest.raises(CommandError, match=r"TestRail project ids are numbers, not 'Parcelpoint'.*nothing was written"):
        sync(testrail, project="Parcelpoint")
    monkeypatch.delenv("TESTRAIL_USER")
    with pytest.raises(CommandError, match=r"TESTRAIL_USER is not set: put the TestRail user's e-mail in it"):
        sync(testrail)

    assert [path for path, _ in calls(testrail)] == ["/api/v2/get_project/3", "/api/v2/get_project/99"]
    assert not Source.objects.exists() and not QATest.objects.exists() and not Product.objects.exists()


def test_a_429_is_waited_out_as_long_as_the_site_asks(testrail):
    testrail.fail(
        429, times=2, headers={"Retry-After": "1"}, path="/api/v2/get_cases", body={"error": "API rate limit exceeded"}
    )

    out = sync(testrail)

    assert "created 39" in out and QATest.objects.count() == 31
    arrivals = [r.at for r in testrail.requests if r.path == "/api/v2/get_cases/3"]
    assert len(arrivals) == 3
    assert arrivals[1] - arrivals[0] >= 0.95 and arrivals[2] - arrivals[1] >= 0.95


def test_a_site_in_maintenance_is_waited_out(testrail):
    """TestRail Cloud answers 409 during its maintenance windows: come back later, not a refusal."""
    testrail.fail(
        409, times=2, path="/api/v2/get_cases", body={"error": "The API is temporarily unavailable due to maintenance."}
    )

    out = sync(testrail)

    assert "created 39" in out and QATest.objects.count() == 31
    assert [r.path for r in testrail.requests].count("/api/v2/get_cases/3") >= 3


@pytest.mark.usefixtures("no_back_off")
def test_a_site_that_dies_mid_sync_loses_nothing_and_the_next_sync_reads_the_rest(testrail):
    testrail.page_cap = 10
    testrail.die_after(4)  # the project, two pages of cases and the sections

    with pytest.raises(CommandError, match=r"could not be reached .*3 tries.*sync again later"):
        sync(testrail)

    run = SyncRun.objects.get()
    assert run.status == RunStatus.FAILED and run.fetched == 20
    assert QATest.objects.count() == 20  # the two pages read were written
    assert Source.objects.get().checkpoint is None  # an unsorted listing proves nothing before its end
    testrail.revive()
    sent = len(testrail.requests)
    out = sync(testrail)

    # Read again from the start: 11 new cases and the 2 sections only they are in; the 20 already written unchanged.
    assert "created 13, updated 0, deleted 0" in out
    assert [q.get("offset") for path, q in calls(testrail, sent) if path == "/api/v2/get_cases/3"] == [
        "0",
        "10",
        "20",
        "30",
    ]
    assert QATest.objects.count() == 31 and Source.objects.get().checkpoint == latest(testrail)


def test_a_project_of_several_suites_is_read_suite_by_suite(monkeypatch):
    fake = FakeTestRail(suite_mode=3, first_suite="Android app", suites_paged=True)
    courier = fake.add_suite("Courier web portal")
    fake.add_case(
        fake.add_section("Pickup"),
        "Open a compartment by scanning the QR code",
        steps=[("Scan the code at the locker", "The door opens")],
    )
    routes = fake.add_section("Delivery routes", suite=courier)
    fake.add_case(routes, "A route lists lockers in driving order", steps=[("Open today's route", "Lockers in order")])
    fake.add_case(routes, "A full locker is skipped with a reason", text="1. Mark KX-4412 full", expected="Skipped")
    serve(monkeypatch, fake)
    try:
        out = sync(fake)
    finally:
        fake.stop()

    assert "created 5" in out  # three cases, two sections
    assert [(path, q.get("suite_id")) for path, q in calls(fake)] == [
        ("/api/v2/get_project/3", None),
        ("/api/v2/get_suites/3", None),
        ("/api/v2/get_cases/3", "1"),
        ("/api/v2/get_sections/3", "1"),
        ("/api/v2/get_cases/3", "2"),
        ("/api/v2/get_sections/3", "2"),
    ]
    assert dict(QATest.objects.values_list("title", "feature__name")) == {
        "Open a compartment by scanning the QR code": "Pickup",
        "A route lists lockers in driving order": "Delivery routes",
        "A full locker is skipped with a reason": "Delivery routes",
    }


def test_a_baseline_is_a_copy_of_the_master_and_is_left_out(monkeypatch):
    fake = FakeTestRail(suite_mode=2)
    fake.add_case(fake.add_section("Pickup"), "Open a compartment with the PIN", steps=[("Type the PIN", "Opens")])
    baseline = fake.add_suite("Release 4.2 baseline", baseline=True)
    fake.add_case(
        fake.add_section("Pickup", suite=baseline), "Open a compartment with the PIN", steps=[("Type the PIN", "Opens")]
    )
    serve(monkeypatch, fake)
    try:
        sync(fake)
    finally:
        fake.stop()

    assert list(QATest.objects.values_list("key", flat=True)) == ["PARCELPOINT-C1201"]
    assert "2" not in [q.get("suite_id") for _, q in calls(fake)]


def test_a_server_older_than_6_7_answers_everything_in_one_array(monkeypatch):
    fake = serve(monkeypatch, FakeTestRail.catalog(paged=False))
    try:
        sync(fake)
        edited = fake.edit(
            fake.case("A declined card shows the bank's reason")["id"],
            title="A declined card shows the bank's reason in the app's language",
        )
        out = sync(fake, "--sweep")
    finally:
        fake.stop()

    assert "created 0, updated 1, deleted 0" in out
    assert [path for path, _ in calls(fake)].count("/api/v2/get_cases/3") == 3  # first sync; second and its sweep
    assert QATest.objects.get(key=key(edited)).title == "A declined card shows the bank's reason in the app's language"
    assert QATest.objects.count() == 31


def test_a_renamed_project_keeps_its_product_key(testrail):
    sync(testrail)
    testrail.projects[3]["name"] = "Parcelpoint Lockers"
    testrail.edit(testrail.case("Open a compartment with the 6-digit PIN")["id"], title="Open a compartment by PIN")

    out = sync(testrail)

    assert "created 0, updated 1, deleted 0" in out
    assert list(Product.objects.values_list("key", "name")) == [("PARCELPOINT", "Parcelpoint Lockers")]
    assert QATest.objects.filter(product__key="PARCELPOINT").count() == 31


def test_the_product_key_can_be_given(testrail):
    out = sync(testrail, "--product", "PARCELS")

    assert "created 39" in out
    assert QATest.objects.filter(key__startswith="PARCELS-C").count() == 31
