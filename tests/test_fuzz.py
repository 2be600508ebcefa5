"""Fuzzing: any value of any type, for any parameter, on the service and over REST.

Hypothesis draws parameters by name (and some unknown names) with values of
every JSON type and hostile text: tsquery operators, quotes, backslashes,
NUL, emoji, right-to-left text, far-off dates and offsets, long strings,
garbage cursors. Every answer is a result or a SearchError (REST: a 4xx
JSON body), never another exception. A fixed budget keeps the suite fast;
`FUZZ_EXAMPLES` raises it for a longer run.
"""

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search import service
from search.contract import SearchError

from .conftest import client_with_token, seeing_all_products

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))

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


@FUZZ
@given(call=CALLS)
def test_the_service_answers_anything_with_a_result_or_a_search_error(tramline, call):
    operation, params = call
    try:
        body = service.call(operation, params)
    except SearchError as exc:
        assert str(exc) and "Traceback" not in str(exc)
        assert exc.status < 500 or exc.status == 503
    else:
        json.dumps(body)  # the contract's JSON


@pytest.fixture
def reader(django_user_model):
    return client_with_token(
        seeing_all_products(django_user_model.objects.create_user("fuzz", password="a-long-passphrase"))
    )


def query_string(params: dict) -> dict:
    """What a query string can carry: strings, lists of strings."""
    out = {}
    for name, value in params.items():
        values = value if isinstance(value, list) else [value]
        out[name] = [json.dumps(v) if isinstance(v, dict | list) else str(v) for v in values]
    return out


@FUZZ
@given(params=params_for("search"))
def test_rest_search_never_answers_5xx_or_a_traceback(tramline, reader, params):
    response = reader.get("/api/search", query_string(params))
    assert response.status_code in (200, 400, 404, 503), response.content[:300]
    body = response.content.decode()
    assert "Traceback" not in body and "psycopg" not in body and "SELECT" not in body
    json.loads(body)


@FUZZ
@given(key=TEXT)
def test_rest_record_paths_never_answer_5xx(tramline, reader, key):
    from urllib.parse import quote

    for path in ("similar", "timeline"):
        response = reader.get(f"/api/{path}/{quote(key, safe='')}")
        assert response.status_code in (200, 400, 404), (key, response.content[:300])
