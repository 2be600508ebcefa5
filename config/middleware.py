"""Middleware of the whole site."""

from django.http import JsonResponse

from backlog.db import database_unavailable
from search.contract import DatabaseUnavailable


class DatabaseUnavailableMiddleware:
    """A page or admin request that failed because the database could not be
    reached is a 503 with the API's error body and Retry-After, not a 500: the
    client may send it again once the server is back (the embedded one is
    started again by the next connection, config.postgres.embedded.revive).
    REST answers the same through api.errors, MCP through mcp_bridge.server."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not database_unavailable(exception):
            return None
        error = DatabaseUnavailable()
        return JsonResponse(error.body(), status=error.status, headers=error.headers())
