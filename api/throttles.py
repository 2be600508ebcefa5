"""A rate limit per user (so per token) on the search operations.

SEARCH_RATE_LIMIT ("600/min" by default; "off" for none) is read on every
request, so it can be changed without a restart of the code that reads it.
The counts live in Django's default cache, a table of the database
(config/settings.py CACHES): every worker process and every app server
counts against the same budget. A caller over it gets a 429 with
Retry-After and the API's error body (api/errors.py). MCP's tools count
against the same budget (`within_search_rate`, mcp_bridge.server).
"""

from types import SimpleNamespace

from django.conf import settings
from rest_framework.throttling import UserRateThrottle

from search.contract import SearchError


class RateLimited(SearchError):
    status = 429
    code = "throttled"


class SearchRateThrottle(UserRateThrottle):
    scope = "search"

    def get_rate(self):
        rate = settings.SEARCH_RATE_LIMIT
        return None if not rate or rate == "off" else rate

    def allow_request(self, request, view):
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)


def too_many(wait: float | None) -> str:
    """What a caller over the limit is told, on every surface."""
    again = f" Try again in {wait:.0f} s." if wait is not None else ""
    return f"Too many searches: {settings.SEARCH_RATE_LIMIT} per user (SEARCH_RATE_LIMIT).{again}"


def within_search_rate(user) -> None:
    """Count one search of `user` (None: the operator, never limited);
    RateLimited, saying when to ask again, past SEARCH_RATE_LIMIT."""
    if user is None:
        return
    throttle = SearchRateThrottle()
    if not throttle.allow_request(SimpleNamespace(user=user), None):
        raise RateLimited(too_many(throttle.wait()))
