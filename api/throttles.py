"""The search budget (search.ratelimit) as DRF's throttle, for the views'
`throttle_classes`: each request charges one search to its user.

Over budget, the RateLimited it raises goes up as it is, rather than DRF's
way (False, then DRF's own Throttled): api/errors.py answers it like any
SearchError, with the words and the Retry-After MCP's tools give too.
"""

from rest_framework.throttling import BaseThrottle

from search import ratelimit


class SearchRateThrottle(BaseThrottle):
    def allow_request(self, request, view):
        ratelimit.charge(request.user)
        return True
