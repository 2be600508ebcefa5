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

import io
import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadhandler import FileUploadHandler

from backlog.imports import import_records
from backlog.models import Product
from search.contract import SearchError
from triage import junit, service
from triage.models import Decision, Failure, Run

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
            failure.pop("failing_runs"), failure.pop("recent", None)
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


def test_python_s_chained_cause_is_read_as_the_cause_as_java_s_caused_by_is(story, dana):
    """Python prints a chain's cause first: an AssertionError raised from the fault is the fault's group."""
    fault = (
        "Traceback (most recent call last):\n"
        '  File "/app/tramline/fares/zones.py", line 12, in lookup\n    return ZONES[code]\n'
        "KeyError: 'Z9'"
    )
    chained = (
        f"{fault}\n\nThe above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/app/tests/test_fares.py", line 40, in test_quote\n    raise AssertionError("no quote") from error\n'
        "AssertionError: no quote"
    )
    cases = [("test_quote_plain", fault), ("test_quote_chained", chained)]
    report = (
        '<testsuite name="fares">'
        + "".join(
            f'<testcase classname="tests.test_fares" name="{name}"><failure><![CDATA[{text}]]></failure></testcase>'
            for name, text in cases
        )
        + "</testsuite>"
    )

    (group,) = service.triage(report, "PRD-1", dana)["groups"]

    assert len(group["failures"]) == 2 and group["cause"].startswith("KeyError")


def test_a_trace_of_frames_that_only_carry_the_code_is_never_high(story, dana):
    """A Future's or a thread pool's frames are in unrelated bugs' traces: that a bug holds them
    is no evidence (it was 1.0, "high": three failures pinned on a flaky test's bug so)."""
    flaky = {
        "kind": "bug",
        "key": "BUG-190",
        "product": "PRD-1",
        "title": "GateSyncTest#syncsOnReconnect is flaky",
        "description": "java.lang.AssertionError: expected the gate cache to be warm\n"
        "\tat java.util.concurrent.FutureTask.run(FutureTask.java:266)\n"
        "\tat java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1149)",
    }
    assert import_records(jsonl(flaky).splitlines()).written
    carried = (
        "java.lang.AssertionError: expected the fare cache to be warm\n"
        "\tat java.util.concurrent.FutureTask.run(FutureTask.java:266)\n"
        "\tat java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1149)\n"
        "\tat com.tramline.fares.FareCacheTest.warmsOnStart(FareCacheTest.java:40)"
    )
    report = (
        '<testsuite name="night"><testcase classname="com.tramline.fares.FareCacheTest" name="warmsOnStart">'
        f'<failure type="java.lang.AssertionError"><![CDATA[{carried}]]></failure></testcase></testsuite>'
    )

    (group,) = service.triage(report, "PRD-1", dana)["groups"]

    top = group["suggestions"][0]
    assert top["key"] == "BUG-190" and top["why"]["frames"] == [2, 2]  # it holds both frames
    assert top["confidence"] <= 0.6 and top["band"] == "medium"  # by its words: the exception, most of the message


def test_the_bug_whose_frames_threw_it_ranks_above_one_sharing_only_the_exception_and_class(story, dana):
    answer = service.triage(fixture("surefire"), "PRD-1", dana)
    npe = groups_by_test(answer)["com.tramline.billing.RenewalServiceTest.renewsWithANewCard"]

    assert [s["key"] for s in npe["suggestions"]] == ["BUG-101", "BUG-106"]
    first, decoy = npe["suggestions"]
    assert first["why"]["frames"] == [3, 3] and first["band"] == "high"
    assert decoy["why"]["frames"] == [1, 3] and decoy["band"] == "low" and decoy["confidence"] < first["confidence"]


def test_failures_of_one_cause_are_one_group_whatever_the_test_line_numbers_or_values(story, dana):
    surefire = service.triage(fixture("surefire"), "PRD-1", dana)
    pytest_run = service.triage(fixture("pytest"), "PRD-1", dana)

    # Two tests hit the renewal NPE: one group, listed first (most failures).
    assert [f["test"].rsplit(".", 1)[1] for f in surefire["groups"][0]["failures"]] == [
        "renewsAnExpiredPassWithASavedCard",
        "renewsWithANewCard",
    ]
    # KeyError 'Z9' and 'Z7' from two tests: the same lookup, one cause.
    assert len(pytest_run["groups"]) == 2
    assert {f["test"] for f in pytest_run["groups"][0]["failures"]} == {
        "tests.test_fares.test_quote_for_an_unknown_zone",
        "tests.test_fares.test_quote_for_zone_z7",
    }
    assert surefire["counts"] == {"tests": 7, "passed": 1, "failed": 4, "skipped": 1, "flaky": 1}


def test_a_failing_test_is_linked_to_its_test_case_and_that_cases_bugs(story, dana):
    fares = groups_by_test(service.triage(fixture("pytest"), "PRD-1", dana))
    e2e = groups_by_test(service.triage(fixture("playwright"), "PRD-1", dana))

    unknown_zone = next(f for f in fares["tests.test_fares.test_quote_for_an_unknown_zone"]["failures"])
    assert (unknown_zone["test_case"], unknown_zone["case_bugs"]) == ("TEST-41", ["BUG-103"])
    renew = e2e["renewal.spec.ts.renewal › Renew an expired pass with a saved card"]["failures"][0]
    assert (renew["test_case"], renew["case_bugs"]) == ("TEST-3", ["BUG-12"])


def test_history_says_first_seen_failing_for_n_runs_and_flaky(story, dana):
    first = service.triage(fixture("surefire"), "PRD-1", dana)
    service.triage(fixture("pytest"), "PRD-1", dana)  # another suite's run: the Java tests did not fail in it
    service.triage(fixture("surefire"), "PRD-1", dana)
    third = service.triage(fixture("surefire"), "PRD-1", dana)

    npe = third["groups"][0]
    assert npe["runs_seen"] == 3 and npe["first_seen"] == first["created_at"]
    assert {f["failing_runs"] for f in npe["failures"]} == {2}
    flaky = groups_by_test(third)["com.tramline.passes.SeasonPassCacheTest.keepsAValidPass"]["failures"][0]
    assert flaky["flaky"] is True


def test_old_runs_are_deleted_after_the_kept_days(story, dana, settings):
    old = service.triage(fixture("go"), "PRD-1", dana)
    Run.objects.filter(pk=old["run"]).update(created_at=Run.objects.get(pk=old["run"]).created_at.replace(year=2020))
    settings.TRIAGE_KEEP_DAYS = 30

    service.triage(fixture("go"), "PRD-1", dana)

    assert not Run.objects.filter(pk=old["run"]).exists()
    assert not Failure.objects.filter(run_id=old["run"]).exists()


# -- curators decide --------------------------------------------------------------------------


def test_a_confirmed_link_comes_first_in_the_next_run_and_a_rejected_one_never(story, dana):
    run = service.triage(fixture("surefire"), "PRD-1", dana)
    timeout = groups_by_test(run)["com.tramline.passes.SeasonPassCacheTest.keepsAValidPass"]
    npe = run["groups"][0]
    assert timeout["verdict"] == "new"

    after = service.decide(
        run["run"], {"signature": timeout["signature"], "bug": "BUG-102", "decision": "confirmed"}, dana
    )
    service.decide(run["run"], {"signature": npe["signature"], "bug": "BUG-106", "decision": "rejected"}, dana)

    stored = groups_by_test(after)["com.tramline.passes.SeasonPassCacheTest.keepsAValidPass"]
    assert (stored["verdict"], stored["bug"], stored["suggestions"][0]["decision"]) == ("known", "BUG-102", "confirmed")
    assert Decision.objects.count() == 2
    following = groups_by_test(service.triage(fixture("surefire"), "PRD-1", dana))
    timeout = following["com.tramline.passes.SeasonPassCacheTest.keepsAValidPass"]
    assert (timeout["verdict"], timeout["bug"], timeout["band"]) == ("known", "BUG-102", "high")
    assert timeout["suggestions"][0]["decision"] == "confirmed"
    npe = following["com.tramline.billing.RenewalServiceTest.renewsWithANewCard"]
    assert [s["key"] for s in npe["suggestions"]] == ["BUG-101"]


# -- access -----------------------------------------------------------------------------------


def test_a_user_sees_no_bug_run_or_product_of_another_team(story, carol, dana):
    mine = service.triage(fixture("surefire"), "PRD-1", carol)
    keys = {s["key"] for g in mine["groups"] for s in g["suggestions"]}
    assert "BUG-130" not in keys and "BUG-101" in keys

    with pytest.raises(SearchError, match="no product you can see has the key 'PRD-2'"):
        service.triage(fixture("surefire"), "PRD-2", carol)
    theirs = service.triage(fixture("surefire"), "PRD-2", dana)
    assert theirs["groups"][0]["bug"] == "BUG-130"
    with pytest.raises(SearchError, match=f"no run {theirs['run']} of a product you can see"):
        service.call({"run": theirs["run"]}, carol)
    with pytest.raises(SearchError):
        service.decide(
            theirs["run"],
            {"signature": theirs["groups"][0]["signature"], "bug": "BUG-130", "decision": "confirmed"},
            carol,
        )


# -- hostile and broken files -----------------------------------------------------------------

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<testsuite name="x"><testcase name="t"><failure>&lol9;</failure></testcase></testsuite>
"""
EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE testsuite [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<testsuite name="x"><testcase name="t"><failure>&secret;</failure></testcase></testsuite>
"""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (BILLION_LAUGHS, "line 2: the file declares a DTD or entities"),
        (EXTERNAL_ENTITY, "line 2: the file declares a DTD or entities"),
        (
            b'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="x">\n<testcase name="caf\xe9"/></testsuite>',
            "line 3, column 20: not well-formed (invalid token) (the file is not UTF-8",
        ),
        (b"<html><body>Build 812 failed</body></html>", "line 1: the root element is <html>, not <testsuites>"),
        (
            b'<testsuites>\n  <testsuite name="a">\n    <testcase classname="A"/>\n  </testsuite>\n</testsuites>',
            "line 3: a <testcase> without a name",
        ),
        (
            b'{"tests": 3, "failures": 1}',
            "line 1, column 1: not well-formed (invalid token) (it does not start with <: is it XML at all?)",
        ),
        (b"", "The report is empty"),
    ],
    ids=["billion-laughs", "external-entity", "invalid-utf8", "not-junit", "no-name", "json", "empty"],
)
def test_a_file_that_is_not_a_safe_junit_report_is_refused_naming_the_line(story, dana, data, message):
    with pytest.raises(SearchError) as refused:
        service.triage(data, "PRD-1", dana)

    assert message in str(refused.value) and refused.value.status == 400
    assert "/etc/passwd" not in str(refused.value) and not Run.objects.exists()


def test_a_report_over_the_size_limit_is_refused_before_it_is_read(story, dana, client):
    client.force_login(dana)
    hundred_mb = b"<testsuite>" + b" " * (100 * 1024 * 1024) + b"</testsuite>"

    response = client.post("/api/runs?product=PRD-1", hundred_mb, content_type="application/xml")

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large" and "TRIAGE_MAX_BYTES" in response.json()["error"]["message"]
    with pytest.raises(junit.TooLarge):
        service.triage(hundred_mb, "PRD-1", dana)


def test_a_report_of_more_distinct_causes_than_the_limit_is_refused_before_one_is_searched(
    story, carol, client, settings
):
    """Each cause is a search: past TRIAGE_MAX_CAUSES a report would end at the request's deadline, a 503."""
    settings.TRIAGE_MAX_CAUSES = 5
    services = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot"]

    def report(causes: list[str]) -> bytes:
        cases = [
            f'<testcase classname="com.tramline.RiderTest" name="rides{i}">'
            '<error type="java.lang.IllegalStateException">java.lang.IllegalStateException: no rider\n'
            f"\tat com.tramline.{cause}Service.ride{cause}({cause}Service.java:7)</error></testcase>"
            for i, cause in enumerate(causes)
        ]
        return f'<testsuite name="night">{"".join(cases)}</testsuite>'.encode()

    client.force_login(carol)
    refused = client.post("/api/runs?product=PRD-1", report(services), content_type="application/xml")

    assert refused.status_code == 413, refused.content
    message = refused.json()["error"]["message"]
    assert "6 distinct causes" in message and "TRIAGE_MAX_CAUSES" in message and not Run.objects.exists()
    answered = client.post("/api/runs?product=PRD-1", report(services[:5] * 3), content_type="application/xml")
    assert answered.status_code == 200, answered.content
    assert len(answered.json()["groups"]) == 5


def test_huge_outputs_are_read_to_their_cause_and_bounded(story, dana):
    log = "DEBUG a line of the test's own logging that goes on\n" * 200_000  # about 10 MB
    report = (
        '<testsuite name="big"><testcase classname="com.tramline.billing.RenewalServiceTest" name="renewsHuge">'
        f'<error type="java.lang.NullPointerException"><![CDATA[{RENEWAL_NPE.split(chr(10), 2)[2]}]]></error>'
        f"<system-out><![CDATA[{log}]]></system-out></testcase></testsuite>"
    )

    answer = service.triage(report, "PRD-1", dana)

    assert answer["groups"][0]["bug"] == "BUG-101"
    assert len(json.dumps(answer)) < 20_000


# -- the four surfaces ------------------------------------------------------------------------


@pytest.mark.parametrize("runner", ["surefire", "pytest", "go"])
def test_rest_the_command_the_mcp_tool_and_the_staff_page_answer_the_same_triage(transactional_db, runner, dana):
    import io
    import os
    import re
    import sys

    import anyio
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from mcp import Client as MCPClient
    from mcp.client.stdio import StdioServerParameters
    from rest_framework.test import APIClient

    report = import_records(jsonl(*TRIAGE_STORY).splitlines())
    assert report.written and not report.problems
    data = fixture(runner)

    rest = APIClient()
    rest.force_authenticate(dana)
    over_rest = rest.post("/api/runs?product=PRD-1", data, content_type="application/xml")
    assert over_rest.status_code == 200, over_rest.content
    stored = rest.get(f"/api/runs/{over_rest.json()['run']}")

    printed = io.StringIO()
    call_command("triage", str(FIXTURES / f"{runner}.xml"), "--product", "PRD-1", "--user", "dana", stdout=printed)

    env = dict(
        os.environ, LOG_LEVEL="WARNING", SEARCH_RATE_LIMIT="off", EMBEDDED_PG_DATABASE=connection.settings_dict["NAME"]
    )
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--user", "dana"], cwd=str(FIXTURES.parents[2]), env=env
    )

    async def ask():
        async with MCPClient(params) as client:
            result = await client.call_tool("triage_run", {"junit": data.decode(), "product": "PRD-1"})
            return result.structured_content, result.is_error

    over_mcp, failed = anyio.run(ask)
    assert not failed, over_mcp

    page = Client()
    page.force_login(dana)
    uploaded = page.post("/triage/", {"product": "PRD-1", "file": io.BytesIO(data)}, follow=True)
    embedded = re.search(r'<script id="triage-json" type="application/json">(.*?)</script>', uploaded.text, re.S)
    over_ui = json.loads(embedded[1])

    expected = without_run(over_rest.json())
    assert expected["groups"], expected
    assert stored.json() == over_rest.json()
    assert without_run(json.loads(printed.getvalue())) == expected
    assert without_run(over_mcp) == expected
    assert without_run(over_ui) == expected


def test_errors_are_json_bodies_on_rest_and_tool_errors_over_mcp(story, dana, monkeypatch):
    from rest_framework.test import APIClient

    from mcp_bridge import server

    monkeypatch.setattr(server, "close_old_connections", lambda: None)  # inside the test's transaction

    rest = APIClient()
    rest.force_authenticate(dana)
    refused = rest.post("/api/runs?product=PRD-1", b"<html/>", content_type="application/xml")
    unknown = rest.get("/api/runs/999999")
    body, failed = server.answer("triage_run", {"junit": "<html/>", "product": "PRD-1"}, lambda: dana)

    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_junit"
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    assert failed and body == refused.json()


def test_suites_nested_thousands_deep_are_read_on_every_surface_as_a_team_member(story, carol, monkeypatch):
    """2,000 nested <testsuite>s around one failure: a RecursionError (a 500, an internal
    error over MCP) before; read without recursion now."""
    from django.test import Client
    from rest_framework.test import APIClient

    from mcp_bridge import server

    monkeypatch.setattr(server, "close_old_connections", lambda: None)  # inside the test's transaction
    failure = (
        '<testcase classname="com.tramline.billing.RenewalServiceTest" name="renewsDeep">'
        f'<error type="java.lang.NullPointerException"><![CDATA[{RENEWAL_NPE.split(chr(10), 2)[2]}]]></error>'
        "</testcase>"
    )
    deep = '<testsuite name="level">' * 2000 + failure + "</testsuite>" * 2000

    rest = APIClient()
    rest.force_authenticate(carol)
    over_rest = rest.post("/api/runs?product=PRD-1", deep.encode(), content_type="application/xml")
    body, failed = server.answer("triage_run", {"junit": deep, "product": "PRD-1"}, lambda: carol)
    page = Client()
    page.force_login(carol)
    uploaded = page.post("/triage/", {"product": "PRD-1", "file": io.BytesIO(deep.encode())}, follow=True)

    assert over_rest.status_code == 200, over_rest.content
    assert over_rest.json()["counts"]["failed"] == 1 and over_rest.json()["groups"][0]["bug"] == "BUG-101"
    assert not failed and body["groups"][0]["bug"] == "BUG-101"
    assert uploaded.status_code == 200 and "BUG-101" in uploaded.text


class CountingUploads(FileUploadHandler):
    """Counts every byte of an upload Django reads, and hands it on to Django's own handlers."""

    received = 0

    def receive_data_chunk(self, raw_data, start):
        CountingUploads.received += len(raw_data)
        return raw_data

    def file_complete(self, file_size):
        return None


def test_an_upload_declared_larger_than_any_report_is_refused_before_a_byte_of_it_is_read(story, carol, settings):
    """A multipart report over TRIAGE_MAX_BYTES was read whole (to a temporary file) first,
    and only then its size checked: refused on its declared length now, on REST and the page."""
    from django.test import Client
    from rest_framework.test import APIClient

    settings.TRIAGE_MAX_BYTES = 10_000
    settings.FILE_UPLOAD_HANDLERS = ["tests.test_triage.CountingUploads", *settings.FILE_UPLOAD_HANDLERS]
    CountingUploads.received = 0
    report = b"<testsuite>" + b" " * 200_000 + b"</testsuite>"

    rest = APIClient()
    rest.force_authenticate(carol)
    over_rest = rest.post("/api/runs?product=PRD-1", {"file": io.BytesIO(report)}, format="multipart")
    page = Client()
    page.force_login(carol)
    over_page = page.post("/triage/", {"product": "PRD-1", "file": io.BytesIO(report)})
    small = rest.post("/api/runs?product=PRD-1", {"file": io.BytesIO(b"<testsuite/>" + b" " * 100)}, format="multipart")

    assert over_rest.status_code == 413 and over_rest.json()["error"]["code"] == "too_large"
    assert "TRIAGE_MAX_BYTES" in over_rest.json()["error"]["message"]
    assert over_page.status_code == 413 and "TRIAGE_MAX_BYTES" in over_page.text and "<form" in over_page.text
    assert small.status_code == 200, small.content  # a small one is read, and triaged
    assert CountingUploads.received == 112  # the small one's bytes, and none of the large ones'


def test_the_triage_page_starts_on_the_product_a_person_triages_not_the_first_of_the_alphabet(story, carol, dana):
    from django.test import Client

    def chosen(user) -> str | None:
        page = Client()
        page.force_login(user)
        select = page.get("/triage/").text.split('id="triage-product"')[1].split("</select>")[0]
        found = re.search(r'<option value="([^"]*)"[^>]*\bselected\b', select)
        return found.group(1) if found else None

    # Dana sees every product and has triaged nothing: the page asks, it does not guess.
    assert Product.objects.count() > 1 and chosen(dana) == ""
    # Carol's only team's product is Tramline's.
    assert chosen(carol) == "PRD-1"
    # Once Dana has triaged a run of the other product, it is where her page starts.
    other = Product.objects.exclude(key="PRD-1").order_by("key").first()
    service.call({"product": other.key}, dana, data=fixture("pytest"), name="nightly.xml")
    assert chosen(dana) == other.key
