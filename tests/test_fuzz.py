"""Fuzzing: any value of any type, for any parameter, on the service, over
REST, and at every operation of the OpenAPI schema.

Every answer is a result or a SearchError (REST: a 4xx JSON body), never
another exception, and no body shows a traceback or SQL; every answer of
the schema's operations is one the schema documents. The strategies and the
budget are tests/fuzzing.py's; tests/test_mcp.py sends the same values as
MCP tool arguments.
"""

import json
from urllib.parse import quote

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from search import service
from search.contract import SearchError
from search.indexing.vectors import embed_pending

from .fuzzing import CALLS, EXAMPLES, FUZZ, LONG_RUN, TEXT, leak, names_what_was_wrong, params_for, tally


@FUZZ
@given(call=CALLS)
def test_the_service_answers_anything_with_a_result_or_a_search_error(tramline, call):
    operation, params = call
    try:
        body = service.call(operation, params)
    except SearchError as exc:
        tally("service", server_error=False, body=str(exc))
        assert names_what_was_wrong(operation, str(exc)) and not leak(str(exc)), str(exc)
        assert exc.status < 500 or exc.status == 503
    except Exception:
        tally("service", server_error=True, body="")
        raise
    else:
        tally("service", server_error=False, body=json.dumps(body))


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
    body = response.content.decode()
    tally("REST /api/search", server_error=response.status_code >= 500, body=body)
    assert response.status_code in (200, 400, 404, 414, 503), response.content[:300]
    assert not leak(body)
    json.loads(body)


@FUZZ
@given(key=TEXT)
def test_rest_record_paths_never_answer_5xx(tramline, reader, key):
    for path in ("similar", "timeline"):
        response = reader.get(f"/api/{path}/{quote(key, safe='')}")
        tally(f"REST /api/{path}/KEY", server_error=response.status_code >= 500, body=response.content.decode())
        assert response.status_code in (200, 400, 404, 414), (key, response.content[:300])


# -- every operation of the OpenAPI schema (schemathesis) --------------------------------------
# Loaded when this module is imported, from /api/schema of the app called in
# process (WSGI), so that every request reaches the test database; schemathesis
# makes one test per operation from it. (Its fixture loader, from_fixture, fails
# on pytest 9.2, which dropped the node attribute it renames.)

API = get_wsgi_application()
openapi = schemathesis.openapi.from_wsgi("/api/schema", API)
# Examples per operation in the fuzzing phase. Schemathesis's coverage phase
# (each parameter's boundary values, wrong types, omissions, other methods:
# about 2,000 requests, 30 s here) doubles the test's time, so only a long run has it.
OPERATION_EXAMPLES = max(5, EXAMPLES // 15)
openapi.config.phases.update(phases=["examples", "fuzzing", *(["coverage"] if LONG_RUN else [])])
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

# The story's keys, by the first part of the path: half of the generated keys
# and references become one that exists, so that updates, deletes and creates
# get past "not found" to the validation and the writes.
KEYS = {
    "bugs": "BUG-12",
    "tests": "TEST-3",
    "features": "FEAT-7",
    "products": "PRD-1",
    "similar": "BUG-12",
    "timeline": "TEST-3",
}
REFERENCES = {"product": "PRD-1", "feature": "FEAT-7", "test": "TEST-3"}


@openapi.hook("flatmap_path_parameters")
def stored_keys(context, path_parameters):
    if not path_parameters:
        return st.just(path_parameters)
    stored = {**path_parameters, "key": KEYS[context.operation.path.split("/")[2]]}
    return st.sampled_from([stored, path_parameters])


@openapi.hook("flatmap_body")
def stored_references(context, body):
    if not isinstance(body, dict) or not REFERENCES.keys() & body.keys():
        return st.just(body)
    return st.sampled_from([{**body, **{name: REFERENCES[name] for name in REFERENCES.keys() & body.keys()}}, body])


@schemathesis.serializer("application/x-ndjson", "application/jsonl")
def json_lines(context, value):
    """The import's body is a string in the schema; sent as it is, like text/plain."""
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()


@pytest.fixture
def in_process(tramline, alice):
    """Alice's token header, with the story embedded (mode=semantic can run).

    Django's WSGI handler closes "old" connections when a request starts and
    ends, which would close the test's transaction; its test client switches
    that off for each request, and so does this fixture for the test."""
    embed_pending()
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield {"Authorization": f"Token {Token.objects.create(user=alice).key}"}
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@openapi.parametrize()
@settings(max_examples=OPERATION_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_answers_in_its_schema_and_never_5xx(case, in_process):
    # Each request in a savepoint rolled back: every one sees the story as the
    # fixture left it (a PUT may rename BUG-12, a DELETE remove it).
    with transaction.atomic():
        response = case.call(headers=in_process)
        transaction.set_rollback(True)
    tally("OpenAPI (schemathesis)", server_error=response.status_code >= 500, body=response.text)
    assert not leak(response.text), response.text[:300]
    case.validate_response(response, checks=CHECKS)
