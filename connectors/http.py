"""The one HTTP seam every source goes through: sessions, retries, errors, bounds.

Retries come from tenacity, with one policy for all sources: a 429, a 5xx,
GitHub's rate-limit 403 or a network error is tried again, waiting what the
server asked for (`Retry-After`, or until `X-RateLimit-Reset` when the
remaining count is 0), else an exponential back-off with jitter; never more
than `max_wait` seconds at a time and `attempts` tries in all. What cannot
succeed by trying again (401, 403, 404, 410, a 400 for bad input) is raised
at once as `UpstreamError`, with the server's own words when it sent some,
and the sync stops before writing anything it has not finished reading.

An upstream is untrusted input, so the seam also holds what a hostile or
broken one cannot change:

- Credentials go only to the configured origin (scheme, host and port).
  Redirects are never followed here; a URL the upstream hands back (a next
  link, a Location) on another origin is refused, whoever asks for it.
- Every request ends: a watchdog shuts its socket at SYNC_HTTP_DEADLINE
  (a server that sends a byte every 20 s never trips the per-byte timeout),
  or sooner when the sync's own deadline (SYNC_RUN_DEADLINE) comes first,
  and a body past SYNC_HTTP_MAX_BYTES is cut off.
- An answer that is not the JSON asked for (an HTML page, an empty redirect,
  a list where an object belongs, JSON nested past reason) is one line naming
  the host, the path and what was wrong, never a traceback.
"""

import email.utils
import json
import logging
import random
import socket
import threading
import time
import weakref
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

logger = logging.getLogger(__name__)

TIMEOUT = (10, 60)  # seconds to connect, seconds between bytes (each also within the deadline)
RETRIED_STATUSES = {429, 500, 502, 503, 504}
SECONDARY_LIMIT_WAIT = 60.0
REDIRECTS = (301, 302, 303, 307, 308)


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


def server_words(body) -> str:
    """What the server said about a failure (its body as `_body` reads it), short:
    Jira's errorMessages, GitHub's and TestRail's message or error, else the
    start of the body. Any shape."""
    if isinstance(body, str):
        return " ".join(body.split())[:300]
    if isinstance(body, dict):
        messages, errors = body.get("errorMessages"), body.get("errors")
        parts = list(messages) if isinstance(messages, list) else []
        parts += list(errors.values()) if isinstance(errors, dict) else []
        for name in ("message", "error", "detail"):
            if isinstance(body.get(name), str):
                parts.append(body[name])
        if parts:
            return "; ".join(str(part) for part in parts)[:300]
    try:
        return json.dumps(body)[:300]
    except (ValueError, RecursionError):
        return "(a body too deeply nested to show)"


def _retry_after(response: requests.Response) -> float | None:
    """Seconds the server asked us to wait, from Retry-After (seconds or an
    HTTP date) or, once the rate limit is spent, X-RateLimit-Reset (epoch
    seconds). A value that is neither (`soon`, `-5`) asks for nothing."""
    value = (response.headers.get("Retry-After") or "").strip()
    if value:
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None
        if when is not None and when.tzinfo is not None:
            return max(0.0, when.timestamp() - time.time())
    if response.headers.get("X-RateLimit-Remaining") == "0" and response.headers.get("X-RateLimit-Reset"):
        try:
            return min(max(0.0, float(response.headers["X-RateLimit-Reset"]) - time.time()) + 1, 86400.0)
        except (ValueError, OverflowError):
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


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port spelled out: credentials go to one of these."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def without_credentials(url: str) -> str:
    """The URL as it may be shown: no user or password in it."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


class _WatchedAdapter(HTTPAdapter):
    """requests' adapter, knowing every connection it opened, so that a
    watchdog can shut their sockets when a request outlives its deadline
    (timeouts in requests bound each read, not a request)."""

    def __init__(self):
        self.connections = weakref.WeakSet()
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        opened = self.connections

        def watched(pool_class):
            class Pool(pool_class):
                def _new_conn(self):
                    conn = super()._new_conn()
                    opened.add(conn)
                    return conn

            return Pool

        self.poolmanager.pool_classes_by_scheme = {
            "http": watched(HTTPConnectionPool),
            "https": watched(HTTPSConnectionPool),
        }

    def abort(self) -> None:
        for conn in list(self.connections):
            sock = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


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
    #: time.monotonic() past which no request starts or goes on (the sync's deadline); None: none.
    deadline: float | None = None

    def __post_init__(self):
        self.base_url = self.base_url.rstrip("/") + "/"
        self.origin = origin(self.base_url)
        self.attempts = self.attempts or settings.SYNC_HTTP_ATTEMPTS
        self.max_wait = self.max_wait or settings.SYNC_HTTP_MAX_WAIT
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": "qa-search-sync", "Accept": "application/json", **self.headers})
        self.adapter = _WatchedAdapter()
        self.session.mount("http://", self.adapter)
        self.session.mount("https://", self.adapter)
        if self.auth:
            self.session.auth = self.auth

    def url(self, path: str) -> str:
        """The URL of `path` (or of a URL the upstream handed back), refused
        when it leaves the configured origin: the session's credentials would go too."""
        if not path.startswith(("http://", "https://")):
            return urljoin(self.base_url, path.lstrip("/"))
        if origin(path) != self.origin:
            raise UpstreamError(
                f"{_host(self.base_url)} pointed to {_host(path)}, another host than the one configured; "
                "not followed, so the credentials stay with "
                f"{self.origin[0]}://{_host(self.base_url)} (check the --url)"
            )
        return path

    def get(self, path: str, params=None) -> requests.Response:
        return self.request("GET", path, params=params)

    def get_json(self, path: str, params=None, expect: type | tuple = dict):
        return self.json(self.get(path, params), expect)

    def json(self, response: requests.Response, expect: type | tuple | None = dict):
        """The body as JSON of the type the caller reads (dict or list), or one
        line saying what came instead: a redirect, HTML, a truncated body."""
        where = f"{_host(response.url)}{urlsplit(response.url).path}"
        if response.status_code in REDIRECTS:
            target = without_credentials(response.headers.get("Location") or "nowhere")
            raise UpstreamError(
                f"{where} answered {response.status_code}, a redirect to {target}; redirects are not followed "
                "(the credentials stay where they were configured): check the --url",
                response.status_code,
            )
        try:
            body = json.loads(response.content)
        except RecursionError:
            raise UpstreamError(f"{where} sent JSON nested too deeply to read", response.status_code) from None
        except ValueError:
            kind = (response.headers.get("Content-Type") or "no content type").split(";")[0]
            start = " ".join(response.text[:60].split())
            seen = f"{kind}, starting {start!r}" if start else f"{kind}, an empty body"
            raise UpstreamError(
                f"{where} did not answer JSON ({seen}): check the --url points at the API",
                response.status_code,
            ) from None
        if expect is not None and not isinstance(body, expect):
            wanted = " or ".join(_json_kind(kind()) for kind in (expect if isinstance(expect, tuple) else (expect,)))
            raise UpstreamError(f"{where} sent {_json_kind(body)} where {wanted} was expected", response.status_code)
        return body

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

    def _budget(self, url: str) -> float:
        """Seconds the next try may take: the request's deadline, or what is left of the sync's."""
        budget = settings.SYNC_HTTP_DEADLINE
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise UpstreamError(
                    f"the sync ran out of time before asking {_host(url)} again (SYNC_RUN_DEADLINE, "
                    f"{settings.SYNC_RUN_DEADLINE:.0f} s)"
                )
            budget = min(budget, left)
        return budget

    def _once(self, method: str, url: str, **kwargs) -> requests.Response:
        budget = self._budget(url)
        self.requests_made += 1
        fired = threading.Event()

        def expire():
            fired.set()
            self.adapter.abort()

        watchdog = threading.Timer(budget, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            timeout = (min(TIMEOUT[0], budget), min(TIMEOUT[1], budget))
            response = self.session.request(method, url, timeout=timeout, allow_redirects=False, stream=True, **kwargs)
            response._content = self._read(response, url)
        except requests.RequestException as exc:
            if not fired.is_set():
                if isinstance(exc, requests.Timeout):
                    raise _Retryable(f"{_host(url)} did not answer within {timeout[1]:.0f} s") from None
                raise _Retryable(f"{_host(url)} could not be reached ({_reason(exc)})") from None
        finally:
            watchdog.cancel()
        if fired.is_set():  # the socket was shut under it: whatever was read is not the whole answer
            raise UpstreamError(
                f"{_host(url)}{urlsplit(url).path} sent no whole answer within {budget:.0f} s "
                "(SYNC_HTTP_DEADLINE, or what was left of the sync's SYNC_RUN_DEADLINE); sync again later"
            )
        status = response.status_code
        if status in RETRIED_STATUSES or status in self.also_retried or _rate_limited(response):
            what = "rate limit reached" if status in (403, 429) else f"server busy ({status})"
            raise _Retryable(f"{_host(url)}: {what}", _retry_after(response), response)
        if status >= 400:
            where = without_credentials(url)
            body = _body(response)
            raise UpstreamError(f"{status} from {where}: {server_words(body)}", status, body)
        return response

    @staticmethod
    def _read(response: requests.Response, url: str) -> bytes:
        """The whole body, refused past SYNC_HTTP_MAX_BYTES (a listing never needs that much)."""
        limit = settings.SYNC_HTTP_MAX_BYTES
        chunks, size = [], 0
        try:
            for chunk in response.iter_content(64 * 1024):
                size += len(chunk)
                if size > limit:
                    raise UpstreamError(
                        f"{_host(url)}{urlsplit(url).path} sent more than {limit:,} bytes in one answer "
                        "(SYNC_HTTP_MAX_BYTES); not read"
                    )
                chunks.append(chunk)
        finally:
            response.close()
        return b"".join(chunks)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception()
        asked = getattr(exc, "wait", None)
        if asked is not None:
            wait = min(asked + random.uniform(0, 0.25), self.max_wait)
        else:
            wait = min(0.5 * 2 ** (state.attempt_number - 1) + random.uniform(0, 0.5), self.max_wait)
        if self.deadline is not None:  # a wait past the sync's deadline only to fail then: fail now
            wait = max(0.0, min(wait, self.deadline - time.monotonic()))
        return wait

    def _log_retry(self, state: RetryCallState) -> None:
        logger.warning("%s; try %d of %d", state.outcome.exception(), state.attempt_number + 1, self.attempts)


def _json_kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), "a " + type(value).__name__)


def _host(url: str) -> str:
    return without_credentials(url).split("/")[2] if "://" in url else url


def _reason(exc: Exception) -> str:
    text = str(exc)
    for known in ("Connection refused", "Name or service not known", "Connection reset", "timed out"):
        if known in text:
            return known.lower()
    if isinstance(exc, requests.exceptions.ChunkedEncodingError) or "IncompleteRead" in text:
        return "the connection closed in the middle of an answer"
    return "connection failed"


def _body(response: requests.Response):
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):
        return response.text[:1000]


def next_link(response: requests.Response) -> str | None:
    """The URL of rel="next" in a Link header (GitHub's paging), if any."""
    try:
        return response.links.get("next", {}).get("url")
    except (ValueError, AttributeError):
        return None
