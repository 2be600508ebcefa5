"""What the fuzz tests share: the strategies, the budget, what no answer may
show, and the tally a long run reads.

The strategies draw parameters by name (and an unknown name) with values of
every JSON type and hostile text: tsquery operators, quotes, backslashes,
NUL, emoji, right-to-left text, far-off dates and offsets, long strings,
garbage cursors. tests/test_fuzz.py sends them to the service and over
REST, tests/test_mcp.py as tool arguments through a real MCP client.

`FUZZ_EXAMPLES` sets the budget (150 examples a test unless given); above
150 it is a long run, which also does what the suite cannot afford.
`FUZZ_TALLY` names a file that gets one JSON line per input sent: `make fuzz`
(bench/fuzz.py) counts them per surface. The tests still fail on the first
bad answer; the tally only says how much was tried.
"""

import json
import os

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
