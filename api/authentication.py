"""REST authentication: DRF's tokens, answered so that a token says nothing of its user.

DRF tells a deactivated (or deleted) user's token apart from an unknown one
("User inactive or deleted."), which tells the caller that the token exists.
Here both get DRF's own words for an unknown token.

A token comes as `Authorization: Token <key>` (DRF's scheme) or `Bearer <key>`
(MCP over HTTP's, mcp_bridge.auth): one header works on both surfaces.
"""

from rest_framework import authentication, exceptions

SCHEMES = ("Token", "Bearer")


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate(self, request):
        scheme = authentication.get_authorization_header(request).split()[:1]
        for keyword in SCHEMES:
            if scheme and scheme[0].lower() == keyword.lower().encode():
                # DRF makes its authenticators anew for each request: this one reads the scheme it was sent.
                self.keyword = keyword
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        try:
            return super().authenticate_credentials(key)
        except exceptions.AuthenticationFailed:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
