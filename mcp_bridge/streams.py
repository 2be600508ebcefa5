"""Bounds on the event streams clients hold open on /mcp (streamable HTTP).

An event stream is a response of type `text/event-stream`: a GET's
standalone stream for server-initiated messages or, at protocol 2026-07-28,
a `subscriptions/listen` POST's. Calls are answered with one JSON body
(mcp_bridge.auth.http_app) and are not counted. On this stateless server
neither stream ever carries a message, only the SDK's keep-alive comment
every 15 s, yet each holds a socket and the SDK's tasks for as long as the
client keeps it: one read-only token held 500 (548 file descriptors).

So, in each server process (`StreamLimits`, inside the SDK's authentication,
where the token is known):

- a token holds at most MCP_STREAMS_PER_TOKEN streams, past it a 429, and the
  process at most MCP_STREAMS_MAX, past it a 503: the contract's error body,
  with a Retry-After of when the oldest stream in the way ends;
- a stream lasts MCP_STREAM_MAX_AGE seconds (up to a tenth less, so that
  streams opened together do not all come back together); then the response
  ends cleanly and the client opens it again, as streamable HTTP allows;
- every MCP_STREAM_TOKEN_CHECK seconds a stream's token is checked again: once
  revoked or expired (or its user inactive) the stream ends, and opening it
  again is refused as any request with that token is (401).

A stream's slot is freed the moment it ends, whichever side ends it.
"""

import json
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.to_thread
from django.conf import settings
from django.db import DatabaseError

from search.contract import SearchError

logger = logging.getLogger(__name__)

# What a client reads (an SSE comment, which parsers skip) as the server ends its stream.
LIFETIME_OVER = b": this stream reached its lifetime (MCP_STREAM_MAX_AGE); open it again\n\n"
TOKEN_GONE = b": this token was revoked or has expired, or its user is inactive\n\n"
# How long ending a stream may wait on a client that stopped reading; then the connection is dropped.
FAREWELL_TIMEOUT = 5.0


class StreamRefused(SearchError):
    def __init__(self, message: str, retry_after: int | None):
        super().__init__(message)
        self.retry_after = retry_after  # None: no stream ends by itself (MCP_STREAM_MAX_AGE=0)


class TooManyStreams(StreamRefused):
    status = 429
    code = "too_many_streams"


class StreamsFull(StreamRefused):
    status = 503
    code = "streams_full"


@dataclass(eq=False)
class Stream:
    key: str  # the bearer token's key
    ends_at: float  # on the event loop's clock (anyio.current_time); inf: no lifetime


class Streams:
    """The open event streams of one server process, by token."""

    def __init__(self, per_token: int, most: int, max_age: float, token_check: float, token_live: Callable):
        self.per_token, self.most, self.max_age, self.token_check = per_token, most, max_age, token_check
        self.token_live = token_live  # key -> whether the token still opens MCP; runs in a worker thread
        self.by_token: dict[str, set[Stream]] = {}
        self.total = 0
        self.warned: set[str | None] = set()  # tokens (None: the process) whose refusals are logged

    @classmethod
    def from_settings(cls, token_live: Callable) -> "Streams":
        return cls(
            settings.MCP_STREAMS_PER_TOKEN,
            settings.MCP_STREAMS_MAX,
            settings.MCP_STREAM_MAX_AGE,
            settings.MCP_STREAM_TOKEN_CHECK,
            token_live,
        )

    def open(self, key: str) -> Stream:
        """A new stream of the token `key`, or TooManyStreams / StreamsFull saying what to do."""
        now = anyio.current_time()
        held = self.by_token.get(key, set())
        if len(held) >= self.per_token:
            self._warn(key, f"token {key[:10]}... holds {len(held)} streams (MCP_STREAMS_PER_TOKEN)")
            seconds = self._seconds(held, now)
            raise TooManyStreams(
                f"this token holds {len(held)} open event streams on /mcp, the most one token may "
                "(MCP_STREAMS_PER_TOKEN); close one before opening another"
                + (f" (the oldest ends by itself in {seconds} s: MCP_STREAM_MAX_AGE)." if seconds else "."),
                seconds,
            )
        if self.total >= self.most:
            self._warn(None, f"the process holds {self.total} streams (MCP_STREAMS_MAX)")
            seconds = self._seconds([stream for held in self.by_token.values() for stream in held], now)
            raise StreamsFull(
                f"the server holds {self.total} open event streams, the most it may (MCP_STREAMS_MAX); try again "
                + (f"in {seconds} s, when the oldest ends by itself" if seconds else "later")
                + ", or ask the service's operator to raise MCP_STREAMS_MAX. Calls are answered meanwhile.",
                seconds,
            )
        lifetime = self.max_age * random.uniform(0.9, 1.0) if self.max_age > 0 else math.inf
        stream = Stream(key, now + lifetime)
        self.by_token.setdefault(key, set()).add(stream)
        self.total += 1
        return stream

    def close(self, stream: Stream) -> None:
        held = self.by_token[stream.key]
        held.discard(stream)
        self.total -= 1
        self.warned.discard(stream.key)
        self.warned.discard(None)
        if not held:
            del self.by_token[stream.key]

    async def still_live(self, key: str) -> bool:
        try:
            return await anyio.to_thread.run_sync(self.token_live, key)
        except DatabaseError:
            return True  # cannot tell now; the stream's lifetime bounds it still

    def _seconds(self, streams, now: float) -> int | None:
        """Seconds until the first of `streams` ends by itself, or None if none has a lifetime."""
        first = min(stream.ends_at for stream in streams)
        return max(1, math.ceil(first - now)) if first != math.inf else None

    def _warn(self, who: str | None, what: str) -> None:
        """Logged once until a stream of theirs ends, not once a refusal: a client retrying in a loop."""
        if who not in self.warned:
            self.warned.add(who)
            logger.warning("MCP event streams refused: %s; logged again once one of them ends", what)


class StreamLimits:
    """ASGI middleware inside the SDK's authentication (mcp_bridge.auth.http_app):
    bounds, ends and counts the event streams of each token (`Streams`)."""

    def __init__(self, app, streams: Streams):
        self.app = app
        self.streams = streams

    async def __call__(self, scope, receive, send):
        access = getattr(scope.get("user"), "access_token", None) if scope["type"] == "http" else None
        if access is None:  # no token: the SDK refuses the request (401)
            await self.app(scope, receive, send)
            return
        await _Response(self.streams, access.token, send).serve(self.app, scope, receive)


class _Response:
    """One response to a token's request, counted from its start if that is an event stream's."""

    def __init__(self, streams: Streams, key: str, send):
        self.streams, self.key, self._send = streams, key, send
        self.stream: Stream | None = None
        self.refused: SearchError | None = None
        self.farewell = LIFETIME_OVER
        self.complete = False

    async def serve(self, app, scope, receive) -> None:
        # The group's scope is the response's: its deadline is the stream's
        # lifetime, and the token's watcher cancels it.
        try:
            async with anyio.create_task_group() as self.group:
                await app(scope, receive, self.send)
                self.group.cancel_scope.cancel()  # the watcher, if a stream was opened
        except BaseExceptionGroup as failed:  # anyio groups the app's own error: raise it as the app did
            raise failed.exceptions[0] if len(failed.exceptions) == 1 else failed from None
        finally:
            if self.stream:
                self.streams.close(self.stream)
        if self.refused:
            await send_error(self._send, self.refused)
        elif self.stream and not self.complete:
            # Ended here (or the client left, and this is not sent): end the body as
            # a finished response, which a client reconnects after.
            with anyio.move_on_after(FAREWELL_TIMEOUT):
                await self._send({"type": "http.response.body", "body": self.farewell, "more_body": False})

    async def send(self, message) -> None:
        if self.refused:
            return  # the app is being cancelled; its response is not sent
        if message["type"] == "http.response.start" and _is_event_stream(message):
            try:
                self.stream = self.streams.open(self.key)
            except StreamRefused as refusal:
                self.refused = refusal
                self.group.cancel_scope.cancel()
                return
            self.group.cancel_scope.deadline = self.stream.ends_at
            if self.streams.token_check > 0:
                self.group.start_soon(self._watch_token)
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def _watch_token(self) -> None:
        while True:
            await anyio.sleep(self.streams.token_check)
            if not await self.streams.still_live(self.key):
                self.farewell = TOKEN_GONE
                self.group.cancel_scope.cancel()
                return


def _is_event_stream(start) -> bool:
    types = [value for name, value in start.get("headers", []) if name.lower() == b"content-type"]
    return bool(types) and types[0].partition(b";")[0].strip().lower() == b"text/event-stream"


async def send_error(send, error: SearchError) -> None:
    """Answer with `error`: its status, Retry-After if it has one, and the contract's error body."""
    headers = [(b"content-type", b"application/json")]
    headers += [(name.lower().encode(), value.encode()) for name, value in error.headers().items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(error.body()).encode()})
