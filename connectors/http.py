"""The one HTTP seam every source goes through: sessions, retries, errors.

Retries come from tenacity, with one policy for all sources: a 429, a 5xx,
GitHub's rate-limit 403 or a network error is tried again, waiting what the
server asked for (`Retry-After`, or until `X-RateLimit-Reset` when the
remaining count is 0), else an exponential back-off with jitter; never more
than `max_wait` seconds at a time and `attempts` tries in all. What cannot
succeed by trying again (401, 403, 404, 410, a 400 for bad input) is raised
at once as `UpstreamError`, with the server's own words when it sent some,
and the sync stops before writing anything it has not finished reading.
"""

import email.utils
import json
import logging
import random
import time
from dataclasses import dataclass, field
from urllib.parse import urljoin

import requests
from django.conf import settings
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

logger = logging.getLogger(__name__)

TIMEOUT = (10, 60)  # seconds to connect, seconds between bytes
RETRIED_STATUSES = {429, 500, 502, 503, 504}
SECONDARY_LIMIT_WAIT = 60.0


class UpstreamError(Exception):
    """A request that failed for good: the message says what and what to do."""

    def __init__(self, message: str, status: int | None = None, body: object = None):
        super().__init__(message)
        self.status = status
        self.body = body


class _Retryable(Exception):
    def __init__(self, message: str, wait: float | None = None, response: requests.Response | None = None):
        super().__init__(message)
        self.wait = wait
        self.response = response


def server_words(response: requests.Response) -> str:
    """What the server said about a failure, short: Jira's errorMessages, GitHub's
    and TestRail's message or error, else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return " ".join(response.text.split())[:300]
    if isinstance(body, dict):
        parts = [*body.get("errorMessages", []), *(body.get("errors") or {}).values()]
        for name in ("message", "error", "detail"):
            if isinstance(body.get(name), str):
                parts.append(body[name])
        if parts:
            return "; ".join(str(part) for part in parts)[:300]
    return json.dumps(body)[:300]


def _retry_after(response: requests.Response) -> float | None:
    """Seconds the server asked us to wait, from Retry-After (seconds or an
    HTTP date) or, once the rate limit is spent, X-RateLimit-Reset (epoch seconds)."""
    value = response.headers.get("Retry-After")
    if value:
        if value.strip().isdigit():
            return float(value)
        when = email.utils.parsedate_to_datetime(value)
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    if response.headers.get("X-RateLimit-Remaining") == "0" and response.headers.get("X-RateLimit-Reset"):
        try:
            return max(0.0, float(response.headers["X-RateLimit-Reset"]) - time.time()) + 1
        except ValueError:
            return None
    if response.status_code in (403, 429) and "secondary rate limit" in response.text.lower():
        return SECONDARY_LIMIT_WAIT  # GitHub: "wait at least one minute" when it names no time
    return None


def _rate_limited(response: requests.Response) -> bool:
    """GitHub answers a spent rate limit, primary or secondary, with 403 (or 429)."""
    if response.status_code == 429:
        return True
    if response.status_code != 403:
        return False
    return (
        response.headers.get("X-RateLimit-Remaining") == "0"
        or "Retry-After" in response.headers
        or "rate limit" in response.text.lower()
    )


@dataclass
class Client:
    """A session on one API base URL, counting the requests it makes."""

    base_url: str
    headers: dict = field(default_factory=dict)
    auth: tuple[str, str] | None = None
    attempts: int = 0  # 0: settings.SYNC_HTTP_ATTEMPTS
    max_wait: float = 0  # 0: settings.SYNC_HTTP_MAX_WAIT
    also_retried: frozenset[int] = frozenset()  # a vendor's own "come back later" statuses
    requests_made: int = 0

    def __post_init__(self):
        self.base_url = self.base_url.rstrip("/") + "/"
        self.attempts = self.attempts or settings.SYNC_HTTP_ATTEMPTS
        self.max_wait = self.max_wait or settings.SYNC_HTTP_MAX_WAIT
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": "qa-search-sync", "Accept": "application/json", **self.headers})
        if self.auth:
            self.session.auth = self.auth

    def url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else urljoin(self.base_url, path.lstrip("/"))

    def get(self, path: str, params=None) -> requests.Response:
        return self.request("GET", path, params=params)

    def get_json(self, path: str, params=None):
        return self.get(path, params).json()

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        """The response of a request that succeeded (2xx or 3xx when not
        followed), after retries; UpstreamError otherwise."""
        url = self.url(path)
        retrying = Retrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, _Retryable)),
            stop=stop_after_attempt(self.attempts),
            wait=self._wait,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            return retrying(self._once, method, url, **kwargs)
        except _Retryable as exc:
            raise UpstreamError(
                f"{exc} ({self.attempts} tries); sync again later",
                status=exc.response.status_code if exc.response is not None else None,
            ) from None

    def _once(self, method: str, url: str, **kwargs) -> requests.Response:
        self.requests_made += 1
        try:
            response = self.session.request(method, url, timeout=TIMEOUT, allow_redirects=False, **kwargs)
        except requests.ConnectionError as exc:
            raise _Retryable(f"{_host(url)} could not be reached ({_reason(exc)})") from None
        except requests.Timeout:
            raise _Retryable(f"{_host(url)} did not answer within {TIMEOUT[1]} s") from None
        status = response.status_code
        if status in RETRIED_STATUSES or status in self.also_retried or _rate_limited(response):
            what = "rate limit reached" if status in (403, 429) else f"server busy ({status})"
            raise _Retryable(f"{_host(url)}: {what}", _retry_after(response), response)
        if status >= 400:
            raise UpstreamError(f"{status} from {url}: {server_words(response)}", status, _body(response))
        return response

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception()
        asked = getattr(exc, "wait", None)
        if asked is not None:
            return min(asked + random.uniform(0, 0.25), self.max_wait)
        return min(0.5 * 2 ** (state.attempt_number - 1) + random.uniform(0, 0.5), self.max_wait)

    def _log_retry(self, state: RetryCallState) -> None:
        logger.warning("%s; try %d of %d", state.outcome.exception(), state.attempt_number + 1, self.attempts)


def _host(url: str) -> str:
    return url.split("/")[2] if "://" in url else url


def _reason(exc: Exception) -> str:
    text = str(exc)
    for known in ("Connection refused", "Name or service not known", "Connection reset", "timed out"):
        if known in text:
            return known.lower()
    return "connection failed"


def _body(response: requests.Response):
    try:
        return response.json()
    except ValueError:
        return response.text[:1000]


def next_link(response: requests.Response) -> str | None:
    """The URL of rel="next" in a Link header (GitHub's paging), if any."""
    return response.links.get("next", {}).get("url")
