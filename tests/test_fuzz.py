"""Fuzzing: any value of any type, for any parameter, on the service, over
REST, at every operation of the OpenAPI schema, and any method with any
query string and body on every route of the site.

Every answer is a result or a SearchError (REST: a 4xx JSON body), never
another exception, and no body shows a traceback or SQL; every answer of
the schema's operations is one the schema documents. On every route of the
URLconf (the API, the staff UI, the admin, the health checks, the schema
and its docs), whoever asks (a visitor, Alice with her token, Dora logged
in as staff), any method, parameters given twice, lone surrogates and bytes
that are no UTF-8 get an answer below 500, and under /api/ an error is a
JSON body. The strategies and the
budget are tests/fuzzing.py's; tests/test_mcp.py sends the same values as
MCP tool arguments.
"""

import copy
import json
from urllib.parse import quote

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from saved.models import SavedSearch
from search import service
from search.contract import SearchError
from search.indexing.vectors import embed_pending
from tests.conftest import api_key

from .fuzzing import (
    BODY,
    CALLS,
    EXAMPLES,
    FUZZ,
    INVALID_UTF8,
    JSON_VALUE,
    LONG_RUN,
    METHODS,
    NAMES,
    QUERY_VALUE,
    REPETITIONS,
    ROUTES,
    SURROGATE,
    TEXT,
    TWICE,
    Route,
    encoded,
    encoded_query,
    leak,
    names_what_was_wrong,
    params_for,
    tally,
)


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
    segment = context.operation.path.split("/")[2]
    if not path_parameters or segment not in KEYS:  # a run's id: only made-up ones
        return st.just(path_parameters)
    stored = {**path_parameters, "key": KEYS[segment]}
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
    yield {"Authorization": f"Token {api_key(alice)}"}
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


# -- every method on every route, parameters twice, text that is no UTF-8 ------------------------


def schema_path(route: Route) -> str:
    """The route as the OpenAPI schema names its path: /api/bugs/{key}."""
    return route.path(lambda route, name, pattern: "{" + name + "}")


def parameters(route: Route) -> list[str]:
    """The query parameters `route` reads: the schema's for an API route, the
    search's for the staff UI's pages, the changelist's for the admin, and the
    ones no route reads."""
    path = schema_path(route)
    names = {
        parameter["name"]
        for operation in openapi.raw_schema["paths"].get(path, {}).values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query"
    }
    if path.startswith("/admin/"):
        names |= {"q", "o", "p", "e", "all", "_popup", "_to_field", "_changelist_filters", "next"}
    elif not path.startswith("/api/"):
        names |= {*NAMES["search"], "next"}
    return sorted(names | {"format", "script", "unknown_parameter"})


def is_a_form(route: Route) -> bool:
    return not route.template.startswith("api/")


@pytest.fixture
def visitors(tramline, alice, django_user_model):
    """Who asks, by name: a visitor with no login, Alice with her API token
    (she may add, change and delete records), and Dora, staff and superuser,
    logged in to the staff UI and the admin. Dora has a saved search."""
    dora = django_user_model.objects.create_superuser("dora", password="the-admin-passphrase")
    SavedSearch.from_params({"query": "renewal"}, owner=dora, name="Renewal")
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Token {api_key(alice)}")
    staff = Client(raise_request_exception=True)
    staff.force_login(dora)
    return {"anonymous": Client(), "token": token, "staff": staff}


def stored(route: Route, name: str, pattern: str) -> str:
    """A value of the route's parameter `name` that names something stored:
    the story's key, Dora's saved search, the first row of an admin's model."""
    if name == "key":
        return next((KEYS[part] for part in route.template.split("/") if part in KEYS), "BUG-12")
    if name == "pk":
        return str(SavedSearch.objects.values_list("pk", flat=True).first())
    if name == "object_id" and route.model:
        return quote(str(route.model.objects.values_list("pk", flat=True).first() or 1), safe="")
    if name == "app_label":
        return "backlog"
    if pattern in ("int", "path"):  # the admin's view-on-site link: /admin/r/<content type>/<object>/
        return "1"
    return "nowhere"  # the catch-alls: /admin/<url>, anything else under /api/


def hostile(path_value):
    """A strategy for a route's parameter: the stored value or hostile text."""
    return st.one_of(
        st.just(path_value),
        TEXT.map(encoded),
        SURROGATE.map(encoded),
        st.sampled_from([value for value in INVALID_UTF8 if value.startswith("%")]),
    )


def send(client, method: str, path: str, query: str = "", body: bytes = b"", content_type: str | None = None):
    """One request in a savepoint rolled back (every request sees the story as
    the fixture left it), and the client's cookies as they were before (a POST
    to a logout page leaves Dora logged in for the next)."""
    cookies = copy.deepcopy(client.cookies)
    with transaction.atomic():
        response = client.generic(method, path, body, content_type or "application/octet-stream", QUERY_STRING=query)
        content = b"".join(response.streaming_content) if response.streaming else response.content
        transaction.set_rollback(True)
    client.cookies = cookies
    return response, content


def what_is_wrong(method: str, path: str, response, content: bytes) -> str | None:
    """What breaks the invariant in an answer, or None: a 5xx (but a 503 that
    says when to come back), a traceback or SQL, an error under /api/ that is
    not a JSON body."""
    body = content.decode(errors="replace")
    if response.status_code >= 500 and not (response.status_code == 503 and response.has_header("Retry-After")):
        return f"{response.status_code}: {body[:300]}"
    if found := leak(body):
        return f"shows {found!r}: {body[:300]}"
    if path.startswith("/api/") and response.status_code >= 400 and method != "HEAD":
        try:
            json.loads(body)
        except ValueError:
            return f"a {response.status_code} that is not JSON ({response.get('Content-Type')}): {body[:300]}"
        if not response.get("Content-Type", "").startswith("application/json"):
            return f"a {response.status_code} JSON body as {response.get('Content-Type')}"
    return None


def ask(surface: str, client, method: str, path: str, query: str = "", body: bytes = b"", content_type=None):
    """Send one request, tally it under `surface`, and say what is wrong with its answer (or None)."""
    try:
        response, content = send(client, method, path, query, body, content_type)
    except Exception as exc:
        tally(surface, server_error=True, body="")
        return f"raised {exc!r}"
    wrong = what_is_wrong(method, path, response, content)
    tally(surface, server_error=response.status_code >= 500, body=content.decode(errors="replace"))
    return wrong


# -- what round two found, each as a regular test ----------------------------------------------


@pytest.mark.parametrize("path", ["/api/schema", "/api/docs"])
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "PROPFIND"])
def test_a_method_the_schema_or_its_docs_do_not_take_is_a_json_405(db, anonymous, path, method):
    """They answered in their own format: the schema a YAML error, the docs an HTML "405 Method Not Allowed"."""
    response = anonymous.generic(method, path)
    assert response.status_code == 405 and response["Content-Type"] == "application/json"
    assert response.json() == {"error": {"code": "method_not_allowed", "message": f'Method "{method}" not allowed.'}}


def test_the_resolver_gives_every_kind_of_route():
    templates = {route.template for route in ROUTES}
    for expected in ("healthz", "readyz", "admin/login/", "api/search", "api/docs", "api/schema", "search/"):
        assert expected in templates, expected
    assert len(ROUTES) > 80


def test_every_method_on_every_route_never_answers_5xx(visitors):
    """Each route of the URLconf with its stored values, each method, an unknown
    one too, as each visitor (the suite: one visitor a request, in turn; a long
    run: all three). Every bad answer is listed, not only the first."""
    wrong = []
    for number, (route, method) in enumerate((route, method) for route in ROUTES for method in METHODS):
        path = route.path(stored)
        who = list(visitors) if LONG_RUN else [list(visitors)[number % len(visitors)]]
        for name in who:
            if problem := ask("every method on every route", visitors[name], method, path):
                wrong.append(f"{name} {method} {path}: {problem}")
    assert not wrong, "\n".join(wrong)


@FUZZ
@given(data=st.data())
def test_any_request_to_any_route_never_answers_5xx(visitors, data):
    """Any route, method and visitor; hostile path values; any parameters, some twice; any body."""
    route = data.draw(st.sampled_from(ROUTES), label="route")
    method = data.draw(st.sampled_from(METHODS), label="method")
    who = data.draw(st.sampled_from(sorted(visitors)), label="visitor")
    path = route.path(lambda route, name, pattern: data.draw(hostile(stored(route, name, pattern)), label=name))
    pairs = data.draw(st.lists(st.tuples(st.sampled_from(parameters(route)), QUERY_VALUE), max_size=6), label="query")
    body, content_type = data.draw(BODY, label="body")

    problem = ask("any request to any route", visitors[who], method, path, encoded_query(pairs), body, content_type)

    assert problem is None, f"{who} {method} {path}?{encoded_query(pairs)}: {problem}"


@FUZZ
@given(data=st.data())
def test_a_parameter_given_twice_never_gets_a_5xx(visitors, data):
    """Every GET route, each of its parameters twice (the same, two values, empty), among others."""
    route = data.draw(st.sampled_from(ROUTES), label="route")
    who = data.draw(st.sampled_from(sorted(visitors)), label="visitor")
    name = data.draw(st.sampled_from(parameters(route)), label="parameter")
    first, second = data.draw(TWICE, label="values")
    others = data.draw(st.lists(st.tuples(st.sampled_from(parameters(route)), QUERY_VALUE), max_size=3), label="others")
    query = encoded_query([(name, first), *others, (name, second)])
    path = route.path(stored)

    problem = ask("parameters twice", visitors[who], "GET", path, query)

    assert problem is None, f"{who} GET {path}?{query}: {problem}"


@pytest.mark.skipif(not LONG_RUN, reason="a long run's: every parameter of every route, four ways")
def test_every_parameter_of_every_route_given_twice_never_gets_a_5xx(visitors):
    """Each parameter of each route twice, each of the four ways, by one visitor after another."""
    wrong = []
    cases = [(route, name, twice) for route in ROUTES for name in parameters(route) for twice in REPETITIONS]
    for number, (route, name, (first, second)) in enumerate(cases):
        path, query = route.path(stored), encoded_query([(name, first), (name, second)])
        who = list(visitors)[number % len(visitors)]
        if problem := ask("every parameter twice", visitors[who], "GET", path, query):
            wrong.append(f"{who} GET {path}?{query}: {problem}")
    assert not wrong, "\n".join(wrong)


def fields(operation: dict) -> tuple[str, list[str]]:
    """The media type of an operation's body and the names of its fields (the schema's)."""
    media_type, content = next(iter(operation["requestBody"]["content"].items()))
    schema = content["schema"]
    if ref := schema.get("$ref"):
        schema = openapi.raw_schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return media_type, sorted(schema.get("properties", {})) or ["kind", "key", "title", "product"]


# The API's writes: each operation with a body.
WRITES = [
    (method.upper(), path, *fields(operation))
    for path, operations in openapi.raw_schema["paths"].items()
    for method, operation in operations.items()
    if "requestBody" in operation
]


@FUZZ
@given(data=st.data())
def test_lone_surrogates_in_json_bodies_never_get_a_5xx(visitors, data):
    """Each write of the API, with a JSON body whose fields (the schema's names)
    hold any value, lone surrogates among them, escaped as a client sends them."""
    method, template, media_type, names = data.draw(st.sampled_from(WRITES), label="operation")
    path = template.replace("{key}", next((KEYS[part] for part in template.split("/") if part in KEYS), "BUG-12"))
    record = st.dictionaries(st.sampled_from(names), JSON_VALUE | SURROGATE, max_size=6)
    if media_type == "application/json":
        body = json.dumps(data.draw(record, label="body")).encode()
    else:  # the import's JSON Lines: records of the kinds, one a line
        lines = data.draw(st.lists(record, min_size=1, max_size=3), label="lines")
        body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    query = data.draw(st.sampled_from(["", "dry_run=true", "dry_run=%ED%A0%80&dry_run=true"]), label="query")

    problem = ask("lone surrogates in JSON bodies", visitors["token"], method, path, query, body, media_type)

    assert problem is None, f"{method} {path}?{query} {body[:300]!r}: {problem}"
