"""Triage on eval/triage-hadoop: how often a failure gets its bug first, "new" when its bug is
not indexed, pure groups, what curators' decisions add, and the time of a 1,000-failure report.

    .venv/bin/python bench/sets/triage_set.py          # writes eval/triage-hadoop
    .venv/bin/python bench/triage_bench.py [--keep-db] [--rounds 5]

A database of its own (search_eval_triage, dropped after unless --keep-db)
holds the set's records. Each of the set's four reports is triaged as
`manage.py triage` does it (triage.service), as a member of HADOOP's team
(the user: access counted inside every statement), or with --superuser as
no one in particular (every product, the planner's own statistics).

- top-1: a failure whose bug is indexed, with that bug as its verdict;
- new: a failure whose bug is held out, called new; known called new: a
  failure whose bug is indexed, called new;
- purity: the share of groups whose failures all come from one bug (and the
  share of failures in such groups);
- decisions: a curator confirms the right bug of every group where it was
  among the suggestions but not first, and rejects a wrong verdict; the
  reports are triaged again: top-1 before and after;
- time: one report of 1,000 failures (the set's failures, repeated under
  other test names, so 188 causes), the median of --rounds triages.
"""

import argparse
import re
import statistics
import time
from collections import Counter
from pathlib import Path

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)
from timing import machine

ROOT = Path(__file__).resolve().parent.parent
SET = ROOT / "eval" / "triage-hadoop"


def truth() -> dict[str, tuple[str, str]]:
    rows = [line.split("\t") for line in (SET / "truth.tsv").read_text().splitlines()[1:]]
    return {test: (answer, cause) for _, test, answer, cause in rows}


def scores(answers: list[dict], judged: dict[str, tuple[str, str]]) -> dict:
    right = known = new = said_new = wrongly_new = 0
    pure_groups = groups = pure_failures = failures = 0
    for answer in answers:
        for group in answer["groups"]:
            causes = {judged[f["test"]][1] for f in group["failures"]}
            groups += 1
            pure_groups += len(causes) == 1
            failures += len(group["failures"])
            pure_failures += len(group["failures"]) if len(causes) == 1 else 0
            for failure in group["failures"]:
                expected, _ = judged[failure["test"]]
                if expected == "new":
                    new += 1
                    said_new += group["verdict"] == "new"
                else:
                    known += 1
                    right += group.get("bug") == expected
                    wrongly_new += group["verdict"] == "new"
    return {
        "top1": right / known,
        "new": said_new / new,
        "known_called_new": wrongly_new / known,
        "purity_groups": pure_groups / groups,
        "purity_failures": pure_failures / failures,
        "known": known,
        "held_out": new,
        "groups": groups,
    }


def thousand(distinct: bool = False, count: int = 1000) -> bytes:
    """One report of `count` failures: the set's failing test cases, renamed on each repeat
    (188 causes); `distinct`: each its own cause too, its top frame's method renamed."""
    cases = []
    for path in sorted(SET.glob("run-*.xml")):
        cases += re.findall(
            r"<testcase [^>]*>(?:(?!</testcase>).)*?(?:error|flakyFailure)(?:(?!</testcase>).)*</testcase>",
            path.read_text(),
            re.S,
        )
    picked = [
        re.sub(r'name="(\w+)"', rf'name="\1R{i // len(cases)}"', cases[i % len(cases)], count=1) for i in range(count)
    ]
    if distinct:
        picked = [re.sub(r"(at [\w.$]+\.)(\w+)\(", rf"\1\2V{i}(", case, count=1) for i, case in enumerate(picked)]
    return ('<testsuites><testsuite name="nightly">' + "\n".join(picked) + "</testsuite></testsuites>").encode()


def member():
    """Hanna, who sees HADOOP's records through its team, as a user of the product does."""
    from django.contrib.auth.models import Group, User

    from backlog.models import Product

    team, _ = Group.objects.get_or_create(name="hadoop team")
    Product.objects.get(key="HADOOP").teams.add(team)
    user, _ = User.objects.get_or_create(username="hanna")
    user.groups.add(team)
    return user


def main() -> None:
    global SET
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--superuser", action="store_true", help="triage as no one in particular (every product)")
    parser.add_argument("--set", type=Path, default=SET, help="the set (eval/triage-hadoop-pytest: Python's shape)")
    parser.add_argument(
        "--causes", type=int, default=500, help="also time a report of this many failures, each its own cause"
    )
    args = parser.parse_args()
    SET = args.set

    from django.db import connection

    from backlog.imports import import_records
    from search.evaluation.runner import fresh_database
    from triage import service
    from triage.models import Decision

    judged = truth()
    reports = sorted(SET.glob("run-*.xml"))
    with fresh_database("search_eval_triage", keep=args.keep_db):
        lines = (SET / "records.jsonl").read_text(encoding="utf-8").splitlines()
        imported = import_records(lines)
        assert imported.written and not imported.problems, imported.problems[:3]
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        user = None if args.superuser else member()
        answers = [service.triage(path.read_bytes(), "HADOOP", user, name=path.name) for path in reports]
        before = scores(answers, judged)
        bands = Counter()
        for answer in answers:
            for group in answer["groups"]:
                expected = judged[group["failures"][0]["test"]][0]
                if group["suggestions"]:
                    top = group["suggestions"][0]
                    bands[top["band"], top["key"] == expected] += 1
        decided = 0
        for answer in answers:
            for group in answer["groups"]:
                expected = judged[group["failures"][0]["test"]][0]
                keys = [s["key"] for s in group["suggestions"]]
                decision = None
                if expected != "new" and expected in keys[1:]:
                    decision = (expected, "confirmed")
                elif group.get("bug") and group["bug"] != expected:
                    decision = (group["bug"], "rejected")
                if decision:
                    service.decide(
                        answer["run"],
                        {"signature": group["signature"], "bug": decision[0], "decision": decision[1]},
                        user,
                    )
                    decided += 1
        again = scores([service.triage(path.read_bytes(), "HADOOP", user) for path in reports], judged)
        Decision.objects.all().delete()
        big = thousand()
        service.triage(big, "HADOOP", user)  # warm: statistics, plans, the code
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            timed = service.triage(big, "HADOOP", user)
            times.append(time.perf_counter() - start)
        many = thousand(distinct=True, count=args.causes)
        start = time.perf_counter()
        distinct = len(service.triage(many, "HADOOP", user)["groups"])
        distinct_time = time.perf_counter() - start
    failures = sum(len(g["failures"]) for g in timed["groups"])
    who = "no one in particular" if user is None else "a member of HADOOP's team"
    print(
        f"machine: {machine()}; as {who}; set: {before['known']} failures of indexed bugs, "
        f"{before['held_out']} of held-out ones, {before['groups']} groups"
    )
    print(
        f"top-1 right {before['top1']:.3f}; new said for held-out {before['new']:.3f}; "
        f"known called new {before['known_called_new']:.3f}"
    )
    print(f"groups pure {before['purity_groups']:.3f} (failures in pure groups {before['purity_failures']:.3f})")
    print(
        "top suggestion by band (right, wrong): "
        + ", ".join(f"{b} {bands[b, True]}/{bands[b, False]}" for b in ("high", "medium", "low"))
    )
    print(
        f"after {decided} decisions: top-1 {again['top1']:.3f}; new {again['new']:.3f}; "
        f"known called new {again['known_called_new']:.3f}"
    )
    print(
        f"1,000-failure report ({failures} failures, {len(timed['groups'])} causes): "
        f"median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}) over {args.rounds}"
    )
    print(f"{args.causes:,} failures, each its own cause ({distinct} causes; some lack frames): {distinct_time:.2f} s")


if __name__ == "__main__":
    main()
