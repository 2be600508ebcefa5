"""A rate limit per user (so per token) on the search operations.

SEARCH_RATE_LIMIT ("600/min" by default; "off" for none) is read on every
request, so it can be changed without a restart of the code that reads it.
The counts live in Django's default cache, a table of the database
(config/settings.py CACHES): every worker process and every app server
counts against the same budget. A caller over it gets a 429 with
Retry-After and the API's error body (api/errors.py).
"""

from django.conf import settings
from rest_framework.throttling import UserRateThrottle


class SearchRateThrottle(UserRateThrottle):
    scope = "search"

    def get_rate(self):
        rate = settings.SEARCH_RATE_LIMIT
        return None if not rate or rate == "off" else rate

    def allow_request(self, request, view):
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)
