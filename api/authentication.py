"""REST authentication: API tokens (accounts.tokens), answered so that a refusal says nothing of the token.

An unknown, revoked or expired token and one whose user is inactive all get
DRF's words for an unknown token, "Invalid token.", from the same one
statement (accounts.tokens.check). A token comes as `Authorization: Token
<key>` (DRF's scheme) or `Bearer <key>` (MCP over HTTP's, mcp_bridge.auth):
one header works on both surfaces. A read-only token may read; the views
that write (records, import) also ask `TokenMayWrite`.
"""

import pghistory
from rest_framework import authentication, exceptions, permissions

from accounts import tokens

SCHEMES = ("Token", "Bearer")


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's header parsing (and the schema's `tokenAuth`), with the scheme sent and our tokens."""

    def authenticate(self, request):
        scheme = authentication.get_authorization_header(request).split()[:1]
        for keyword in SCHEMES:
            if scheme and scheme[0].lower() == keyword.lower().encode():
                # DRF makes its authenticators anew for each request: this one reads the scheme it was sent.
                self.keyword = keyword
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        token = tokens.check(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        pghistory.context(token=f"{token.name} ({token.prefix}…)")  # the audit trail's, for a write
        return token.user, token


class TokenMayWrite(permissions.BasePermission):
    """Changes need a read-and-write token (or a signed-in session)."""

    message = (
        "this token is read-only: changing records takes a token with the scope 'read and write' "
        "(make one on the Tokens page, /tokens/)"
    )

    def has_permission(self, request, view):
        return request.method in permissions.SAFE_METHODS or tokens.may_write(request.auth)
