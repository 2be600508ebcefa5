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
    """DRF's class in name (the schema's `tokenAuth` comes from it), ours in substance."""

    keyword = "Token"

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() not in {scheme.lower().encode() for scheme in SCHEMES}:
            return None
        self.keyword = next(s for s in SCHEMES if s.lower().encode() == parts[0].lower())
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: give the token after the scheme, no spaces.")
        try:
            key = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = tokens.check(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        pghistory.context(token=f"{token.name} ({token.prefix}…)")  # the audit trail's, for a write
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword


class TokenMayWrite(permissions.BasePermission):
    """Changes need a read-and-write token (or a signed-in session)."""

    message = (
        "this token is read-only: changing records takes a token with the scope 'read and write' "
        "(make one on the Tokens page, /tokens/)"
    )

    def has_permission(self, request, view):
        return request.method in permissions.SAFE_METHODS or tokens.may_write(request.auth)
