"""Triage of a failing test run: JUnit reports in, causes and their known bugs out.

The story: Tramline's nightly run tests four codebases, each with its own
runner: the Java billing service (Maven Surefire), the Python fares API
(pytest), the web app (Jest and Playwright) and the Go gate validator
(go-junit-report). The reports are real runners' formats
(tests/fixtures/junit/). Tramline's tracker already holds the bugs those
failures come from, each with the trace as it was seen in production, and
a decoy: another NullPointerException in the same billing class. Ledgerly,
a product Carol's team cannot see, holds a bug with the very trace of
Tramline's renewal failure.

Dana is the QA lead who sees every product and curates; Carol sees
Tramline only.
"""

import json
from pathlib import Path

import pytest

from backlog.models import Product
from backlog.services import import_records
from triage import junit, service

from .conftest import TRAMLINE, jsonl, seeing_all_products

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "junit"
RUNNERS = ("surefire", "pytest", "jest", "playwright", "go")

RENEWAL_NPE = """Renewal crashed for rider 9931 at 02:11:

java.lang.NullPointerException: Cannot invoke "com.tramline.billing.Card.expiry()" because "card" is null
\tat com.tramline.billing.RenewalService.chargeSavedCard(RenewalService.java:88)
\tat com.tramline.billing.RenewalService.renew(RenewalService.java:41)
\tat com.tramline.passes.PassController.renew(PassController.java:57)
\tat org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:883)
"""

TRIAGE_STORY = [
    *TRAMLINE,
    {
        "kind": "test",
        "key": "TEST-41",
        "product": "PRD-1",
        "title": "Quote for an unknown zone",
        "status": "active",
    },
    {
        "kind": "bug",
        "key": "BUG-101",
        "product": "PRD-1",
        "title": "Renewal with an expired saved card fails with a NullPointerException",
        "severity": "critical",
        "status": "open",
        "description": RENEWAL_NPE,
    },
    {
        "kind": "bug",
        "key": "BUG-106",
        "product": "PRD-1",
        "title": "Receipt e-mail is not sent after a renewal",
        "severity": "medium",
        "status": "open",
        "description": "java.lang.NullPointerException: mailer is null\n"
        "\tat com.tramline.billing.RenewalService.sendReceipt(RenewalService.java:120)\n"
        "\tat com.tramline.billing.ReceiptMailer.send(ReceiptMailer.java:33)\n"
        "\tat com.tramline.billing.RenewalService.renew(RenewalService.java:47)\n",
    },
    {
        "kind": "bug",
        "key": "BUG-102",
        "product": "PRD-1",
        "title": "Season pass cache throws ConcurrentModificationException while evicting",
        "severity": "high",
        "status": "open",
        "description": "Seen in the nightly soak test:\n\n"
        'Exception in thread "cache-refresh-2" java.util.ConcurrentModificationException\n'
        "\tat java.util.HashMap$HashIterator.nextNode(HashMap.java:1493)\n"
        "\tat java.util.HashMap$KeyIterator.next(HashMap.java:1516)\n"
        "\tat com.tramline.passes.SeasonPassCache.evictExpired(SeasonPassCache.java:112)\n"
        "\tat com.tramline.passes.SeasonPassCache.refresh(SeasonPassCache.java:64)\n",
    },
    {
        "kind": "bug",
        "key": "BUG-103",
        "product": "PRD-1",
        "test": "TEST-41",
        "title": "Fare quote answers 500 for a zone that does not exist",
        "severity": "medium",
        "status": "open",
        "description": "Traceback (most recent call last):\n"
        '  File "/srv/fares/fares/views.py", line 44, in quote_view\n'
        '  File "/srv/fares/fares/quote.py", line 31, in quote\n'
        '  File "/srv/fares/fares/zones.py", line 19, in lookup\n'
        "KeyError: 'Q4'\n",
    },
    {
        "kind": "bug",
        "key": "BUG-104",
        "product": "PRD-1",
        "title": "Pass card crashes for a pass without an expiry date",
        "severity": "high",
        "status": "open",
        "description": "Sentry, source-mapped:\n"
        "TypeError: Cannot read properties of undefined (reading 'expiresAt')\n"
        "    at formatExpiry (src/passes/format.ts:14:22)\n"
        "    at PassCard (src/passes/PassCard.tsx:38:11)\n",
    },
    {
        "kind": "bug",
        "key": "BUG-105",
        "product": "PRD-1",
        "title": "Gate validator panics on a pass it cannot decode",
        "severity": "critical",
        "status": "fixed",
        "description": "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x4a1f3c]\n\n"
        "goroutine 112 [running]:\n"
        "github.com/tramline/gate/validator.(*Validator).Check(0x0, {0xc0001a2000, 0x8})\n"
        "\t/build/gate/validator/validator.go:61 +0x2a\n"
        "github.com/tramline/gate/server.(*Handler).Scan(0xc00012e000, {0x7f2c40, 0xc0001b4000})\n"
        "\t/build/gate/server/handler.go:88 +0x1b4\n",
    },
    {
        "kind": "bug",
        "key": "BUG-130",
        "product": "PRD-2",
        "title": "Ledgerly renewal crashes: NullPointerException in RenewalService",
        "severity": "critical",
        "status": "open",
        "description": RENEWAL_NPE,
    },
]


def fixture(runner: str) -> bytes:
    return (FIXTURES / f"{runner}.xml").read_bytes()


@pytest.fixture
def story(db):
    report = import_records(jsonl(*TRIAGE_STORY).splitlines())
    assert report.written and not report.problems, report.problems
    return report


@pytest.fixture
def dana(django_user_model):
    user = seeing_all_products(django_user_model.objects.create_user("dana", password="a-long-passphrase"))
    user.is_staff = True
    user.save()
    return user


@pytest.fixture
def carol(django_user_model, story):
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("carol", password="another-long-passphrase", is_staff=True)
    team = Group.objects.create(name="Mobile")
    user.groups.add(team)
    Product.objects.get(key="PRD-1").teams.add(team)
    return user


def groups_by_test(answer: dict) -> dict[str, dict]:
    return {failure["test"]: group for group in answer["groups"] for failure in group["failures"]}


def without_run(answer: dict) -> dict:
    """The triage without what differs from one stored run to the next (its id, time, history)."""
    answer = json.loads(json.dumps(answer))
    for name in ("run", "created_at", "name"):
        answer.pop(name, None)
    for group in answer["groups"]:
        group.pop("first_seen"), group.pop("runs_seen")
        for failure in group["failures"]:
            failure.pop("failing_runs")
    return answer


# -- reading the runners' reports -------------------------------------------------------------


def test_each_runners_report_is_read_with_its_outcomes():
    outcomes = {runner: [(c.outcome, c.flaky) for c in junit.read(fixture(runner))] for runner in RUNNERS}

    assert outcomes["surefire"] == [
        ("error", False),
        ("error", False),
        ("failure", False),
        ("skipped", False),
        ("error", False),
        ("passed", True),  # flakyFailure: passed on a rerun
        ("passed", False),
    ]
    assert [o for o, _ in outcomes["pytest"]] == ["passed", "failure", "failure", "failure", "skipped"]
    assert [o for o, _ in outcomes["jest"]] == ["passed", "failure", "failure", "passed"]
    assert [o for o, _ in outcomes["playwright"]] == ["failure", "passed", "passed"]
    assert [o for o, _ in outcomes["go"]] == ["passed", "failure", "failure"]


# -- per failure: the known bug, or new -----------------------------------------------------


def test_each_failure_gets_the_bug_its_trace_comes_from_first_or_is_called_new(story, dana):
    verdicts = {}
    for runner in RUNNERS:
        answer = service.triage(fixture(runner), "PRD-1", dana, name=f"{runner}.xml")
        for test, group in groups_by_test(answer).items():
            verdicts[test] = (group["verdict"], group.get("bug"), group.get("band"))

    assert verdicts["com.tramline.billing.RenewalServiceTest.renewsAnExpiredPassWithASavedCard"] == (
        "known",
        "BUG-101",
        "high",
    )
    assert verdicts["com.tramline.passes.SeasonPassCacheTest.evictsExpiredPassesWhileRenewing"][:2] == (
        "known",
        "BUG-102",
    )
    assert verdicts["tests.test_fares.test_quote_for_an_unknown_zone"][:2] == ("known", "BUG-103")
    assert verdicts["PassCard shows a pass without an expiry"][:2] == ("known", "BUG-104")
    assert verdicts["github.com/tramline/gate/validator::TestValidatorRejectsAnExpiredPass"][:2] == ("known", "BUG-105")
    # Failures whose cause no bug holds: an assertion in the test, a layout check, a timeout.
    for test in (
        "com.tramline.billing.RenewalServiceTest.refusesARenewalOfACancelledPass",
        "PassCard shows the price in the rider's currency",
        "github.com/tramline/gate/validator::TestZonesForStation",
    ):
        assert verdicts[test] == ("new", None, None), test
