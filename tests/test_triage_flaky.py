"""Flaky across runs (triage.flaky): a test that fails and passes on the same commit is flaky,
and a cause no known bug explains whose every failing test did so is "flaky", not "new"."""

import pytest

from triage import service
from triage.models import Run

from .test_triage import dana, story  # noqa: F401  (the triage story's fixtures)

pytestmark = pytest.mark.django_db

TRACE = "java.lang.IllegalStateException: gate not synced\n\tat com.tramline.gate.GateSync.await(GateSync.java:88)"


def report(failing: bool, commit_property: str = "") -> str:
    gate = f'<failure type="java.lang.IllegalStateException"><![CDATA[{TRACE}]]></failure>' if failing else ""
    properties = (
        f'<properties><property name="git.commit" value="{commit_property}"/></properties>' if commit_property else ""
    )
    return (
        f'<testsuite name="gate">{properties}'
        f'<testcase classname="com.tramline.gate.GateSyncTest" name="syncsOnReconnect">{gate}</testcase>'
        '<testcase classname="com.tramline.gate.GateSyncTest" name="opensTheGate"/></testsuite>'
    )


def only_group(answer: dict) -> dict:
    (group,) = answer["groups"]
    return group


def test_a_test_that_failed_and_passed_on_one_commit_is_flaky_with_its_rate(story, dana, client):  # noqa: F811
    first = only_group(service.triage(report(True), "PRD-1", dana, commit="abc123"))
    assert first["verdict"] == "new" and "recent" not in first["failures"][0]  # one run: nothing to say yet
    service.triage(report(False), "PRD-1", dana, commit="abc123")  # it passes on the same commit
    other = only_group(service.triage(report(True), "PRD-1", dana, commit="def456"))
    assert other["verdict"] == "new"  # on another commit it has no history: new code may have broken it

    client.force_login(dana)
    answer = client.post("/api/runs?product=PRD-1&commit=abc123", report(True), content_type="application/xml").json()

    group = only_group(answer)
    assert answer["commit"] == "abc123"
    assert group["verdict"] == "flaky" and "bug" not in group
    assert group["failures"][0]["recent"] == {"failed": 2, "runs": 3, "commit": "abc123", "flipped": True}
    page = client.get(f"/triage/?run={answer['run']}").content.decode()
    assert "Flaky: passed on this commit too" in page and "failed 2 of the last 3 runs on <code>abc123</code>" in page
    summary = client.get(f"/api/runs/{answer['run']}", headers={"accept": "text/markdown"}).content.decode()
    assert "| flaky (failed 2 of the last 3 runs on abc123) |" in summary and "0 new causes" in summary


def test_the_report_s_commit_property_names_the_commit_when_the_upload_does_not(story, dana):  # noqa: F811
    service.triage(report(True, commit_property="f00d42"), "PRD-1", dana)
    service.triage(report(False, commit_property="f00d42"), "PRD-1", dana)
    answer = service.triage(report(True, commit_property="f00d42"), "PRD-1", dana)

    assert Run.objects.filter(commit="f00d42").count() == 3
    assert only_group(answer)["verdict"] == "flaky"


def test_without_a_commit_the_rate_is_shown_but_nothing_is_called_flaky(story, dana):  # noqa: F811
    for failing in (True, False, True, True):
        answer = service.triage(report(failing), "PRD-1", dana)

    group = only_group(answer)
    assert group["verdict"] == "new"  # the code may have changed between the runs
    assert group["failures"][0]["recent"] == {"failed": 3, "runs": 4, "flipped": False}


def test_a_commit_that_is_not_one_is_a_400_naming_the_field(story, dana, client):  # noqa: F811
    client.force_login(dana)

    refused = client.post("/api/runs?product=PRD-1&commit=a%20b;rm", report(True), content_type="application/xml")

    assert refused.status_code == 400 and "commit" in refused.json()["error"]["message"]
    assert not Run.objects.exists()
