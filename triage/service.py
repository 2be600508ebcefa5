"""Triage: a JUnit report in, its failures' causes and their likely known bugs out.

The one module every surface calls (REST `POST /api/runs` and `GET
/api/runs/<id>`, the MCP tool `triage_run`, `manage.py triage`, the staff
UI's /triage/ page): they pass what they were given and return what comes
back, so the same file gets the same triage everywhere. The answer is built
here only (`_answer`, triage.contract.TriageResponse) and stored with its
run, kept current as curators decide.

The steps: read the report (triage.junit), read each failure as a cause and
group by it (triage.failures), find each cause's likely bugs
(triage.matching), put curators' decisions first, link each failing test
to its test case record, add the history of earlier runs, store the run.

Access: the run's product must be one the user may see, and every
statement that reads bugs, test cases, runs or decisions is limited to it.
"""

import re
from collections import defaultdict
from collections.abc import Mapping
from datetime import timedelta
from itertools import takewhile
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Min
from django.utils import timezone

from backlog import access
from backlog.models import Bug, Product, QATest
from search.contract import NotFound, SearchError
from search.contract.budget import fit
from search.service import parse

from . import failures, flaky, junit, matching
from .contract import (
    Counts,
    DecisionRequest,
    Draft,
    FailedTest,
    Group,
    Recent,
    Suggestion,
    TriageRequest,
    TriageResponse,
)
from .models import Decision, Failure, Run

HISTORY_RUNS = 100  # earlier runs read for "failing for N runs"
AGENT_TOKENS = 4_000  # the triage_run tool's answer when the agent sets no max_tokens
DRAFT_CHARS = 3000  # of a draft's description: a URL carries it to the report form


def call(
    params: Mapping[str, Any],
    user=None,
    *,
    data: bytes | None = None,
    name: str = "",
    default_tokens: int | None = None,
) -> dict:
    """The triage_run operation: `junit` (the report's text; or `data`, its bytes, as
    uploaded) with `product`, or `run` (a stored run's id); at most `max_tokens`
    (`default_tokens` when not given: an agent's answer is bounded by default).
    `name`: the report's file name, kept with the run."""
    if data is not None:
        params = {**params, "junit": "(the bytes uploaded)"}  # checked as given; `data` is what is read
    request = parse(TriageRequest, params)
    if request.run is not None:
        answer = run_answer(request.run, user)
    else:
        report = data if data is not None else request.junit
        answer = triage(report, request.product, user, name, request.commit)
    return within(answer, request.max_tokens or default_tokens)


def triage(report: bytes | str, product_key: str, user=None, name: str = "", commit: str | None = None) -> dict:
    """Triage a report for `product_key`, store the run; its answer (TriageResponse's JSON).
    `commit`: the one the run tested (else the report's commit property)."""
    product = _product(product_key, user)
    cases, named = junit.report(report)
    failed = [case for case in cases if case.failed]
    readings, groups = _causes(failed)
    matched = matching.match(readings, matching.scope_for(product.key, user))
    _apply_decisions(product, matched)
    tests = _test_cases(product, [case.full_name for case in failed], user)
    with transaction.atomic():
        run = Run.objects.create(
            product=product,
            name=name[:255],
            created_at=timezone.now(),
            created_by=user if getattr(user, "pk", None) else None,
            tests=len(cases),
            passed=sum(case.outcome == "passed" and not case.flaky for case in cases),
            failed=sum(case.outcome in junit.FAILED for case in cases),
            skipped=sum(case.outcome == "skipped" for case in cases),
            flaky=sum(case.flaky for case in cases),
            commit=commit or named,
            passed_after_failing=flaky.passed_after_failing(product.pk, _passed(cases)),
        )
        rows = []
        for signature, members in groups.items():
            top = _known(matched[signature])
            rows += [
                Failure(
                    run=run,
                    test=case.full_name[:1000],
                    signature=signature,
                    outcome=case.outcome if case.outcome in junit.FAILED else "failure",
                    flaky=case.flaky,
                    bug_id=top.bug_id if top else None,
                    band=top.band if top else "",
                )
                for case in members
            ]
        Failure.objects.bulk_create(rows)
        history = _history(run, list(groups), [case.full_name[:1000] for case in failed])
        run.answer = _answer(run, product, readings, groups, matched, tests, history).model_dump(mode="json")
        run.save(update_fields=["answer"])
        Run.objects.filter(product=product, created_at__lt=run.created_at - _kept()).delete()
    return run.answer


def run_answer(run_id: int, user=None) -> dict:
    """A stored run's triage, as answered then, with the decisions taken since."""
    return _run(run_id, user).answer


def decide(run_id: int, params: Mapping[str, Any], user=None) -> dict:
    """A curator confirms or rejects one suggested link of a run's cause to a bug: kept for
    the next runs (their failures of this cause get it first, or never), and shown in
    this run's answer at once. The run's answer comes back."""
    request = parse(DecisionRequest, params)
    with transaction.atomic():
        run = _run(run_id, user, lock=True)
        groups = run.answer["groups"]
        index = next((i for i, g in enumerate(groups) if g["signature"] == request.signature), None)
        if index is None:
            raise SearchError(f"signature: run {run_id} has no cause {request.signature}; take one of its groups'.")
        bug = Bug.objects.filter(product=run.product, key__iexact=request.bug).first()
        if bug is None:
            raise NotFound(f"bug: {request.bug!r} is no bug of {run.product.key}; give one of its bug keys.")
        Decision.objects.update_or_create(
            product=run.product,
            signature=request.signature,
            bug=bug,
            defaults={
                "decision": request.decision,
                "decided_by": user if getattr(user, "pk", None) else None,
                "decided_at": timezone.now(),
                "run": run,
            },
        )
        groups[index] = _redecide(groups[index], bug, request.decision)
        run.save(update_fields=["answer"])
    return run.answer


def within(answer: dict, max_tokens: int | None) -> dict:
    """The answer with as many whole groups as fit in `max_tokens` (search.budget's rule)."""
    if max_tokens is None:
        return answer
    groups = answer["groups"]

    def build(n: int) -> TriageResponse:
        return TriageResponse.model_validate({**answer, "groups": groups[:n], "omitted": len(groups) - n})

    return fit(build, len(groups), max_tokens, "group").model_dump(mode="json")


# -- reading --------------------------------------------------------------------------------


def _product(key: str, user) -> Product:
    found = access.visible(Product.objects.filter(key__iexact=key), user).first()
    if found is None:
        raise NotFound(
            f"product: no product you can see has the key {key!r}; give the key of the product the run tested."
        )
    return found


def _run(run_id: int, user, lock: bool = False) -> Run:
    runs = access.visible(Run.objects.select_related("product"), user)
    if lock:
        runs = runs.select_for_update(of=("self",))
    found = runs.filter(pk=run_id).first()
    if found is None:
        raise NotFound(
            f"run: no run {run_id} of a product you can see; runs are kept {settings.TRIAGE_KEEP_DAYS} days."
        )
    return found


def _kept() -> timedelta:
    return timedelta(days=settings.TRIAGE_KEEP_DAYS)


def _known(matches: list) -> Any:
    """The likeliest bug (of Matches or Suggestions, best first) when it is likely enough
    to call the cause known, else None."""
    return matches[0] if matches and matches[0].confidence >= matching.KNOWN_FROM else None


def _causes(failed: list[junit.Case]) -> tuple[dict, dict[str, list]]:
    """Each cause's reading and failing cases, by signature; refused past the limits (413)."""
    if len(failed) > settings.TRIAGE_MAX_FAILURES:
        raise junit.TooLarge(
            f"The report holds {len(failed):,} failures; at most {settings.TRIAGE_MAX_FAILURES:,} are triaged at "
            "once (TRIAGE_MAX_FAILURES). Send the suites in parts."
        )
    groups: dict[str, list] = defaultdict(list)
    readings = {}
    for case in failed:
        reading = failures.read(case)
        readings.setdefault(reading.signature, reading)
        groups[reading.signature].append(case)
    if len(readings) > settings.TRIAGE_MAX_CAUSES:  # each is a search: refused before the first
        raise junit.TooLarge(
            f"The report's {len(failed):,} failures have {len(readings):,} distinct causes; at most "
            f"{settings.TRIAGE_MAX_CAUSES:,} are triaged at once (TRIAGE_MAX_CAUSES), each one search. "
            "Send the suites in parts."
        )
    return readings, groups


def _verdict(matches: list, recent: list) -> dict:
    """A group's verdict, bug and band (the last two None unless it is known). No known bug,
    and every failing test of it passed on this commit too (`recent`, triage.flaky): flaky."""
    top = _known(matches)
    if top is None:
        return {"verdict": "flaky" if all(r and r.flipped for r in recent) else "new", "bug": None, "band": None}
    return {"verdict": "known", "bug": top.key, "band": top.band}


def _confirmed(bug: Bug) -> matching.Match:
    """A bug a curator confirmed for a cause: first, in the high band, whatever the evidence."""
    return matching.Match(
        bug.id, bug.key, bug.title, bug.status, bug.severity, 1.0, "high", (0, 0), [], Decision.CONFIRMED
    )


def _apply_decisions(product: Product, matched: dict[str, list[matching.Match]]) -> None:
    """Curators' decisions on these causes: a confirmed bug first, in the high band; a rejected one out."""
    decisions = Decision.objects.filter(product=product, signature__in=list(matched)).select_related("bug")
    for decision in decisions.order_by("decided_at"):
        matches = matched[decision.signature]
        matches[:] = [m for m in matches if m.bug_id != decision.bug_id]
        if decision.decision == Decision.CONFIRMED:
            matches.insert(0, _confirmed(decision.bug))


def _redecide(group: dict, bug: Bug, decision: str) -> dict:
    """A stored group after a decision, as _apply_decisions and _answer would have answered it."""
    suggestions = [Suggestion.model_validate(s) for s in group["suggestions"] if s["key"] != bug.key]
    if decision == Decision.CONFIRMED:
        suggestions.insert(0, _suggestion(_confirmed(bug)))
    suggestions = suggestions[: matching.SHOWN]
    recent = [Recent.model_validate(f["recent"]) if f.get("recent") else None for f in group["failures"]]
    return Group.model_validate({**group, "suggestions": suggestions, **_verdict(suggestions, recent)}).model_dump(
        mode="json"
    )


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_IN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*-\d+")


def _normalized(name: str) -> str:
    """A test's name as words: `testRenewExpiredPass`, `test_renew_expired_pass` and
    "Renew expired pass" all read `renew expired pass`."""
    words = re.split(r"[^a-z0-9]+", _CAMEL.sub(" ", name).lower())
    words = [w for w in words if w]
    return " ".join(words[1:] if words[:1] == ["test"] else words)


def _test_cases(product: Product, names: list[str], user) -> dict[str, tuple[str, list[str]]]:
    """Each failing test's test case record (name -> (its key, the bugs linked to it)):
    the case whose key the name holds (`[TEST-3] renews a pass`), else the one whose
    title is the test's name as words (its method or title part, or its whole name)."""
    cases = access.visible(QATest.objects.filter(product=product), user).values_list("id", "key", "title")
    by_key, by_title = {}, {}
    for case_id, key, title in cases:
        by_key[key.upper()] = (case_id, key)
        by_title.setdefault(_normalized(title), (case_id, key))
    if not by_key:
        return {}
    linked = {}
    for name in dict.fromkeys(names):
        found = next((by_key[k.upper()] for k in _KEY_IN_NAME.findall(name) if k.upper() in by_key), None)
        if found is None:
            last = re.split(r"::|[.›>]|\s[-–]\s", name)[-1]
            found = by_title.get(_normalized(last)) or by_title.get(_normalized(name))
        if found is not None:
            linked[name] = found
    bugs = defaultdict(list)
    rows = Bug.objects.filter(product=product, test_id__in={case_id for case_id, _ in linked.values()})
    for test_id, key in rows.order_by("-created_at").values_list("test_id", "key"):
        bugs[test_id].append(key)
    return {name: (key, bugs[case_id]) for name, (case_id, key) in linked.items()}


def _history(run: Run, signatures: list[str], tests: list[str]) -> dict:
    """first seen and runs seen per signature; runs in a row failing per test (this run included)."""
    earlier = Failure.objects.filter(run__product_id=run.product_id, signature__in=signatures)
    seen = {
        row["signature"]: (row["first"], row["runs"])
        for row in earlier.values("signature").annotate(first=Min("run__created_at"), runs=Count("run", distinct=True))
    }
    recent = list(
        Run.objects.filter(product_id=run.product_id, created_at__lte=run.created_at)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)[:HISTORY_RUNS]
    )
    of_commit = flaky.runs(run)
    failed_in = defaultdict(set)  # one statement for the streak's runs and flaky's
    read = {*recent, *(run_id for run_id, _ in of_commit)}
    for test, run_id in Failure.objects.filter(run_id__in=read, test__in=set(tests)).values_list("test", "run_id"):
        failed_in[test].add(run_id)
    streak = {test: sum(1 for _ in takewhile(failed_in[test].__contains__, recent)) for test in tests}
    return {"seen": seen, "streak": streak, "recent": flaky.recent(run, tests, of_commit, failed_in)}


def _answer(run, product, readings, groups, matched, tests, history) -> TriageResponse:
    built = []
    for signature, members in sorted(groups.items(), key=lambda item: -len(item[1])):
        reading, matches = readings[signature], matched[signature]
        first_seen, runs_seen = history["seen"].get(signature, (run.created_at, 1))
        built.append(
            Group(
                signature=signature,
                cause=reading.cause,
                frames=list(reading.frames[:3]),
                **_verdict(matches, [history["recent"].get(case.full_name[:1000]) for case in members]),
                suggestions=[_suggestion(m) for m in matches if m.confidence >= matching.SUGGEST_FROM][
                    : matching.SHOWN
                ],
                failures=[_failed(case, tests, history) for case in members],
                first_seen=first_seen,
                runs_seen=runs_seen,
                draft=_draft(members[0], reading),
            )
        )
    return TriageResponse(
        run=run.pk,
        product=product.key,
        name=run.name,
        commit=run.commit,
        created_at=run.created_at,
        counts=Counts(tests=run.tests, passed=run.passed, failed=run.failed, skipped=run.skipped, flaky=run.flaky),
        groups=built,
    )


def _suggestion(m: matching.Match) -> Suggestion:
    return Suggestion.model_validate(m, from_attributes=True)


def _failed(case: junit.Case, tests: dict, history: dict) -> FailedTest:
    name = case.full_name[:1000]
    key, bugs = tests.get(case.full_name, (None, []))
    return FailedTest(
        test=name,
        outcome=case.outcome if case.outcome in junit.FAILED else "failure",
        flaky=case.flaky,
        message=case.message[:200],
        test_case=key,
        case_bugs=bugs[:5],
        failing_runs=history["streak"].get(name, 1),
        recent=history["recent"].get(name),
    )


def _passed(cases: list[junit.Case]) -> list[str]:
    return [case.full_name[:1000] for case in cases if case.outcome == "passed" and not case.flaky]


def _draft(case: junit.Case, reading: failures.Reading) -> Draft:
    """A new bug's draft: the test and the cause as its title, the failure as printed as its text."""
    test = case.name if len(case.name) <= 80 else case.name[:77] + "..."
    title = f"{test} fails: {reading.cause}"
    description = f"Failing test: {case.full_name}\n\n{case.text or case.message}"
    return Draft(title=title[:200], description=description[:DRAFT_CHARS])
