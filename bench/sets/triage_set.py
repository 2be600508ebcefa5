"""Build eval/triage-hadoop: nightly JUnit reports whose failures carry gitbugs-hadoop bugs' traces.

    .venv/bin/python bench/sets/triage_set.py [--source ../shared/eval/gitbugs-hadoop] [--out eval/triage-hadoop]

The bugs with a Java trace are those of eval/trace-hadoop (at least
MIN_FRAMES frames and a line of text above the first: bench/sets/trace_set.py
reads them, with patterns of its own, not the code measured). A seeded
quarter of them is held out of the corpus: their failures' answer is "new".
A held-out trace whose top frames another bug of the corpus also holds (3 of
5) is left out of the set, as its answer would be that bug, not "new".

Each bug fails 1 to 3 tests of REPORTS reports (Surefire's layout, nested
`testsuites`, and a Gradle-like one), printed as a test run prints a
fault: the exception line, its numbers and temporary paths changed, and
the bug's top frames (3 to 12, as deep as that run's stack went) with other
line numbers, then the test's frame and JUnit's, Surefire's and
reflection's; a quarter of them as a thread's uncaught exception with a log
line and time stamp above; a quarter wrapped, as a test that waits on a
Future sees it (`ExecutionException`, FutureTask's frames, then `Caused
by:` the fault, `... 12 more`); a quarter as the test's own
`AssertionError` with the fault as its `Caused by:`. Passing tests are mixed in, some tests
flaky (passed on a rerun). truth.tsv says, per failing test, the bug (or
`new`) and the cause (the bug's key either way), which groups must not mix.
"""

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trace_set import FRAME, MARKUP, MIN_FRAMES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEED = 38
HELD_OUT = 0.25
REPORTS = 4
MAX_FRAMES = 12
RUNNER = [
    "at sun.reflect.NativeMethodAccessorImpl.invoke0(Native Method)",
    "at sun.reflect.NativeMethodAccessorImpl.invoke(NativeMethodAccessorImpl.java:62)",
    "at java.lang.reflect.Method.invoke(Method.java:498)",
    "at org.junit.runners.model.FrameworkMethod$1.runReflectiveCall(FrameworkMethod.java:50)",
    "at org.junit.internal.runners.model.ReflectiveCallable.run(ReflectiveCallable.java:12)",
    "at org.junit.runners.ParentRunner.run(ParentRunner.java:363)",
    "at org.apache.maven.surefire.junit4.JUnit4Provider.execute(JUnit4Provider.java:365)",
    "at org.apache.maven.surefire.booter.ForkedBooter.main(ForkedBooter.java:418)",
]
THREADS = ["IPC Server handler 3 on 8020", "DataXceiver for client /127.0.0.1:51234", "main", "ResponseProcessor"]
_NAME = re.compile(r"at\s+([\w$.<>/]+)\(")


def trace_of(description: str) -> tuple[str, list[str]] | None:
    frames = list(FRAME.finditer(description))
    if len(frames) < MIN_FRAMES:
        return None
    lines = [MARKUP.sub("", line).strip() for line in description[: frames[0].start()].split("\n")]
    exception = next((line for line in reversed(lines) if re.search(r"[^\W\d_]", line)), "")
    return (exception, [f[0] for f in frames[:MAX_FRAMES]]) if exception else None


def names(frames: list[str]) -> list[str]:
    """class.method of each frame (the last two dotted parts), this script's own reading."""
    return [".".join(m[1].split("/")[-1].split(".")[-2:]) for f in frames if (m := _NAME.search(f))]


def shifted(frame: str, rng: random.Random) -> str:
    return re.sub(r":(\d+)\)", lambda m: f":{int(m[1]) + rng.randint(1, 40)})", frame)


def varied(exception: str, rng: random.Random) -> str:
    """The exception line as another run prints it: its numbers and temporary paths are others."""
    exception = re.sub(r"\b\d{2,}\b", lambda m: str(int(m[0]) + rng.randint(1, 999)), exception)
    return re.sub(r"/tmp/[\w./-]+", f"/tmp/junit{rng.randint(1000, 9999)}/data", exception)


def printed(exception: str, frames: list[str], test: str, style: int, rng: random.Random) -> str:
    exception = varied(exception, rng)
    own = [shifted(f, rng) for f in frames[: rng.randint(min(3, len(frames)), len(frames))]]  # as deep as it goes
    test_frame = f"at {test}(Test.java:{rng.randint(30, 400)})"
    if style == 3:  # a test's assertion, the fault as its cause
        return "\n".join(
            ["java.lang.AssertionError: expected the call to succeed", "\tat org.junit.Assert.fail(Assert.java:89)"]
            + [f"\t{test_frame}", *(f"\t{f}" for f in RUNNER), f"Caused by: {exception}"]
            + [f"\t{f}" for f in own]
            + [f"\t... {rng.randint(5, 30)} more"]
        )
    if style == 1:  # a thread's uncaught exception, a log line above
        stamp = f"2026-03-{rng.randint(10, 28)} 02:{rng.randint(10, 59)}:{rng.randint(10, 59)},{rng.randint(100, 999)}"
        head = [
            f"{stamp} WARN  [{rng.choice(THREADS)}] test.Harness - a worker failed",
            f'Exception in thread "{rng.choice(THREADS)}" {exception}',
        ]
        return "\n".join(head + [f"\t{f}" for f in own + [test_frame] + RUNNER])
    if style == 2:  # seen through a Future
        wrapper = [
            f"java.util.concurrent.ExecutionException: {exception}",
            "\tat java.util.concurrent.FutureTask.report(FutureTask.java:122)",
            "\tat java.util.concurrent.FutureTask.get(FutureTask.java:192)",
            f"\t{test_frame}",
            *(f"\t{f}" for f in RUNNER),
            f"Caused by: {exception}",
        ]
        return "\n".join(
            wrapper
            + [f"\t{f}" for f in own]
            + ["\tat java.util.concurrent.FutureTask.run(FutureTask.java:266)", "\t... 12 more"]
        )
    return "\n".join([exception] + [f"\t{f}" for f in own + [test_frame] + RUNNER])


def build(source: Path, out: Path) -> dict:
    records = [json.loads(line) for line in (source / "records.jsonl").open(encoding="utf-8")]
    traced = {r["key"]: t for r in records if r["kind"] == "bug" and (t := trace_of(r.get("description") or ""))}
    rng = random.Random(SEED)
    keys = sorted(traced)
    held = set(rng.sample(keys, round(len(keys) * HELD_OUT)))
    corpus = [r for r in records if r["key"] not in held]
    corpus_frames = [
        set(names([f[0] for f in FRAME.finditer(r.get("description") or "")])) for r in corpus if r["kind"] == "bug"
    ]
    ambiguous = {k for k in held if any(len(set(names(traced[k][1][:5])) & frames) >= 3 for frames in corpus_frames)}
    out.mkdir(parents=True, exist_ok=True)
    with (out / "records.jsonl").open("w", encoding="utf-8") as written:
        for record in corpus:
            written.write(json.dumps(record, ensure_ascii=False) + "\n")
    (out / ".gitignore").write_text("# written by bench/sets/triage_set.py from gitbugs-hadoop\nrecords.jsonl\n")
    failing = [(k, "new" if k in held else k) for k in keys if k not in ambiguous]
    rng.shuffle(failing)
    truth, counts = [], {"known": 0, "new": 0, "failures": 0, "passing": 0, "flaky": 0}
    suites: list[list[list[str]]] = [[] for _ in range(REPORTS)]
    for index, (key, answer) in enumerate(failing):
        exception, frames = traced[key]
        top = [re.sub(r"\W", "", part) or "Init" for part in names(frames[:1])[0].split(".")]
        package = ".".join(_NAME.search(frames[0])[1].split("/")[-1].split(".")[:-2]) or "org.apache.hadoop"
        suite_class = f"{package}.Test{top[0].split('$')[0]}{index}"
        cases = []
        for n in range(rng.randint(1, 3)):
            test = f"{suite_class}.test{top[-1][:1].upper()}{top[-1][1:]}Case{n}"
            text = printed(exception, frames, test, rng.randrange(4), rng).replace("]]>", "]] >")
            flaky = rng.random() < 0.1
            element = "flakyFailure" if flaky else "error"
            body = f"<stackTrace><![CDATA[{text}]]></stackTrace>" if flaky else f"<![CDATA[{text}]]>"
            message = _attr(exception.split(":", 1)[-1].strip()[:200])
            cases.append(
                f'<testcase name="{test.rsplit(".", 1)[1]}" classname="{suite_class}" time="0.{rng.randint(10, 99)}">'
                f'<{element} message="{message}" type="{_attr(exception.split(":", 1)[0][:100])}">'
                f"{body}</{element}></testcase>"
            )
            truth.append(f"{index % REPORTS}\t{test}\t{answer}\t{key}")
            counts["failures"] += 1
            counts["flaky"] += flaky
        for n in range(rng.randint(2, 6)):
            cases.append(f'<testcase name="testPasses{n}" classname="{suite_class}" time="0.01"/>')
            counts["passing"] += 1
        counts["known" if answer != "new" else "new"] += 1
        suites[index % REPORTS].append(
            [f'<testsuite name="{suite_class}" tests="{len(cases)}">', *cases, "</testsuite>"]
        )
    for number, members in enumerate(suites):
        lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
        if number % 2:  # nested, as some aggregators write them
            lines.append('<testsuites name="nightly">')
        lines += [line for suite in members for line in suite]
        if number % 2:
            lines.append("</testsuites>")
        (out / f"run-{number}.xml").write_text("\n".join([*lines, "</testsuites>", ""]), encoding="utf-8")
    (out / "truth.tsv").write_text("report\ttest\tanswer\tcause\n" + "\n".join(truth) + "\n", encoding="utf-8")
    return {**counts, "held_out": len(held), "ambiguous": len(ambiguous), "traced": len(keys)}


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "eval" / "gitbugs-hadoop")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "triage-hadoop")
    args = parser.parse_args()
    print(build(args.source, args.out))


if __name__ == "__main__":
    main()
