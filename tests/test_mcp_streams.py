"""The event streams of `manage.py mcp --transport http` are bounded (mcp_bridge/streams.py).

The story: Erin's read-only token opened 500 event streams (`GET /mcp`) and
held them. Now the server she talks to lets a token hold two streams and
itself three (MCP_STREAMS_PER_TOKEN, MCP_STREAMS_MAX, small here to be
counted), so her third is refused with a 429 that says why, while Frank's
token still gets one; Grace, arriving when the server is full, gets a 503,
though her calls are answered. A stream that ends, whoever ends it, frees its
slot. Another server ends each stream after two seconds
(MCP_STREAM_MAX_AGE), and a revoked token loses its streams.

Real servers as subprocesses, spoken to with a real HTTP client: a stream is
a GET with `Accept: text/event-stream` and the bearer token, without a
session id (the server is stateless: a GET there needs none).
"""

import contextlib
import json

import anyio
import anyio.to_thread
import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from accounts import tokens
from accounts.models import ApiToken, Scope
from mcp_bridge.streams import LIFETIME_OVER, TOKEN_GONE

from .conftest import api_key
from .test_mcp import mcp_server

pytestmark = pytest.mark.django_db  # so that the test database is set up (tests/test_mcp.py says why)

STREAM = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def keys(django_db_setup, django_db_blocker):
    """Committed users, each with a read-only token; removed after the module."""
    with django_db_blocker.unblock():
        users = {name: get_user_model().objects.create_user(name) for name in ("erin", "frank", "grace")}
        found = {name: api_key(user, Scope.READ) for name, user in users.items()}
        found["erin's laptop"] = api_key(users["erin"], Scope.READ)
        database = connection.settings_dict["NAME"]
    yield found, database
    with django_db_blocker.unblock():
        ApiToken.objects.filter(user__in=users.values()).delete()
        get_user_model().objects.filter(pk__in=[user.pk for user in users.values()]).delete()


@pytest.fixture(scope="module")
def bounded(keys):
    """Two streams a token, three in all; a streaming token checked again every second."""
    _, database = keys
    with mcp_server(database, MCP_STREAMS_PER_TOKEN=2, MCP_STREAMS_MAX=3, MCP_STREAM_TOKEN_CHECK=1) as url:
        yield url


@pytest.fixture(scope="module")
def short_lived(keys):
    """One stream a token, which lasts two seconds (1.8 to 2: a tenth less at most)."""
    _, database = keys
    with mcp_server(database, MCP_STREAMS_PER_TOKEN=1, MCP_STREAM_MAX_AGE=2) as url:
        yield url


# -- talking to the server -------------------------------------------------------------------


async def open_stream(streams: contextlib.AsyncExitStack, http, url: str, key: str) -> httpx2.Response:
    """A GET of `url` as `key`, held open by `streams` until it closes (a refusal is read whole)."""
    headers = STREAM | {"Authorization": f"Bearer {key}"}
    response = await streams.enter_async_context(http.stream("GET", url, headers=headers))
    if response.status_code != 200:
        await response.aread()
    return response


async def admitted(streams, http, url: str, key: str) -> httpx2.Response:
    """A stream that must be let in, once the server has seen the streams closed just before end."""
    deadline = anyio.current_time() + 10
    while (response := await open_stream(streams, http, url, key)).status_code != 200:
        assert anyio.current_time() < deadline, response.text
        await anyio.sleep(0.1)
    assert response.headers["content-type"].startswith("text/event-stream")
    return response


def refusal(response: httpx2.Response) -> tuple[int, str, str, int]:
    """(status, code, message, Retry-After) of a refused stream."""
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    return response.status_code, error["code"], error["message"], int(response.headers["retry-after"])


async def until_it_ends(response: httpx2.Response) -> tuple[bytes, float]:
    """What the server sent on the stream until it ended it, and the seconds that took."""
    started, received = anyio.current_time(), b""
    with anyio.fail_after(30):
        async for chunk in response.aiter_bytes():
            received += chunk
    return received, anyio.current_time() - started


def client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=httpx2.Timeout(30))


# -- the bounds ------------------------------------------------------------------------------


def test_a_token_past_its_streams_is_refused_saying_why_while_another_token_gets_one(bounded, keys):
    key = keys[0]

    async def story():
        async with client() as http, contextlib.AsyncExitStack() as streams:
            for _ in range(2):
                await admitted(streams, http, bounded, key["erin"])
            third = await open_stream(streams, http, bounded, key["erin"])
            franks = await admitted(streams, http, bounded, key["frank"])
            return refusal(third), franks.status_code

    (status, code, message, retry_after), franks = anyio.run(story)

    assert (status, code, franks) == (429, "too_many_streams", 200)
    assert message.startswith(
        "this token holds 2 open event streams on /mcp, the most one token may (MCP_STREAMS_PER_TOKEN); "
        "close one before opening another (the oldest ends by itself in "
    )
    assert 500 < retry_after <= 600  # the oldest stream's lifetime (MCP_STREAM_MAX_AGE, 600 s less a tenth at most)


def test_a_stream_closed_frees_its_slot(bounded, keys):
    key = keys[0]

    async def story():
        async with client() as http, contextlib.AsyncExitStack() as streams:
            await admitted(streams, http, bounded, key["erin"])
            async with contextlib.AsyncExitStack() as closed_soon:
                await admitted(closed_soon, http, bounded, key["erin"])
                full = await open_stream(streams, http, bounded, key["erin"])
            # Erin's agent closed one: the next is let in.
            return full.status_code, (await admitted(streams, http, bounded, key["erin"])).status_code

    assert anyio.run(story) == (429, 200)


def test_a_flood_of_one_token_gets_exactly_its_streams(bounded, keys):
    """Erin's agent opens 30 at once, as it did 500: two are let in, each other one is a 429."""
    key = keys[0]

    async def flood():
        statuses = []
        async with client() as http, contextlib.AsyncExitStack() as streams:
            await admitted(streams, http, bounded, key["frank"])  # the server is answering, the last test's gone

            async def one():
                statuses.append((await open_stream(streams, http, bounded, key["erin"])).status_code)

            async with anyio.create_task_group() as group:
                for _ in range(30):
                    group.start_soon(one)
        return sorted(statuses)

    assert anyio.run(flood) == [200] * 2 + [429] * 28


def test_a_full_server_refuses_a_stream_with_a_503_but_answers_calls(bounded, keys):
    key = keys[0]
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    posting = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {key['grace']}"}

    async def story():
        async with client() as http, contextlib.AsyncExitStack() as streams:
            for name in ("erin", "erin", "frank"):
                await admitted(streams, http, bounded, key[name])
            graces = await open_stream(streams, http, bounded, key["grace"])
            answer = await http.post(bounded, json=call, headers=posting)
            return refusal(graces), answer.status_code, "tools" in answer.json()["result"]

    (status, code, message, retry_after), call_status, listed = anyio.run(story)

    assert (status, code, call_status, listed) == (503, "streams_full", 200, True)
    assert message.startswith("the server holds 3 open event streams, the most it may (MCP_STREAMS_MAX); try again in ")
    assert "raise MCP_STREAMS_MAX" in message and 500 < retry_after <= 600


def test_a_listen_stream_counts_as_an_event_stream_too(bounded, keys):
    """At protocol 2026-07-28 a client listens with a POST whose answer is an event stream."""
    key = keys[0]
    version = "2026-07-28"
    listen = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {key['erin']}",
        "MCP-Protocol-Version": version,
        "Mcp-Method": "subscriptions/listen",
    }

    async def story():
        async with client() as http, contextlib.AsyncExitStack() as streams:
            answers = []
            for _ in range(3):
                response = await streams.enter_async_context(http.stream("POST", bounded, json=listen, headers=headers))
                if response.status_code != 200:
                    await response.aread()
                answers.append(response)
            return [(r.status_code, r.headers["content-type"].partition(";")[0]) for r in answers]

    assert anyio.run(story) == [(200, "text/event-stream")] * 2 + [(429, "application/json")]


# -- streams that end ------------------------------------------------------------------------


def test_a_stream_ends_after_its_lifetime_and_may_be_opened_again(short_lived, keys):
    key = keys[0]

    async def story():
        async with client() as http, contextlib.AsyncExitStack() as streams:
            first = await admitted(streams, http, short_lived, key["frank"])
            received, lasted = await until_it_ends(first)
            # One stream a token on this server: the slot was freed.
            return received, lasted, (await admitted(streams, http, short_lived, key["frank"])).status_code

    received, lasted, again = anyio.run(story)

    assert received.endswith(LIFETIME_OVER) and again == 200
    assert 1.7 < lasted < 10


def test_a_revoked_token_loses_its_streams(bounded, keys, django_db_blocker):
    key = keys[0]["erin's laptop"]

    def revoke():
        with django_db_blocker.unblock():
            tokens.revoke(ApiToken.objects.get(digest=tokens.digest(key)))
            connection.close()  # this worker thread's own

    async def story():
        async with client() as http, contextlib.AsyncExitStack() as streams:
            stream = await admitted(streams, http, bounded, key)
            await anyio.to_thread.run_sync(revoke)
            received, lasted = await until_it_ends(stream)
            again = await open_stream(streams, http, bounded, key)
            return received, lasted, again.status_code

    received, lasted, again = anyio.run(story)

    assert received.endswith(TOKEN_GONE) and again == 401
    assert lasted < 10  # checked again every second here (MCP_STREAM_TOKEN_CHECK), every minute by default


def test_refusals_are_the_contracts_error_body():
    """The same shape as every other error of the service: {"error": {"code", "message"}}."""
    from mcp_bridge.streams import Streams, StreamsFull, TooManyStreams

    async def refused():
        streams = Streams(per_token=1, most=2, max_age=0, token_check=0, token_live=lambda key: True)
        streams.open("a")
        errors = []
        for key in ("a", "b", "c"):
            try:
                streams.open(key)
            except (TooManyStreams, StreamsFull) as error:
                errors.append((error.status, error.headers(), json.dumps(error.body())))
        return errors

    too_many, full = anyio.run(refused)
    assert too_many[0] == 429 and full[0] == 503
    # Streams that last for ever (MCP_STREAM_MAX_AGE=0): no Retry-After to promise.
    assert too_many[1] == full[1] == {}
    assert json.loads(too_many[2])["error"]["message"].endswith("close one before opening another.")
