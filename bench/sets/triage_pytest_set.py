"""Build eval/triage-hadoop-pytest: eval/triage-hadoop's bugs and failures in Python's shape.

    .venv/bin/python bench/sets/triage_pytest_set.py [--source ../shared/eval/gitbugs-hadoop]

The same bugs, held-out quarter and truth as bench/sets/triage_set.py, so the
two sets differ only in shape: every Java frame of a bug's text becomes the
Python frame a port of the code would print (`at o.a.h.hdfs.DFSClient.open(
DFSClient.java:123)` is `File "/src/hadoop/hdfs/dfs_client.py", line 123, in
open`), and each failure is printed as pytest reports it (junitxml: a
`tests.<package>.test_<module>` classname, `test_...` names), most recent call
last: a quarter as a native traceback, a quarter in pytest's long format (`E`
lines, `path.py:12: in f`), a third raised through a Future
(concurrent.futures' frames between the test and the code). Line numbers
move, as in the Java set. It judges triage's rules on a second language's
traces: the shape changes, the bugs and their evidence do not.
"""

import argparse
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triage_set  # noqa: E402
from trace_set import FRAME  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SEED = 39
_JAVA = re.compile(r"at\s+(?:[\w$.-]+/)*(?P<name>[\w$.<>]+)\((?:(?P<file>[\w$-]+)\.java(?::(?P<line>\d+))?|[^)]*)\)")
FUTURE = [
    '  File "/usr/lib/python3.11/concurrent/futures/_base.py", line 449, in result\n    return self.__get_result()',
    '  File "/usr/lib/python3.11/concurrent/futures/_base.py", line 401, in __get_result\n    raise self._exception',
    '  File "/usr/lib/python3.11/concurrent/futures/thread.py", line 58, in run\n    result = self.fn(*self.args)',
]


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.split("$")[0]).lower() or "module"


def python_frame(java: str, shift: int = 0) -> tuple[str, str] | None:
    """(the `File ...` line, the function) a Java frame line becomes; None when it is none."""
    match = _JAVA.search(java)
    if match is None or "." not in match["name"]:
        return None
    *package, klass, method = match["name"].split(".")
    function = {"<init>": "__init__", "<clinit>": "__init_subclass__"}.get(method, re.sub(r"\W", "_", method))
    folder = "/".join(part for part in package[2:] if part) or "hadoop"
    line = int(match["line"] or 1) + shift
    return f'  File "/src/hadoop/{folder}/{snake(klass)}.py", line {line}, in {function}', function


def ported(description: str) -> str:
    """A bug's text with each Java frame line as the Python frame line it becomes."""

    def frame(match: re.Match) -> str:
        found = python_frame(match[0])
        return found[0].strip() if found else match[0]

    return FRAME.sub(frame, description)


def printed(exception: str, frames: list[str], test: tuple[str, str], style: int, rng: random.Random) -> str:
    """A failure as pytest prints it: the test first, the frame that raised last."""
    module, function = test
    exception = triage_set.varied(exception, rng)
    frames = frames[: rng.randint(min(3, len(frames)), len(frames))]  # as deep as that run's stack went
    # Python's last line names the exception as `Type: message`; a line of other text stays as printed.
    typed = re.match(r"(?:[\w$]+\.)*(?P<kind>[\w$]*(?:Exception|Error|Throwable))\b:?\s*(?P<message>.*)", exception)
    error = f"{typed['kind']}: {typed['message']}".rstrip(": ") if typed else exception
    own = [found for f in frames if (found := python_frame(f, rng.randint(1, 40)))]
    calls = [f"{line}\n    {name}(request)" for line, name in reversed(own)]  # most recent call last
    test_line = f'  File "/src/tests/{module.replace(".", "/")}.py", line {rng.randint(20, 300)}, in {function}'
    if style == 1:  # pytest's long format
        places = [_place(line, name) for line, name in reversed(own)]
        body = [f"    def {function}(request):", f">       {own[-1][1] if own else 'run'}(request)", ""]
        for place in places:
            body += ["_ " * 38, "", place, "    ..."]
        return "\n".join([*body, f"E   {error}"])
    middle = FUTURE if style == 2 else []
    head = [test_line + ("\n    future.result()" if style == 2 else "\n    run(request)")]
    if style == 3:  # the test's own assertion, raised from the fault: Python prints the cause first
        cause = ["Traceback (most recent call last):", *calls, error]
        assertion = [test_line + "\n    raise AssertionError('expected the call to succeed') from error"]
        return "\n".join(
            [*cause, "", "The above exception was the direct cause of the following exception:", ""]
            + ["Traceback (most recent call last):", *assertion, "AssertionError: expected the call to succeed"]
        )
    return "\n".join(["Traceback (most recent call last):", *head, *middle, *calls, error])


def _place(line: str, name: str) -> str:
    """A `File "x.py", line 3, in f` line as pytest's long format names the place: `x.py:3: in f`."""
    path, number = line.split('"')[1], line.split(", line ")[1].split(",")[0]
    return f"{path}:{number}: in {name}"


def build(source: Path, out: Path) -> dict:
    java = ROOT / "eval" / "triage-hadoop"
    counts = triage_set.build(source, java)  # the same bugs, held out and truth
    records = [json.loads(line) for line in (java / "records.jsonl").open(encoding="utf-8")]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "records.jsonl").open("w", encoding="utf-8") as written:
        for record in records:
            if record.get("description"):
                record["description"] = ported(record["description"])
            written.write(json.dumps(record, ensure_ascii=False) + "\n")
    (out / ".gitignore").write_text("# written by bench/sets/triage_pytest_set.py from gitbugs-hadoop\nrecords.jsonl\n")
    traced = {
        r["key"]: t
        for line in (source / "records.jsonl").open(encoding="utf-8")
        if (r := json.loads(line))["kind"] == "bug" and (t := triage_set.trace_of(r.get("description") or ""))
    }
    rows = [line.split("\t") for line in (java / "truth.tsv").read_text().splitlines()[1:]]
    rng = random.Random(SEED)
    reports: dict[int, list[str]] = {}
    truth = []
    for report, test, answer, cause in rows:
        exception, frames = traced[cause]
        package, method = test.rsplit(".", 1)
        parts = package.split(".")
        module = "tests." + ".".join([*(snake(p) for p in parts[3:-1]), "test_" + snake(parts[-1])])
        name = "test_" + snake(method)
        text = printed(exception, frames, (module, name), rng.randrange(4), rng).replace("]]>", "]] >")
        error = text.rsplit("\n", 1)[-1].removeprefix("E   ")
        reports.setdefault(int(report), []).append(
            f'<testcase classname="{module}" name="{name}" time="0.{rng.randint(10, 99)}">'
            f'<failure message="{triage_set._attr(error[:200])}"><![CDATA[{text}]]></failure></testcase>'
        )
        reports[int(report)] += [f'<testcase classname="{module}" name="test_passes_{n}"/>' for n in range(2)]
        truth.append(f"{report}\t{module}.{name}\t{answer}\t{cause}")
    for number, cases in sorted(reports.items()):
        suite = f'<testsuite name="pytest" tests="{len(cases)}">'
        xml = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>", suite, *cases, "</testsuite></testsuites>", ""]
        (out / f"run-{number}.xml").write_text("\n".join(xml), encoding="utf-8")
    (out / "truth.tsv").write_text("report\ttest\tanswer\tcause\n" + "\n".join(truth) + "\n", encoding="utf-8")
    return {**counts, "shape": "pytest"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "eval" / "gitbugs-hadoop")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "triage-hadoop-pytest")
    print(build(**vars(parser.parse_args())))


if __name__ == "__main__":
    main()
