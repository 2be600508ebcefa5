"""Bearer tokens for the HTTP transport: the REST API's tokens (accounts.tokens).

A token opens both surfaces; a revoked or expired one, or one whose user is
inactive, opens neither, refused as a token that never existed.
The SDK answers 401 for a missing or unknown token (SaysWhy says which); the user, read with the
token in one statement, travels in the access token to the tools
(mcp_bridge.server), which act as them without reading them again. A token
that cannot be checked because the database is down is neither: the
request gets the 503 every surface gives then (`DatabaseOutage`). The token
comes as `Bearer <key>` or, as REST takes it, `Token <key>` (`TokenScheme`).
"""

import json
from typing import Any

import anyio.to_thread
from django.db import DatabaseError, close_old_connections
from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict, Field
from starlette.middleware import Middleware

from accounts import tokens
from backlog.db import database_unavailable
from search.contract import DatabaseUnavailable, unavailable

from .streams import StreamLimits, Streams, send_error


class UserToken(AccessToken):
    """The SDK's access token, with the user the request acts as."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    user: Any = Field(default=None, exclude=True, repr=False)
    may_write: bool = Field(default=False, exclude=True)  # a read-and-write token: the tools that write ask


class DrfTokenVerifier:
    async def verify_token(self, token: str) -> UserToken | None:
        try:
            user = await anyio.to_thread.run_sync(user_for_token, token)
        except DatabaseError as exc:
            if database_unavailable(exc):
                raise unavailable(exc) from None
            raise
        if user is None:
            return None
        may_write = getattr(user, "token_may_write", False)
        return UserToken(
            token=token, client_id=f"user-{user.pk}", subject=str(user.pk), scopes=[], user=user, may_write=may_write
        )


def user_for_token(key: str):
    """The active user of the live token `key` (accounts.tokens.check), or None; the user
    knows whether the token may write (`token_may_write`)."""
    close_old_connections()
    try:
        token = tokens.check(key)
        if token is None:
            return None
        token.user.token_may_write = tokens.may_write(token)
        return token.user
    finally:
        close_old_connections()


class DatabaseOutage:
    """ASGI middleware around the SDK's authentication: a request whose token
    could not be checked, the database being down, gets a 503 with the
    contract's `database_unavailable` body and Retry-After, as REST and the
    tools give, instead of the server's bare 500."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        try:
            await self.app(scope, receive, send)
        except DatabaseUnavailable as exc:
            if scope["type"] != "http":
                raise
            await send_error(send, exc)


#: What a refused request is told (RFC 6750 §3: no error code when no credentials came at all).
NO_TOKEN = (
    "no token: send the header Authorization: Bearer <token>, with a token made on the web app's Tokens page (/tokens/)"
)
BAD_TOKEN = (
    "this token is unknown, revoked or expired, or its user is deactivated: make a new one on the web app's "
    "Tokens page (/tokens/)"
)
OTHER_SCHEME = "the token goes as Authorization: Bearer <token> (or Token <token>, as REST takes it)"


class SaysWhy:
    """ASGI middleware outside the SDK's authentication: its 401 ("Authentication
    required", for every case) says which of no token, another scheme or a token
    that opens nothing it was, in the body and in WWW-Authenticate (RFC 6750),
    and never whether a token ever existed."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"authorization", b"").strip()
        scheme = header.partition(b" ")[0].lower()
        error, why = (
            ("invalid_request", NO_TOKEN)
            if not header
            else ("invalid_request", OTHER_SCHEME)
            if scheme not in (b"bearer", b"token")
            else ("invalid_token", BAD_TOKEN)
        )
        refused = False

        async def told(message):
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 401:
                refused = True
                body = json.dumps({"error": error, "error_description": why}).encode()
                challenge = 'Bearer realm="qa-search"' + (
                    "" if not header else f', error="{error}", error_description="{why}"'
                )
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({**message, "headers": [*headers, (b"www-authenticate", challenge.encode())]})
                return await send({"type": "http.response.body", "body": body})
            if not refused:
                await send(message)

        await self.app(scope, receive, told)


class TokenScheme:
    """ASGI middleware before the SDK's authentication, which reads only
    `Bearer`: a REST header, `Authorization: Token <key>`, is read as
    `Bearer <key>`, so one header works on both surfaces."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            scope = {**scope, "headers": [(name, _as_bearer(name, value)) for name, value in scope["headers"]]}
        await self.app(scope, receive, send)


def _as_bearer(name: bytes, value: bytes) -> bytes:
    scheme, _, key = value.strip().partition(b" ")
    if name.lower() == b"authorization" and scheme.lower() == b"token" and key.strip():
        return b"Bearer " + key.strip()
    return value


def http_app(server, host: str):
    """The streamable HTTP app of `server` (stateless), with DatabaseOutage
    and TokenScheme outside its authentication and StreamLimits inside it. A
    call is answered with one JSON body rather than an event stream: a tool
    here sends nothing before its result, and the stream cost 0.5-0.9 ms a
    call (git show 0a961a8:docs/benchmarks.md)."""
    app = server.streamable_http_app(host=host, stateless_http=True, json_response=True)
    app.add_middleware(DatabaseOutage)
    app.add_middleware(TokenScheme)
    app.add_middleware(SaysWhy)
    # Appended, it runs after the SDK's authentication (its middleware come first
    # in the list), so the request's token is known; add_middleware puts a
    # middleware before all of them.
    streams = Streams.from_settings(token_live=lambda key: user_for_token(key) is not None)
    app.user_middleware.append(Middleware(StreamLimits, streams=streams))
    return app
