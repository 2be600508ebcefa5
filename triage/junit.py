"""A JUnit XML report read into test cases, safely and within bounds.

Every runner writes this format, each a little differently: Maven Surefire
and Gradle (one `testsuite` per class, `flakyFailure`/`rerunFailure` when
tests were rerun), pytest `--junitxml` (`testsuites` around one `testsuite`),
jest-junit and Playwright (failures without a `message`, the text in the
element), go-junit-report (`testsuites`, a panic's goroutine dump as the
text). So the reader is lenient about where things are and strict about
what can hurt: it walks every `testcase` at any depth and reads its outcome
from its children, and it parses with defusedxml and DTDs forbidden (no
entity expansion, hence no billion laughs; no external entities, hence no
file read from the server), after checking the size.

A file that is not JUnit is refused with a `JUnitError` naming the line:
XML that does not parse (invalid UTF-8 included: expat names the line and
column), a root that is neither `testsuites` nor `testsuite`, a
`testcase` without a name.
"""

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser
from django.conf import settings

from search.contract import SearchError

# What a runner prints can be megabytes (a test that logs a whole response); the
# failure's text kept and read is its first TEXT_CHARS characters, which hold the
# exception and its top frames whatever follows.
TEXT_CHARS = 20_000
MESSAGE_CHARS = 1_000
FAILED = {"failure": "failure", "error": "error"}
# Surefire's reruns: a flaky* element on a passing test, rerun* under a failure that stayed.
FLAKY = ("flakyFailure", "flakyError")


class JUnitError(SearchError):
    """The file is not a JUnit report we can read; the message says where and why."""

    code = "invalid_junit"


class TooLarge(JUnitError):
    status = 413
    code = "too_large"


def too_large(size: int | None) -> TooLarge:
    """A report over TRIAGE_MAX_BYTES (`size` None: found while reading it)."""
    sent = f"{size:,} bytes" if size else "larger"
    return TooLarge(
        f"The report is {sent}; the limit is {settings.TRIAGE_MAX_BYTES:,} (TRIAGE_MAX_BYTES). Send the failing "
        "suites only, or raise the limit."
    )


#: What a multipart form may add around the largest report: its parts' headers and boundaries.
FORM_BYTES = 64 * 1024


def refuse_declared(content_length: str | None) -> None:
    """TooLarge for a request whose declared length cannot hold a report within
    TRIAGE_MAX_BYTES in any form (the body, a multipart `file`, JSON): before a byte of
    it is read, as a multipart upload would be read whole (to a temporary file) first."""
    declared = int(content_length) if content_length and content_length.isdigit() else 0
    if declared > settings.TRIAGE_MAX_BYTES + FORM_BYTES:
        raise too_large(declared)


@dataclass(frozen=True)
class Case:
    """One test case's outcome. `text` is what the runner printed for its failure
    (empty for a pass or a skip), `message` and `type` the failure's attributes."""

    suite: str
    classname: str
    name: str
    outcome: str  # passed, failure, error, skipped
    flaky: bool = False  # passed on a rerun (Surefire's flakyFailure)
    message: str = ""
    type: str = ""
    text: str = ""
    line: int = 0  # where the testcase starts in the file

    @property
    def full_name(self) -> str:
        """`classname.name`, or the name alone when it already says the class (Jest, Playwright)."""
        if not self.classname or self.name.startswith(self.classname):
            return self.name
        joiner = "::" if "/" in self.classname or self.classname.endswith(".py") else "."
        return f"{self.classname}{joiner}{self.name}"

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED or self.flaky


COMMIT = r"[\w.\-/]{1,64}"  # a commit as a run names it: a hash, a tag, a branch@hash
# A <property> that names the commit the run tested (Surefire, Gradle and CI plugins write them).
COMMIT_PROPERTIES = ("commit", "git.commit", "git.commit.id", "git_commit", "revision", "sha", "vcs.revision")
PROPERTIES_READ = 1000


def read(data: bytes | str) -> list[Case]:
    """The test cases of a JUnit report, in file order; JUnitError when it is not one."""
    return report(data)[0]


def report(data: bytes | str) -> tuple[list[Case], str]:
    """read(), and the commit the report's properties name ("" when none does: COMMIT_PROPERTIES)."""
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > settings.TRIAGE_MAX_BYTES:
        raise too_large(size)
    if not data.strip():
        raise JUnitError("The report is empty: send a JUnit XML file (<testsuites> or <testsuite>).")
    root, lines = _parse(data)
    tag = _local(root.tag)
    if tag not in ("testsuites", "testsuite"):
        raise JUnitError(
            f"line {lines.get(id(root), 1)}: the root element is <{tag}>, not <testsuites> or <testsuite>: "
            "this is XML but not a JUnit report."
        )
    cases = []
    for suite, element in _testcases(root, ""):
        cases.append(_case(suite, element, lines.get(id(element), 0)))
        if len(cases) > settings.TRIAGE_MAX_TESTS:
            raise TooLarge(f"The report holds more than {settings.TRIAGE_MAX_TESTS:,} test cases (TRIAGE_MAX_TESTS).")
    return cases, _commit(root)


def _commit(root: ET.Element) -> str:
    """The first of COMMIT_PROPERTIES a <property> of the report names (a short, plain value)."""
    named = {}
    for index, element in enumerate(root.iter()):
        if index > PROPERTIES_READ * 10 or len(named) >= PROPERTIES_READ:
            break
        if _local(element.tag) == "property":
            name, value = (element.get("name") or "").strip().lower(), (element.get("value") or "").strip()
            named.setdefault(name, value)
    return next((value for key in COMMIT_PROPERTIES if re.fullmatch(COMMIT, value := named.get(key, ""))), "")


def _parse(data: bytes | str) -> tuple[ET.Element, dict[int, int]]:
    """The root element, and each element's line (by id) for the error messages."""
    builder = _LineBuilder()
    parser = DefusedXMLParser(target=builder, forbid_dtd=True)
    builder.parser = parser
    try:
        parser.feed(data)
        root = parser.close()
    except ET.ParseError as error:
        line, column = error.position
        reason = str(error).split(":", 1)[0]
        hint = ""
        if data.lstrip()[:1] not in ("<", b"<"):
            hint = " (it does not start with <: is it XML at all?)"
        elif isinstance(data, bytes) and "invalid token" in reason and not _utf8(data):
            hint = " (the file is not UTF-8, or not what its declaration says)"
        raise JUnitError(f"line {line}, column {column + 1}: {reason}{hint}: this is not well-formed XML.") from None
    except DefusedXmlException as error:
        # DTDs are forbidden whole: a JUnit report has none, and every entity attack needs one.
        line = parser.parser.CurrentLineNumber if parser.parser is not None else 1
        raise JUnitError(
            f"line {line}: the file declares a DTD or entities ({type(error).__name__}); a JUnit report has "
            "none, and they are refused for safety."
        ) from None
    return root, builder.lines


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _LineBuilder(ET.TreeBuilder):
    parser = None

    def __init__(self):
        super().__init__()
        self.lines: dict[int, int] = {}

    def start(self, tag, attrs):
        element = super().start(tag, attrs)
        self.lines[id(element)] = self.parser.parser.CurrentLineNumber
        return element


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]  # a namespaced report (rare) reads the same


def _testcases(element: ET.Element, suite: str):
    """(suite name, testcase) for every testcase under `element`, nested suites included, in file
    order; without recursion, so that suites nested thousands deep are read as any others."""
    stack = [(iter(element), suite)]
    while stack:
        children, suite = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            continue
        tag = _local(child.tag)
        if tag == "testcase":
            yield suite, child
        elif tag in ("testsuite", "testsuites"):
            stack.append((iter(child), child.get("name") or suite))


def _case(suite: str, element: ET.Element, line: int) -> Case:
    name = (element.get("name") or "").strip()
    if not name:
        raise JUnitError(f"line {line}: a <testcase> without a name attribute; every test case needs one.")
    classname = (element.get("classname") or element.get("class") or "").strip()
    children = {}
    for child in element:
        children.setdefault(_local(child.tag), child)
    failed = next((tag for tag in FAILED if tag in children), None)
    flaky = None if failed else next((children[tag] for tag in FLAKY if tag in children), None)
    outcome = FAILED[failed] if failed else "skipped" if "skipped" in children else "passed"
    found = children.get(failed) if failed else flaky
    if found is None:
        return Case(suite, classname, name, outcome, line=line)
    message = (found.get("message") or "").strip()[:MESSAGE_CHARS]
    kind = (found.get("type") or "").strip()[:200]
    text = _text(found)
    if not text.strip():
        text = f"{kind}: {message}" if kind and message else message or kind
    return Case(suite, classname, name, outcome, flaky is not None, message, kind, text[:TEXT_CHARS], line)


def _text(element: ET.Element) -> str:
    """A failure's printed text: the element's own, or its <stackTrace> (Surefire's reruns)."""
    own = element.text or ""
    if own.strip():
        return own[:TEXT_CHARS]
    for child in element:
        if _local(child.tag) == "stackTrace" and child.text:
            return child.text[:TEXT_CHARS]
    return ""
