"""The long fuzz run: every fuzz test of the suite with a big budget, and what
each surface was sent and how it answered.

    .venv/bin/python bench/fuzz.py [--examples 6000]        (or: make fuzz)

Runs, in one pytest process on the test database, tests/test_fuzz.py (the
service, REST, schemathesis over every operation of /api/schema, and every
route of the URLconf: any method, parameters twice, lone surrogates) and
the MCP fuzz test of tests/test_mcp.py (stdio and HTTP), and the hostile
upstream of tests/test_fuzz_upstream.py (Jira Cloud and GitHub played by
hypothesis: a fifth of the budget each), and the front of
tests/test_fuzz_front.py (bodies chunked, lying about their length and sent
at any pace, a fifteenth; JUnit reports nested to any depth, a tenth), with FUZZ_EXAMPLES
set to --examples: that many examples per test and per MCP transport, a
fifteenth of it per OpenAPI operation, and on top schemathesis's coverage
phase, every method on every route as each of the three visitors, and every
parameter of every route twice in four ways (tests/fuzzing.py). Each test writes a line per input sent to the file
FUZZ_TALLY names; this script counts them per surface:

- inputs: requests, service calls or tool calls sent;
- server errors: a 5xx, an exception other than SearchError out of the
  service, an MCP tool error with code internal_error;
- leaks: answers showing a traceback or SQL (tests/fuzzing.py's LEAKS).

A test stops at its first bad answer and hypothesis then replays shrunken
inputs, which are counted too: a non-zero count means "look at the failing
test pytest printed", not that many inputs failed. Exit status: pytest's.
"""

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = [
    "tests/test_fuzz.py",
    "tests/test_mcp.py::test_any_arguments_get_a_result_or_a_tool_error_naming_what_was_wrong",
    "tests/test_fuzz_upstream.py",
    "tests/test_fuzz_front.py",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=6000, help="FUZZ_EXAMPLES (default 6000)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        tally = Path(scratch) / "tally.jsonl"
        env = dict(os.environ, FUZZ_EXAMPLES=str(args.examples), FUZZ_TALLY=str(tally))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
        started = time.perf_counter()
        outcome = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        lines = [json.loads(line) for line in tally.read_text().splitlines()] if tally.exists() else []

    sent, errors, leaks = collections.Counter(), collections.Counter(), collections.Counter()
    for line in lines:
        sent[line["surface"]] += 1
        errors[line["surface"]] += line["server_error"]
        leaks[line["surface"]] += line["leak"] is not None

    summary = outcome.stdout.strip().splitlines()[-1] if outcome.stdout.strip() else "(no output)"
    print(f"# {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"# FUZZ_EXAMPLES={args.examples}: {seconds / 60:.1f} min; pytest: {summary}\n")
    print("| surface | inputs | server errors | traceback or SQL |")
    print("|---|---:|---:|---:|")
    for surface in sorted(sent):
        print(f"| {surface} | {sent[surface]:,} | {errors[surface]} | {leaks[surface]} |")
    print(f"| all | {sum(sent.values()):,} | {sum(errors.values())} | {sum(leaks.values())} |")
    if outcome.returncode:
        print("\n" + outcome.stdout[-6000:] + outcome.stderr[-2000:], file=sys.stderr)
    return outcome.returncode


if __name__ == "__main__":
    sys.exit(main())
