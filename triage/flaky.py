"""Flaky across runs: a test that fails and passes on the same commit.

Develocity calls a test flaky when it fails and passes for the same code;
inside one report that is a rerun that passed (junit's flakyFailure, the
failure's `flaky`). Across runs it takes the commit each run tested (the
upload's `commit`, or the report's commit property: triage.junit) and what
each run kept of its tests: its failures (Failure rows), and of its passed
tests those that had failed in a kept run of the product (a test that never
failed says nothing of flakiness, and a night's 200,000 passes are not kept).

For each failing test, its last RECENT_RUNS runs whose outcome for it is
known, on this run's commit when it names one: how many it failed, and
whether it passed in one of them (`flipped`). A cause no known bug explains
whose every failing test flipped is **flaky**, not new (triage.service).
"""

from .contract import Recent
from .models import Failure, Run

RECENT_RUNS = 10  # a failing test's last runs whose outcome for it is known
RUNS_READ = 50  # runs of the product (of the commit) read for them, newest first
PASSED_KEPT = 20_000  # a run's passed tests kept (those that had failed before)


def passed_after_failing(product_id: int, passed: list[str]) -> list[str]:
    """Of `passed` (a new run's passed tests), those that failed in a kept run of the product."""
    if not passed:
        return []
    failed_before = Failure.objects.filter(run__product_id=product_id).values_list("test", flat=True).distinct()
    return sorted(set(failed_before).intersection(passed))[:PASSED_KEPT]


def runs(run: Run) -> list[tuple[int, list[str]]]:
    """The runs `recent` reads, newest first: (id, passed_after_failing) of at most RUNS_READ
    runs of the product up to `run`, of its commit when it names one."""
    runs = Run.objects.filter(product_id=run.product_id, created_at__lte=run.created_at)
    if run.commit:
        runs = runs.filter(commit=run.commit)
    return list(runs.order_by("-created_at", "-id").values_list("id", "passed_after_failing")[:RUNS_READ])


def recent(run: Run, tests: list[str], read: list[tuple[int, list[str]]], failed_in: dict[str, set[int]]):
    """Each of `tests` (failing in `run`) that ran in an earlier of `read` (runs()): its Recent.
    `failed_in`: test -> the ids of those runs it failed in (Failure rows)."""
    passed = {run_id: set(names) for run_id, names in read}
    found = {}
    for test in set(tests):
        outcomes = []
        for run_id, _ in read:
            if run_id == run.pk or run_id in failed_in[test]:
                outcomes.append(False)
            elif test in passed[run_id]:
                outcomes.append(True)
            if len(outcomes) == RECENT_RUNS:
                break
        if len(outcomes) > 1:
            found[test] = Recent(
                failed=outcomes.count(False),
                runs=len(outcomes),
                commit=run.commit or None,
                flipped=bool(run.commit) and any(outcomes),
            )
    return found


def said(recent: dict) -> str:
    """What a person reads of an answer's `recent`: "failed 3 of the last 10 runs on abc123"."""
    where = f" on {recent['commit']}" if recent.get("commit") else ""
    return f"failed {recent['failed']} of the last {recent['runs']} runs{where}"
