"""A bug's page: "Likely duplicates" are the check_duplicates ranking of the
bug's own title and text (high and medium bands only); the rest of its
nearest records are "Related".

The story, in the demo data's words: Tramline Mobile's Departures screen.
BUG-22 is an app crash when filtering departures by tram line; BUG-24 is
the same crash with the same steps, reported again from an iPad. A race
condition, a server error and a double charge were reported against the
same scenario ("filter departures by tram line") and share its wording,
not its defect. Ledgerly, another product, has a crash report of its own.

Alice sees every product; Carol is on the Tramline team only.
"""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from backlog.imports import import_records
from backlog.models import Product
from search.indexing.vectors import embed_pending

from .conftest import jsonl, seeing_all_products

STEPS = ["Sign in as qa.rider03@tramline.test", "Open the Departures tab", "Filter departures by tram line"]
EXPECTED = "Only departures of the chosen line are listed."


def bug(key, title, description, actual, *, steps=STEPS, expected=EXPECTED, product="PRD-1", feature="FEAT-33"):
    return {
        "kind": "bug",
        "key": key,
        "product": product,
        "feature": feature,
        "title": title,
        "description": description,
        "severity": "high",
        "status": "open",
        "created_at": f"2026-02-{int(key.split('-')[1]) % 27 + 1:02d}T12:00:00+00:00",
        "raw_data": {"steps": steps, "actual_result": actual, "expected_result": expected},
    }


DEPARTURES = [
    {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile", "description": "Ticketing app for city transit"},
    {"kind": "feature", "key": "FEAT-33", "product": "PRD-1", "name": "Departures"},
    {"kind": "feature", "key": "FEAT-34", "product": "PRD-1", "name": "Ticket purchase"},
    {"kind": "product", "key": "PRD-2", "name": "Ledgerly", "description": "Invoicing for small firms"},
    {"kind": "feature", "key": "FEAT-90", "product": "PRD-2", "name": "Invoice list"},
    bug(
        "BUG-22",
        "App hangs and crashes on the Departures screen",
        "Trying to filter departures by tram line does not work: the UI stops responding for a few seconds "
        "before the app is killed and restarts. Reproduced on staging.",
        "The UI stops responding for a few seconds before the app is killed and restarts.",
    ),
    bug(
        "BUG-24",
        "[iOS] Departures screen: app freezes, then crashes",
        "The screen freezes for about two seconds, then the app crashes; after relaunch it opens on the "
        "start screen.\n\nStack trace:\nFatal error: Unexpectedly found nil while unwrapping an Optional value\n"
        "DepartureViewController.swift:109",
        "The screen freezes for about two seconds, then the app crashes; after relaunch it opens on the start screen.",
        steps=["Install the latest Tramline Mobile build from TestFlight", *STEPS[1:]],
    ),
    bug(
        "BUG-210",
        "[Android] Intermittent failure to filter departures by tram line when a sync runs in parallel",
        "When I filter departures by tram line, about one attempt in 5 fails with a conflict error and the "
        "state is left half-updated.",
        "About one attempt in 5 fails with a conflict error and the state is left half-updated.",
        expected="Concurrent requests are serialised or rejected with a clear conflict error; " + EXPECTED.lower(),
    ),
    bug(
        "BUG-301",
        "Server error when I filter departures by tram line",
        "The request to GET /api/v2/departures returns HTTP 500 with error code TRM-E1442 when I filter "
        "departures by tram line.",
        "The request to GET /api/v2/departures returns HTTP 500 with error code TRM-E1442.",
        expected="The request succeeds with a 2xx response; " + EXPECTED.lower(),
    ),
    bug(
        "BUG-302",
        "Charged twice when trying to filter departures by tram line and buy a day ticket",
        "After I filter departures by tram line and buy a day ticket from the departure, the card is charged "
        "twice for one ticket.",
        "Two identical charges appear on the card statement for one day ticket.",
        steps=[*STEPS, "Buy a day ticket from the first departure"],
        expected="The card is charged once.",
        feature="FEAT-34",
    ),
    bug(
        "BUG-328",
        "Screen reader announces button instead of the action on the Departures screen",
        "With TalkBack on, the primary action is announced as an unlabelled button.",
        'The screen reader announces "button, unlabelled" for the primary action.',
        steps=["Turn on TalkBack", *STEPS[1:]],
    ),
    bug(
        "BUG-1446",
        "Wrong time shown after the clocks change when I filter departures by tram line",
        "Everything after the DST switch is shown one hour late.",
        "Everything after the DST switch is shown one hour late (10:30 instead of 09:30).",
    ),
    bug(
        "BUG-1035",
        "Blank Departures screen with a spinner",
        "A blank Departures screen with a spinner is shown and only restarting the app helps.",
        "A blank Departures screen with a spinner is shown and only restarting the app helps.",
        steps=[STEPS[0], "Go to the Departures screen", "Refresh departures after a delay is announced"],
    ),
    bug(
        "BUG-400",
        "Invoice list crashes the app when sorted by due date",
        "Sorting the invoice list by due date freezes the screen, then the app crashes and restarts.",
        "The screen freezes, then the app crashes and restarts.",
        steps=["Sign in", "Open the invoice list", "Sort by due date"],
        expected="Invoices are sorted by due date.",
        product="PRD-2",
        feature="FEAT-90",
    ),
]


@pytest.fixture
def departures(db):
    report = import_records(jsonl(*DEPARTURES).splitlines())
    assert report.written and not report.problems, report.problems
    embed_pending()


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def as_alice(departures):
    return logged_in(seeing_all_products(User.objects.create_user("alice", is_staff=True)))


@pytest.fixture
def as_carol(departures):
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    carol = User.objects.create_user("carol", is_staff=True)
    carol.groups.add(team)
    return logged_in(carol)


def section(html: str, heading: str) -> list[tuple[str, str]]:
    """The (key, band) of each record listed under `heading` (band "" when none is shown)."""
    found = re.search(rf"<h2[^>]*>{heading}</h2>(.*?)</section>", html, re.S)
    assert found, f"no section {heading!r}"
    items = re.findall(r"<li\b(.*?)</li>", found.group(1), re.S)
    return [
        (re.search(r'href="/records/([^/]+)/"', item).group(1), "".join(re.findall(r'class="band"[^>]*>(\w+)<', item)))
        for item in items
    ]


def test_the_near_copy_is_the_likely_duplicate_and_scenario_wording_only_is_related(as_alice):
    html = as_alice.get("/records/BUG-22/").content.decode()

    likely = section(html, "Likely duplicates")
    wording_only = {"BUG-210", "BUG-301", "BUG-302"}  # race condition, server error, charged twice
    assert likely[0][0] == "BUG-24"
    assert not wording_only & {key for key, _ in likely}
    assert all(band in ("high", "medium") for _, band in likely)  # each with its band
    related = [key for key, _ in section(html, "Related")]
    assert wording_only & set(related)  # still listed, for what they are
    assert not {key for key, _ in likely} & set(related)  # each record once
    assert "BUG-22" not in related


def test_carol_sees_no_duplicate_or_related_record_of_a_product_she_may_not_see(as_carol, as_alice):
    # Alice, who sees Ledgerly, finds its crash report related to BUG-22 (the same symptom, another app).
    assert "BUG-400" in [key for key, _ in section(as_alice.get("/records/BUG-22/").content.decode(), "Related")]

    html = as_carol.get("/records/BUG-22/").content.decode()

    shown = section(html, "Likely duplicates") + section(html, "Related")
    assert shown and "BUG-400" not in [key for key, _ in shown]
    assert as_carol.get("/records/BUG-400/").status_code == 404
