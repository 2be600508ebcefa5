"""Triage in CI (docs/triage.md, "In CI"): a night's run posts its report and gets an answer a
pipeline acts on: a Markdown summary for a pull request comment, and a gate on new causes."""

import io
import json
import re

import pytest
from django.core.management import call_command

from triage import summary
from triage.models import Run

from .test_triage import dana, fixture, story  # noqa: F401  (the triage story's fixtures)

pytestmark = pytest.mark.django_db


def test_accept_markdown_answers_a_summary_for_a_pull_request_comment(story, dana, client):  # noqa: F811
    client.force_login(dana)

    posted = client.post(
        "/api/runs?product=PRD-1&name=nightly.xml",
        fixture("surefire"),
        content_type="application/xml",
        headers={"accept": "text/markdown"},
    )

    assert posted.status_code == 200 and posted["Content-Type"].startswith("text/markdown")
    text = posted.content.decode()
    run = Run.objects.get()
    assert text.startswith("### Triage of `nightly.xml` for `PRD-1`: ")
    assert f"[Run {run.pk}](http://testserver/triage/?run={run.pk})" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    verdicts = [row.split(" | ")[0] for row in rows]
    assert verdicts == sorted(verdicts, key=lambda v: v != "| **new**") and "| **new**" in verdicts  # new first
    known = next(row for row in rows if "BUG-101" in row)
    assert "[BUG-101](http://testserver/records/BUG-101/) (high, " in known
    assert "`com.tramline.billing.RenewalServiceTest.renewsAnExpiredPassWithASavedCard`" in known
    # The same run again, by id, says the same.
    again = client.get(f"/api/runs/{run.pk}", headers={"accept": "text/markdown"})
    assert again.content.decode() == text


def test_an_error_asked_for_in_markdown_is_still_the_json_error_body(dana, client):  # noqa: F811
    client.force_login(dana)

    refused = client.post(
        "/api/runs", b"<testsuite/>", content_type="application/xml", headers={"accept": "text/markdown"}
    )

    assert refused.status_code == 400 and refused["Content-Type"] == "application/json"
    assert "product" in refused.json()["error"]["message"]


def test_fail_on_new_exits_3_when_a_cause_is_new_and_0_when_every_one_is_known(story, dana, tmp_path):  # noqa: F811
    report = tmp_path / "nightly.xml"
    report.write_bytes(fixture("surefire"))
    printed = io.StringIO()
    with pytest.raises(SystemExit) as gate:
        call_command("triage", str(report), "--product", "PRD-1", "--fail-on-new", stdout=printed)

    assert gate.value.code == 3
    new = [f["test"] for g in json.loads(printed.getvalue())["groups"] if g["verdict"] == "new" for f in g["failures"]]
    assert new
    known_only = fixture("surefire").decode()
    for test in new:  # the report without the new causes' test cases
        name = re.escape(test.rsplit(".", 1)[1])
        known_only = re.sub(rf'<testcase [^>]*name="{name}".*?</testcase>', "", known_only, flags=re.S)
    report.write_text(known_only)
    markdown = io.StringIO()
    call_command("triage", str(report), "--product", "PRD-1", "--fail-on-new", "--markdown", stdout=markdown)  # exit 0
    assert markdown.getvalue().startswith("### Triage of `nightly.xml` for `PRD-1`: 0 new causes")
    assert "**new**" not in markdown.getvalue() and "known" in markdown.getvalue()


def test_text_from_the_report_is_code_in_the_summary_never_markdown_or_a_broken_row():
    answer = {
        "run": 7,
        "product": "PRD-1",
        "name": "",
        "counts": {"tests": 2, "passed": 1, "failed": 1, "skipped": 0, "flaky": 0},
        "groups": [
            {
                "verdict": "new",
                "cause": "AssertionError: `a` | <b>b</b>\n**c**",
                "suggestions": [],
                "failures": [{"test": "t|1"}],
            }
        ],
    }

    row = summary.markdown(answer, "https://qa.example/").splitlines()[-1]

    assert row == "| **new** | ``AssertionError: `a` \\| <b>b</b> **c**`` | none likely | `t\\|1` |"
