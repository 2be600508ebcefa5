"""What the fuzz tests share: the strategies, the budget, what no answer may
show, and the tally a long run reads.

The strategies draw parameters by name (and an unknown name) with values of
every JSON type and hostile text: tsquery operators, quotes, backslashes,
NUL, emoji, right-to-left text, far-off dates and offsets, long strings,
garbage cursors. tests/test_fuzz.py sends them to the service and over
REST, tests/test_mcp.py as tool arguments through a real MCP client.

Round two adds what a hostile client sends around the parameters: lone
UTF-16 surrogates (JSON-escaped in bodies; in query strings and paths both
percent-encoded, %ED%A0%80, and as raw bytes that are not UTF-8), every
parameter given twice (the same value, two values, empty ones), and every
HTTP method, an unknown one too, on every route Django's URL resolver knows
(`ROUTES`).

`FUZZ_EXAMPLES` sets the budget (150 examples a test unless given); above
150 it is a long run, which also does what the suite cannot afford.
`FUZZ_TALLY` names a file that gets one JSON line per input sent: `make fuzz`
(bench/fuzz.py) counts them per surface. The tests still fail on the first
bad answer; the tally only says how much was tried.
"""

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from search import service

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
LONG_RUN = EXAMPLES > 150  # a raised budget: worth what the suite cannot afford

HOSTILE = st.sampled_from(
    [
        "renewal",
        "renew & !pass | (",
        "'",
        '"unclosed',
        "\\",
        "a\x00b",
        "💳 renewal",
        "تجديد البطاقة",
        "BUG-12",
        "X",
        "-",
        "or",
        ":*",
        "<->",
        "2024-01-01T00:00:00+18:18",
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59-23:59",
        "not-a-date",
        "eyJub3QiOiAiYSBjdXJzb3IifQ",
        "bug,test,,",
        "hybrid",
        "semantic",
        "recent",
        "full",
        "true",
        "-1",
        "1e309",
    ]
)
TEXT = st.one_of(HOSTILE, st.text(max_size=60), st.text(min_size=490, max_size=600))
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True), TEXT
)
VALUE = st.recursive(
    SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=2), max_leaves=4
)

# The parameters of each operation (the MCP tools have the same names), and one nobody knows.
NAMES = {
    operation: sorted(spec.request.model_fields) + ["unknown_parameter"]
    for operation, spec in service.OPERATIONS.items()
}


def params_for(operation: str):
    return st.dictionaries(st.sampled_from(NAMES[operation]), VALUE, max_size=5)


CALLS = st.sampled_from(sorted(NAMES)).flatmap(lambda op: st.tuples(st.just(op), params_for(op)))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True
)


def names_what_was_wrong(operation: str, message: str) -> bool:
    """Whether an error's message starts with what it is about: a parameter of
    `operation` (`limit: ...`, or `request: ...` naming them), an unknown one, or
    the key that names no record."""
    names = [name for name in NAMES[operation] if name != "unknown_parameter"]
    about = message.split(":", 1)[0]
    if about == "request":
        return any(name in message for name in names)
    return about in names or message.startswith(("unknown parameter ", "no record with key "))


# What a traceback, the database driver or SQL would leave in an answer.
LEAKS = ("Traceback", "psycopg", "SELECT ", "syntax error at or near")


def leak(text: str) -> str | None:
    """The first sign in `text` of an error that escaped, or None."""
    return next((fragment for fragment in LEAKS if fragment in text), None)


def tally(surface: str, *, server_error: bool, body: str) -> None:
    """Count one input sent to `surface` and how it was answered (only when FUZZ_TALLY names a file)."""
    if path := os.environ.get("FUZZ_TALLY"):
        line = {"surface": surface, "server_error": server_error, "leak": leak(body)}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


# -- round two: lone surrogates, repeated parameters, every method on every route ---------------

# Halves of UTF-16 pairs, alone: Python holds them in a str, json.dumps escapes
# them ("\\ud800"), no UTF-8 text (and so no database) can.
SURROGATES = ["\ud800", "\udfff", "renewal \udc00", "\ud83d\ud83d", "BUG-\udbff12"]
SURROGATE = st.sampled_from(SURROGATES)
# What a query string or a path can carry that decodes to no text: a surrogate
# as UTF-8 would encode it (percent-encoded, then as raw bytes), a stray
# continuation byte, a truncated sequence, an overlong "/". Raw bytes are
# written as the latin-1 characters WSGI hands them over as.
INVALID_UTF8 = ["%ED%A0%80", "%ED%BF%BF", "%FF", "%C3", "%C0%AF", "\xed\xa0\x80", "\xff\xfe", "\xc3", "a\x80b"]


def encoded(text: str) -> str:
    """`text` as a query string's value."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


# A query string's value, already encoded: hostile text, empty, or bytes that are no UTF-8.
QUERY_VALUE = st.one_of(TEXT.map(encoded), SURROGATE.map(encoded), st.sampled_from(["", *INVALID_UTF8]))
# The same parameter twice: the same value, two values, one empty, both empty.
TWICE = st.one_of(
    QUERY_VALUE.map(lambda value: (value, value)),
    st.tuples(QUERY_VALUE, QUERY_VALUE),
    QUERY_VALUE.map(lambda value: ("", value)),
    st.just(("", "")),
)
# The same, named, for a long run that sends each to each parameter of each route.
REPETITIONS = [("renewal", "renewal"), ("renewal", "%ED%A0%80"), ("", "bug"), ("", "")]

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND"]


def encoded_query(pairs) -> str:
    """(name, encoded value) pairs as a query string, a name as often as it comes."""
    return "&".join(f"{quote(name, safe='')}={value}" for name, value in pairs)


# A request body: none, JSON of any value (lone surrogates escaped, as a client
# sends them), a form, or bytes that are no UTF-8, under each type the API reads.
JSON_TEXT = st.one_of(TEXT, SURROGATE)
JSON_VALUE = st.recursive(
    st.one_of(SCALAR, SURROGATE),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_TEXT, inner, max_size=3),
    max_leaves=6,
)
BODY = st.one_of(
    st.just((b"", None)),
    st.tuples(JSON_VALUE.map(lambda value: json.dumps(value).encode()), st.just("application/json")),
    st.tuples(
        st.lists(st.tuples(st.sampled_from(["title", "key", "query", "description"]), QUERY_VALUE), max_size=3).map(
            lambda pairs: encoded_query(pairs).encode("latin-1")
        ),
        st.just("application/x-www-form-urlencoded"),
    ),
    st.tuples(
        st.sampled_from([b"\xed\xa0\x80", b'{"title": "\xff"}', b"\xc3", b'{"title": "\\ud800"}\n']),
        st.sampled_from(["application/json", "application/x-ndjson", "text/plain", "multipart/form-data"]),
    ),
)


@dataclass(frozen=True)
class Route:
    """One URL pattern of the project, as Django's resolver holds it: its
    patterns from the root, and the model its view is about (the admin's)."""

    patterns: tuple
    model: type | None = None

    @property
    def template(self) -> str:
        """The route as written: api/similar/<str:key>, admin/(?P<url>.*)$ ..."""
        return "".join(str(pattern) for pattern in self.patterns)

    def path(self, value: Callable[["Route", str, str], str]) -> str:
        """The route's URL, each parameter as `value(route, name, its pattern)` gives it (already encoded)."""
        parts = []
        for pattern in self.patterns:
            written = str(pattern)
            if isinstance(pattern, RoutePattern):
                parts.append(re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: value(self, m[2], m[1] or "str"), written))
            else:
                written = written.removeprefix("^").removesuffix("$")
                parts.append(re.sub(r"\(\?P<(\w+)>([^)]*)\)", lambda m: value(self, m[1], m[2]), written))
        return "/" + "".join(parts)


def routes(resolver=None, patterns=()) -> list[Route]:
    """Every route of the project's URLconf, from Django's resolver."""
    found = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            found += routes(entry, (*patterns, entry.pattern))
        elif isinstance(entry, URLPattern):
            model_admin = getattr(entry.callback, "model_admin", None)
            found.append(Route((*patterns, entry.pattern), model_admin and model_admin.model))
    return found


ROUTES = routes()
