"""REST authentication: DRF's tokens, answered so that a token says nothing of its user.

DRF tells a deactivated (or deleted) user's token apart from an unknown one
("User inactive or deleted."), which tells the caller that the token exists.
Here both get DRF's own words for an unknown token.
"""

from rest_framework import authentication, exceptions


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key):
        try:
            return super().authenticate_credentials(key)
        except exceptions.AuthenticationFailed:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
