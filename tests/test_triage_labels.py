"""Curators' triage decisions judged as labels (issue 50, item 1): `search_eval --from-links`
ranks each decided cause again as triage does, without the decision, among the bugs filed
before its run, and says how often the confirmed bug comes in the top 5 and a rejected first."""

import io
import json
import tempfile
from pathlib import Path

from django.core.management import call_command

from backlog.imports import import_records
from triage import evaluation, service

from .conftest import jsonl
from .test_triage import TRIAGE_STORY, dana, fixture, story  # noqa: F401  (fixtures)


def decided(dana):  # noqa: F811
    """A run of PRD-1 and a curator's two decisions on its NullPointerException, against the
    ranking: its second suggestion confirmed, its first rejected. Then a bug filed after the
    run, the first one again word for word, which the judging must not see."""
    run = service.triage(fixture("surefire"), "PRD-1", dana)
    npe = run["groups"][0]
    assert [s["key"] for s in npe["suggestions"]][:2] == ["BUG-101", "BUG-106"]
    for bug, decision in [("BUG-106", "confirmed"), ("BUG-101", "rejected")]:
        service.decide(run["run"], {"signature": npe["signature"], "bug": bug, "decision": decision}, dana)
    later = {**next(r for r in TRIAGE_STORY if r.get("key") == "BUG-101"), "key": "BUG-140"}
    assert import_records(jsonl(later).splitlines()).written


def test_confirmed_and_rejected_links_are_judged_without_themselves_and_never_the_future(story, dana):  # noqa: F811
    decided(dana)

    report = evaluation.decisions(["PRD-1"])

    # Ranked as triage ranked it, decisions aside: BUG-106 second (BUG-140, above it had it been
    # there, was filed after the run), the rejected BUG-101 first.
    assert report.data == {
        "confirmed": 1,
        "recall@5": 1.0,
        "mrr@10": 0.5,
        "rejected": 1,
        "rejected_first": 1.0,
        "unread": 0,
    }
    assert evaluation.decisions(["PRD-2"]) is None  # no decision there


def test_search_eval_from_links_reports_triage_decisions_with_or_without_duplicate_links(story, dana):  # noqa: F811
    decided(dana)
    stdout, out = io.StringIO(), Path(tempfile.mkdtemp()) / "labels.json"

    call_command("search_eval", "--from-links", "--product", "PRD-1", "--json", str(out), stdout=stdout)

    printed = stdout.getvalue()
    assert "Triage on curators' decisions: 1 confirmed, 1 rejected" in printed
    assert "confirmed bug in the top 5: 1.000; MRR@10: 0.500" in printed
    assert "a rejected bug ranked first: 1.000" in printed
    assert json.loads(out.read_text())["labels"]["triage decisions"]["mrr@10"] == 0.5
