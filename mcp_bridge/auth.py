"""Bearer tokens for the HTTP transport: the REST API's DRF tokens.

One token per user, issued and revoked in the admin, opens both surfaces;
an inactive user's token opens neither (as DRF's TokenAuthentication).
The SDK answers 401 for a missing or unknown token; the user's id travels
in the access token's subject to the tools (mcp_bridge.server).
"""

import anyio.to_thread
from django.db import close_old_connections
from mcp.server.auth.provider import AccessToken
from rest_framework.authtoken.models import Token


class DrfTokenVerifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        user_id = await anyio.to_thread.run_sync(user_for_token, token)
        if user_id is None:
            return None
        return AccessToken(token=token, client_id=f"user-{user_id}", subject=str(user_id), scopes=[])


def user_for_token(key: str) -> int | None:
    close_old_connections()
    try:
        token = Token.objects.select_related("user").filter(key=key).first()
        return token.user_id if token and token.user.is_active else None
    finally:
        close_old_connections()
