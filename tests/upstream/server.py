"""The loopback server every fake vendor API runs on."""

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# How often serve_forever looks for shutdown(): its default, half a second,
# is what every stop() would wait.
POLL_SECONDS = 0.02


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    at: float = 0.0  # time.monotonic() when it arrived

    def json(self):
        return json.loads(self.body or b"null")

    def basic_auth(self) -> tuple[str, str] | None:
        value = self.headers.get("authorization", "")
        if not value.lower().startswith("basic "):
            return None
        user, _, password = base64.b64decode(value[6:]).decode().partition(":")
        return user, password

    def bearer(self) -> str | None:
        value = self.headers.get("authorization", "")
        for scheme in ("bearer ", "token "):
            if value.lower().startswith(scheme):
                return value[len(scheme) :]
        return None


@dataclass
class Response:
    status: int = 200
    body: object = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Fault:
    response: Response
    times: int
    path: str | None = None  # only requests whose path starts with this


class Upstream:
    """Subclasses answer `handle(request) -> Response`."""

    def __init__(self):
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.answers_left: int | None = None  # die after this many more answers
        self.clock = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(POLL_SECONDS,), daemon=True)

    # -- the test's controls ---------------------------------------------------------------

    def start(self) -> "Upstream":
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        if self._thread.is_alive():
            self.httpd.shutdown()
        self.httpd.server_close()

    def revive(self) -> None:
        """Listen again on the same port, after `die_after` (a site back from an outage)."""
        port = self.httpd.server_address[1]
        self.stop()
        self.answers_left = None
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(POLL_SECONDS,), daemon=True)
        self._thread.start()

    def fail(self, status: int, *, times: int = 1, body=None, headers=None, path: str | None = None) -> None:
        """Answer the next `times` requests (to `path`...) with this instead."""
        self.faults.append(Fault(Response(status, body, headers or {}), times, path))

    def die_after(self, answers: int) -> None:
        """Answer `answers` more requests, then stop listening (connections refused)."""
        self.answers_left = answers

    def tick(self, minutes: float = 1) -> datetime:
        """Move the clock on; the time an edit made now is stamped with."""
        self.clock += timedelta(minutes=minutes)
        return self.clock

    def paths(self, prefix: str = "") -> list[str]:
        return [r.path for r in self.requests if r.path.startswith(prefix)]

    # -- serving -------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        raise NotImplementedError

    def _answer(self, request: Request) -> Response | None:
        with self._lock:
            if self.answers_left is not None:
                if self.answers_left <= 0:
                    return None
                self.answers_left -= 1
            self.requests.append(request)
            for fault in self.faults:
                if fault.times > 0 and (fault.path is None or request.path.startswith(fault.path)):
                    fault.times -= 1
                    return fault.response
        return self.handle(request)


def _handler(upstream: Upstream):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _serve(self):
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            request = Request(
                self.command,
                parts.path,
                {name: values[-1] for name, values in parse_qs(parts.query, keep_blank_values=True).items()},
                {name.lower(): value for name, value in self.headers.items()},
                self.rfile.read(length) if length else b"",
                time.monotonic(),
            )
            # TestRail puts its route in the query string: index.php?/api/v2/get_cases/1&limit=250
            if parts.path.endswith("index.php") and parts.query.startswith("/"):
                route, _, rest = parts.query.partition("&")
                request.path = route
                request.query = {n: v[-1] for n, v in parse_qs(rest, keep_blank_values=True).items()}
            response = upstream._answer(request)
            if response is None:  # dead: drop the connection and stop listening
                self.close_connection = True
                threading.Thread(target=upstream.httpd.shutdown, daemon=True).start()
                upstream.httpd.socket.close()
                self.connection.close()
                return
            body = response.body
            if isinstance(body, (dict, list)):
                data, kind = json.dumps(body).encode(), "application/json"
            elif isinstance(body, bytes):
                data, kind = body, "application/octet-stream"
            else:
                # surrogatepass: a hostile test's text may hold lone surrogates, sent as the bytes they make
                data, kind = (body or "").encode("utf-8", "surrogatepass"), "text/plain; charset=utf-8"
            self.send_response(response.status)
            headers = {"Content-Type": kind, **response.headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
