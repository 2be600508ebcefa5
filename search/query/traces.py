"""A pasted stack trace or log excerpt, read as what to search for.

QA people paste traces into search. Read as web-search syntax a trace goes
wrong (`NegativeArraySizeException: -4096` would exclude 4096; quotes and
`or` in a message would be syntax), and most of it is noise to a search:
line numbers and file positions change with every build, addresses and
offsets with every run, and the frames far from the fault (Thread.run, the
test runner) are in every trace. So a trace is read as text, never syntax,
and reduced to what tells it apart: the exception types, their messages'
words, and the class and method of its top FRAMES frames.

Why the top frames and no line numbers: Sentry groups errors by each
frame's module and function, never its line number (docs.sentry.io,
"Grouping"); TraceSim (Vasiliev et al., 2020) weighs the i-th frame from
the top by 1 / (1 + i)^a and by its rarity (idf). Here the keyword arm's
idf weighs rarity, and a cut weighs position: frames below FRAMES count
nothing (docs/benchmarks.md, "Pasted stack traces", has the measurement).

Why the platform's frames weigh less: the frames of the language's runtime,
the UI framework and the test harness (`java.*`, `android.*`, `org.junit.*`,
Python's standard library and site-packages, node_modules, Go's standard
library, .NET's System.*) are the same in every application's traces, so
two products' bugs share them by chance; the application's own frames are
where its fault is. Sentry marks such frames not "in app" and groups by the
in-app frames alone ("Grouping", "Stack Trace Rules"). Here they stay
searched, at trace_platform_weight (`Trace.weights`). Weighing the exception
types and the first application frame above the rest was measured too, and
lost (docs/benchmarks.md, "Issue 39's first searches").

`read(text)` recognises a trace (at least two frames, or an exception line
and a frame) in Java (`at a.b.C.m(C.java:12)`, `Caused by:`), Python
(`Traceback (most recent call last):`, `File "x.py", line 3, in f`),
JavaScript (`at f (file.js:1:2)`, `f@file.js:1:2`), .NET (`at Ns.Cls.M() in
C:\\x.cs:line 5`) and Go (`goroutine 1 [running]:`, `pkg.fn(...)` then
`\\t/path/x.go:12 +0x1d`); and an exception pasted with its message but
no frame (`NegativeArraySizeException: -4096`), whose syntax would go as
wrong. It returns None for anything else.
"""

import re
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath

FRAMES = 5  # the top frames whose class and method are searched
MESSAGE_WORDS = 30  # words of the exception messages at most: a long message adds cost, not precision

# A JVM frame wherever it is (a trace pasted onto one line is still one): a file it names is a JVM one.
_JVM_FRAME = re.compile(
    r"\bat\s+(?:[\w.$-]+/+)*(?P<name>[\w$<>]+(?:\.[\w$<>-]+)+)"
    r"\((?:[\w$-]+\.(?:java|kt|scala|groovy|clj)(?::\d+)?|Native Method|Unknown Source)\)"
)
# A Python frame wherever it is, as a JVM one: a traceback pasted onto one line is still one.
_PYTHON_FRAME_ANYWHERE = re.compile(
    r'\bFile\s+"[^"]+\.pyw?",\s+line\s+\d+(?:,\s+in\s+[\w<>.]+)?|Traceback \(most recent call last\):'
)
# The other frames are whole lines.
_DOTNET_FRAME = re.compile(r"^at\s+(?P<name>[^\s().]+(?:\.[^\s().]+)+)\([^()]*\)(?:\s+in\s+\S.*:line\s+\d+)?$")
_PYTHON_FRAME = re.compile(r'^File\s+"(?P<file>[^"]+)",\s+line\s+\d+(?:,\s+in\s+(?P<name>\S+))?')
_V8_FRAME = re.compile(
    r"^at\s+(?:async\s+)?(?:new\s+)?(?:(?P<name>[^\s()](?:[^()]*[^\s()])?)\s+\()?"
    r"(?:(?P<file>[^\s()]+):\d+:\d+|<anonymous>|native)\)?$"
)
_GECKO_FRAME = re.compile(r"^(?P<name>[^\s@]*)@(?P<file>\S+?):\d+:\d+$")
_GO_CALL = re.compile(
    r"^(?:created by\s+)?(?P<name>[^\s()]+(?:\(\*?[A-Za-z_]\w*\)[^\s()]*)?)(?:\([^()]*\))?(?:\s+in goroutine \d+)?$"
)
_GO_FILE = re.compile(r"^(?P<file>\S+\.go):\d+(?:\s+\+0x[0-9a-fA-F]+)?$")

# An exception type (java.lang.NullPointerException, System.IO.IOException, TypeError) where a name
# starts (never inside one: a search from inside would read a long dotted name again and again),
# and a line that names one before a colon or at its end.
_TYPE = r"(?<![\w$.])(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error|Failure|Throwable|Fault)"
_EXCEPTION = re.compile(rf"{_TYPE}(?=:|\s*$)")
_TYPED_MESSAGE = re.compile(rf"{_TYPE}:")  # an exception with its message
_HEADER = re.compile(r"^(?:Traceback \(most recent call last\):|goroutine \d+ \[[^\]]*\]:|panic: )")
# The platform's and the test harness's frames, by language. JVM: the full class name's package.
_JVM_PLATFORM = re.compile(
    r"^(?:java|javax|jdk|sun|com\.sun|android|androidx|com\.android|dalvik|libcore|kotlin|kotlinx|scala|groovy"
    r"|org\.codehaus\.groovy|org\.junit|junit|org\.testng|org\.gradle|org\.apache\.maven\.surefire|org\.mockito"
    r"|org\.eclipse\.jdt\.internal\.junit|com\.intellij\.rt)\."
)
_DOTNET_PLATFORM = re.compile(r"^(?:System|Microsoft|Windows|Mono|Xunit|NUnit|MSTest)\.")
# Python: the standard library (lib/python3.12/, Windows' Lib\), installed packages (pytest among them), frozen modules.
_PYTHON_PLATFORM = re.compile(
    r"[/\\](?:lib[/\\](?:python|pypy)[\d.]*|Lib|site-packages|dist-packages|_pytest|pluggy)[/\\]|^<frozen\b"
)
# JavaScript: dependencies and Node's own modules.
_JS_PLATFORM = re.compile(r"(?:^|[/\\])node_modules[/\\]|^node:|^internal[/\\]")
# What changes from run to run: addresses, offsets, hashes, ids, times.
_NOISE = re.compile(
    r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"
    r"|\b\d{2,4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
)
# What an exception line's message is not: its types (they are Trace.exceptions) and the lead-in.
_NOT_MESSAGE = re.compile(rf"{_TYPE}\b|^(?:Caused by|panic):")
_WORD = re.compile(r"[^\W_]+")
_MORE_FRAMES = re.compile(r"^\.\.\. ?\d+ more$")  # a JVM cause's "... 14 more": frames already printed


@dataclass(frozen=True)
class Trace:
    """What a pasted trace asks for: its exception types, their messages' words,
    and the class and method (or module and function) of its top frames."""

    exceptions: tuple[str, ...]
    message: tuple[str, ...]
    frames: tuple[str, ...]
    platform: tuple[str, ...] = ()  # those of `frames` that are the platform's or the test harness's

    @property
    def words(self) -> list[str]:
        """Each word once, in that order."""
        seen = dict.fromkeys(w for part in (*self.exceptions, *self.message, *self.frames) for w in part.split())
        return list(seen)

    def weights(self, platform: float) -> dict[str, float]:
        """Each word's weight: `platform` for a word only the platform's frames hold, 1 for
        the others. A trace with no frame of the application's discounts none: nothing
        tells its frames apart."""
        if len(self.platform) == len(self.frames):
            return dict.fromkeys(self.words, 1.0)
        own_frames = [frame for frame in self.frames if frame not in self.platform]
        own = {w for part in (*self.exceptions, *self.message, *own_frames) for w in part.split()}
        return {word: 1.0 if word in own else platform for word in self.words}

    @property
    def text(self) -> str:
        return " ".join(self.words)


def read(text: str) -> Trace | None:
    """The trace `text` is, or None when it is not one."""
    lines = _lines(text)
    frames = _frames(lines)
    exception_lines = [i for i, line in enumerate(lines) if _is_exception(line) and _frame(lines, i) is None]
    if not frames:
        # An exception pasted without its frames (`NegativeArraySizeException: -4096`): all of it is its message.
        if not any(_TYPED_MESSAGE.search(lines[i]) for i in exception_lines):
            return None
        exception_lines = [i for i, line in enumerate(lines) if line]
    elif len(frames) < 2 and not (exception_lines or any(_HEADER.match(line) for line in lines)):
        return None
    else:
        # The line just before the first frame says what went wrong, typed or not ("ENOENT: No such file").
        first = frames[0][0] - (2 if _GO_FILE.match(lines[frames[0][0]]) else 1)  # a Go frame starts on its call
        before = next((i for i in range(first, -1, -1) if lines[i]), None)
        if before is not None and not _HEADER.match(lines[before]) and before not in exception_lines:
            exception_lines.insert(0, before)
    exceptions, message = [], []
    for index in exception_lines:
        line = _NOISE.sub(" ", lines[index])
        exceptions += _EXCEPTION.findall(line)
        message += [w for w in _WORD.findall(_NOT_MESSAGE.sub(" ", line)) if w not in message]
    top = _top(lines, frames)
    platform = {name for index, name in top if _platform(lines, index)}
    if len(platform) == len(top):
        # None of the top frames is the application's: its first one, below them, is where it went wrong.
        own = next(((i, name) for i, name in _ordered(lines, frames) if name and not _platform(lines, i)), None)
        top += [own] if own and own[1] not in platform else []
    names = tuple(name for _, name in top)
    return Trace(
        tuple(dict.fromkeys(exceptions)),
        tuple(message[:MESSAGE_WORDS]),
        names,
        tuple(n for n in names if n in platform),
    )


def condensed(text: str) -> str:
    """`text` with the trace in it read as words: each of its top FRAMES frames as its class and
    method, the frames below (and a cause's "... 14 more") left out, the other lines as written.
    A draft's description reads so (search.operations.duplicates), and so does every record's
    embedded text (search.indexing.embeddings.document_text): line numbers and runner frames
    would crowd its own words out of the model's first tokens and the keyword query's rarest words."""
    lines = _lines(text)
    frames = _frames(lines)
    if not frames or read(text) is None:
        return text
    top = dict(_top(lines, frames))
    calls = {i - 1 for i, _ in frames if _GO_FILE.match(lines[i])}  # a Go frame's call line is the frame too
    framed = {i for i, _ in frames} | calls | {i for i, line in enumerate(lines) if _MORE_FRAMES.match(line)}
    return "\n".join(top.get(i, line) for i, line in enumerate(lines) if i in top or i not in framed)


def frame_names(text: str) -> list[str]:
    """The class and method (or module and function) of every frame in `text`, in the order
    written, each once: what a stored bug's trace holds, for comparing it with another
    trace frame by frame (triage.matching)."""
    return list(dict.fromkeys(name for _, name in _frames(_lines(text)) if name))


def _lines(text: str) -> list[str]:
    """The lines of `text`, stripped, a JVM or Python frame on a line of its own however it
    was pasted (Jira and chat flatten traces onto one line)."""
    lines = []
    for line in text.splitlines():
        line = _PYTHON_FRAME_ANYWHERE.sub(lambda m: f"\n{m[0]}\n", line)
        pieces = _JVM_FRAME.sub(lambda m: f"\n{m[0]}\n", line).split("\n")
        lines += [piece.strip() for piece in pieces if piece.strip()] or [""]
    return lines


def _frames(lines: list[str]) -> list[tuple[int, str]]:
    """(line index, class and method) of every frame, in the order written."""
    return [(index, name) for index in range(len(lines)) if (name := _frame(lines, index)) is not None]


def _ordered(lines: list[str], frames: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """`frames` from the top down. Python prints the most recent call last: its top frames are the last ones."""
    return frames[::-1] if any(_PYTHON_FRAME.match(line) for line in lines) else frames


def _top(lines: list[str], frames: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The top FRAMES frames that name something, each name once."""
    top, names = [], set()
    for index, name in _ordered(lines, frames):
        if name and name not in names and len(top) < FRAMES:
            top.append((index, name))
            names.add(name)
    return top


def _is_exception(line: str) -> bool:
    return bool(_EXCEPTION.search(line)) or line.startswith("panic: ")


def _frame(lines: list[str], index: int) -> str | None:
    """The class and method of the frame on line `index` ("" when it names none), or None
    when the line is no frame. A Go frame is its file line, named by the call on the line before."""
    line = lines[index]
    if match := _JVM_FRAME.match(line) or _DOTNET_FRAME.match(line):
        return _named(_last(match["name"].rsplit("/", 1)[-1], 2))
    if match := _PYTHON_FRAME.match(line):
        return _named(_stem(match["file"]), match["name"] or "")
    match = _V8_FRAME.match(line) or _GECKO_FRAME.match(line)
    if match and (match["file"] is None or re.search(r"[./]", match["file"])):  # a path, not `at 1:2:3`
        name = re.sub(r"^(?:async|new)\s+|\s*\[as [^\]]*\]", "", match["name"] or "")
        return _named(_stem(match["file"] or ""), _last(name, 2))
    if _GO_FILE.match(line) and index and (call := _GO_CALL.match(lines[index - 1])):
        return _named(_last(re.sub(r"[()*]", "", call["name"].rsplit("/", 1)[-1]), 2))
    return None


def _platform(lines: list[str], index: int) -> bool:
    """Whether the frame on line `index` is the platform's or the test harness's (the module
    patterns above; a JavaScript frame with no file is the engine's: `at Array.map (<anonymous>)`;
    Go's standard library is an import path whose first element has no dot, as the go command
    tells it, less `main`)."""
    line = lines[index]
    if match := _JVM_FRAME.match(line):
        return bool(_JVM_PLATFORM.match(match["name"]))
    if match := _DOTNET_FRAME.match(line):
        return bool(_DOTNET_PLATFORM.match(match["name"]))
    if match := _PYTHON_FRAME.match(line):
        return bool(_PYTHON_PLATFORM.search(match["file"]))
    if match := _V8_FRAME.match(line) or _GECKO_FRAME.match(line):
        return match["file"] is None or bool(_JS_PLATFORM.search(match["file"]))
    if _GO_FILE.match(line) and index and (call := _GO_CALL.match(lines[index - 1])):
        path = call["name"]
        return "." not in path.split("/")[0] if "/" in path else path.split(".")[0] != "main"
    return False


def _last(name: str, parts: int) -> str:
    """The last `parts` parts of a dotted name, as words."""
    return " ".join(name.split(".")[-parts:]).strip()


def _stem(path: str) -> str:
    """A file's name without its folder, extension or query string: /app/shop/views.py -> views."""
    path = re.sub(r"[?#].*$", "", path)
    windows = PureWindowsPath(path).name
    return PurePosixPath(windows).stem if windows else ""


def _named(*parts: str) -> str:
    """The words of a frame's name, without placeholders (<init>, <module>, <anonymous>)."""
    return " ".join(word for part in parts for word in part.split() if not word.startswith("<"))
