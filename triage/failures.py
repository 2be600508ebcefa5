"""A failure read as its cause: what it is grouped by and what it is searched by.

A failing test prints its exception, then frames: the product's own on top,
then the test's, then the runner's (JUnit, Surefire, pytest, Jest, Go's
testing package) and reflection. Two failures have the same cause when
they throw the same exception from the same top frames of the code under
test, whatever the test, the line numbers, the paths or the numbers in the
message (ReportPortal's and Sentry's grouping read a trace so too). So:

- the runner's and reflection's frames are dropped first (they are in every
  failure and tell none apart: Sentry calls the rest "in-app" frames);
- in a Java chain (`Caused by:`) the root cause is read: a test that gets a
  fault through a Future or a wrapper prints the wrapper first, and the
  wrapper is the same for every fault it carries; Python prints a chain's
  cause first, and its first traceback is read;
- the signature is the root exception's type and its top SIGNATURE_FRAMES
  frames' class and method (search.query.traces reads them in Java, Python,
  JavaScript, .NET and Go), or, for a failure that prints no frame, its
  type and message with numbers, quoted values and paths taken out;
- what search reads is the same block, as a pasted trace
  (docs/search-syntax.md): its exception, message words and top frames.
"""

import hashlib
import re
from dataclasses import dataclass

from search.contract.types import QUERY_MAX, TRACE_MAX
from search.query import traces

from .junit import Case

SIGNATURE_FRAMES = 3
QUERY_LINES = 60  # of the chosen block: its top frames are near its start
CAUSE_CHARS = 300

# Frames of test runners, assertion libraries and reflection: in every failure, the cause of none.
_RUNNER_FRAME = re.compile(
    r"""^\s*(?:
        at\s+(?:[\w.$]+/)*(?:org\.junit\.|junit\.framework\.|org\.testng\.|org\.apache\.maven\.surefire\.
            |org\.gradle\.|worker\.org\.gradle\.|sun\.reflect\.|jdk\.internal\.reflect\.|java\.lang\.reflect\.
            |org\.hamcrest\.|org\.assertj\.|org\.opentest4j\.|com\.intellij\.rt\.|org\.spockframework\.)
        |at\s+.*(?:node_modules[/\\](?:jest-|@jest[/\\]|expect[/\\]|@playwright[/\\]|playwright|mocha[/\\])|node:internal|\(internal/)
        |File\s+"[^"]*[/\\](?:_pytest|pluggy|unittest)[/\\]
        |(?:testing\.tRunner|created\ by\ testing\.|runtime\.goexit|runtime\.gopanic|panic\()
        |\S*/src/(?:testing|runtime)/\w+\.go:\d+
        |at\s+(?:new\s+)?Promise\b
        |===\ (?:RUN|PAUSE|CONT)\s|---\ (?:FAIL|PASS|SKIP):\s|exit\ status\ \d+$
    )""",
    re.VERBOSE,
)
# Frames that only carry the code that failed to where it runs: a thread, a pool, a Future,
# a privileged block, an event loop, a coroutine. Any code run that way passes through them,
# so they are in the traces of unrelated bugs and tell none apart (Sentry's "not in-app").
_CARRIER_FRAME = re.compile(
    r"""^\s*(?:
        at\s+(?:[\w.$]+/)*(?:java\.util\.concurrent\.|java\.lang\.Thread\.|java\.security\.AccessController\.
            |javax\.security\.auth\.Subject\.|kotlinx\.coroutines\.|scala\.concurrent\.|akka\.dispatch\.
            |System\.Threading\.)
        |File\s+"[^"]*[/\\](?:threading|concurrent[/\\]futures[/\\]\w+|asyncio[/\\]\w+)\.py"
        |\S*/src/(?:sync|runtime)/\w+\.go:\d+
    )""",
    re.VERBOSE,
)
# A frame of the test itself (RenewalServiceTest, test_fares, PassCard.test, TestValidator...):
# the same cause reached from two tests is one cause.
_TEST_FRAME = re.compile(r"(?:^|\s)(?:test_\w*|\w+_test|Test\w*|\w+Tests?|\w+IT|[\w.-]+\.(?:test|spec))(?:\s|$)")
# The line that says what went wrong, in a failure that prints no frame.
_ERROR_LINE = re.compile(r"(?:^|[\s:(])(?:[\w.$]*(?:Error|Exception|Failure|Fault)|panic)\b")
_GENERIC_TYPES = {"failure", "failed", "error", "assertion", ""}
_CAUSED_BY = re.compile(r"^\s*Caused by:\s*")
# Python prints a chain's cause first, then one of these, then the exception raised from it.
_PYTHON_CHAIN = re.compile(
    r"^\s*(?:The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)\s*$"
)
_THREAD = re.compile(r'^(\s*)Exception in thread "[^"]*"\s*')
# What changes from run to run in a message: numbers, hex, quoted values, paths, times.
_VARYING = re.compile(
    r"0x[0-9a-fA-F]+|\b\d[\d.:,_-]*\b|'[^']*'|\"[^\"]*\"|(?:[A-Za-z]:)?(?:[\\/][\w.@~-]+){2,}[\\/]?|\s+"
)
_QUERY_WORD = re.compile(r"[^\W\d_][\w.$]*")
# pytest's own report ("long" traceback): `path.py:12: in func` after each entry's code, the
# last entry's `path.py:19: KeyError`, the error on lines marked `E`.
_PYTEST_PLACE = re.compile(r"^(?P<file>\S+\.py):(?P<line>\d+):(?:\s+in\s+(?P<name>[\w<>]+)|\s+\w+)?\s*$")
_PYTEST_DEF = re.compile(r"^\s*>?\s*(?:async\s+)?def\s+(?P<name>\w+)\s*\(")
_PYTEST_ERROR = re.compile(r"^E\s+")


@dataclass(frozen=True)
class Reading:
    signature: str  # 16 hex digits: the same for the same cause
    cause: str  # one line a person reads: the exception and its message
    query: str  # what search reads: a trace, or the message's words
    exception: str  # the root exception's type ("" when none is named)
    frames: tuple[str, ...]  # the top frames' class and method, top first
    message: tuple[str, ...]  # the exception message's words
    carriers: frozenset[str] = frozenset()  # those of `frames` that only carry it (_CARRIER_FRAME)


def read(case: Case) -> Reading:
    text = case.text or case.message or case.type
    lines = _pytest_as_traceback(text.splitlines())
    lines = [_THREAD.sub(r"\1", line) for line in lines if not _RUNNER_FRAME.match(line)]
    block = _root_cause(lines)[:QUERY_LINES]
    block_text = "\n".join(block)
    trace = traces.read(block_text) if len(block_text) <= TRACE_MAX else None
    kind = "" if case.type.lower() in _GENERIC_TYPES else case.type
    if trace is not None and trace.frames:
        exception = trace.exceptions[-1] if trace.exceptions else kind
        # The test's own frames count only when there are no others (an assertion in the test).
        frames = tuple(f for f in trace.frames if not _TEST_FRAME.search(f)) or trace.frames
        parts = (exception, *frames[:SIGNATURE_FRAMES])
        query, message = block_text, trace.message
    else:
        exception = (trace.exceptions[-1] if trace and trace.exceptions else "") or kind
        first = _error_line(block) or case.message
        parts = (exception, _VARYING.sub(" ", first).strip()[:200])
        words = _QUERY_WORD.findall(first if first else case.name)
        query, frames, message = _cut(" ".join(words)) or case.name, (), tuple(words)
    cause = _cause(block, exception) or case.message or case.type or "failed without a message"
    digest = hashlib.sha1("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    carriers = frozenset(frames) & _carrier_names(block)
    return Reading(digest, cause[:CAUSE_CHARS], query, exception, tuple(frames), tuple(message), carriers)


def _carrier_names(block: list[str]) -> set[str]:
    """The class and method of every frame of `block` that only carries the failing code (_CARRIER_FRAME)."""
    return {name for line in block if _CARRIER_FRAME.match(line) for name in traces.frame_names(line)}


def _pytest_as_traceback(lines: list[str]) -> list[str]:
    """pytest's long report as Python prints a traceback (`File "x.py", line 3, in f`, the
    error last), which search.query.traces reads; any other text as it is."""
    if not any(_PYTEST_PLACE.match(line) for line in lines) or not any(_PYTEST_ERROR.match(line) for line in lines):
        return lines
    frames, errors, function = ["Traceback (most recent call last):"], [], ""
    for line in lines:
        if match := _PYTEST_DEF.match(line):
            function = match["name"]
        elif match := _PYTEST_PLACE.match(line):
            frames.append(f'  File "{match["file"]}", line {match["line"]}, in {match["name"] or function or "?"}')
            function = ""
        elif _PYTEST_ERROR.match(line):
            errors.append(_PYTEST_ERROR.sub("", line))
    return frames + errors[:1] + [f"  {error}" for error in errors[1:]]


def _root_cause(lines: list[str]) -> list[str]:
    """The last block of a `Caused by:` chain that has a frame of its own; in Python's chain
    (the cause printed first), the first traceback that has one; or the whole text."""
    chained = [i for i, line in enumerate(lines) if _PYTHON_CHAIN.match(line)]
    if chained:
        blocks = [lines[a:b] for a, b in zip([0, *(i + 1 for i in chained)], [*chained, len(lines)], strict=True)]
        return next((block for block in blocks if traces.frame_names("\n".join(block))), lines)
    starts = [0] + [i for i, line in enumerate(lines) if _CAUSED_BY.match(line)]
    if len(starts) == 1:
        return lines
    blocks = [lines[a:b] for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    for block in reversed(blocks):
        if traces.frame_names("\n".join(block)):
            return [_CAUSED_BY.sub("", block[0]), *block[1:]]
    return lines


def _cause(block: list[str], exception: str) -> str:
    """The line that names the exception (or says what went wrong), as printed."""
    named = next((line for line in block if exception and exception in line), None)
    return (named or _error_line(block)).strip()


def _error_line(block: list[str]) -> str:
    lines = [line.strip() for line in block if line.strip()]
    return next((line for line in lines if _ERROR_LINE.search(line)), lines[0] if lines else "")


def _cut(text: str) -> str:
    return text if len(text) <= QUERY_MAX else text[: text.rfind(" ", 0, QUERY_MAX + 1)].rstrip()
