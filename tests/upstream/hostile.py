"""Upstreams that lie, loop and stall, for the connectors' hostile tests.

- `Sink`: another host, which records what reaches it (a token must not).
- `Stalling`: a raw socket server that answers the way a slowloris does, a
  byte every `interval` seconds, or that cuts the body short and closes.
"""

import socket
import threading
import time

from .server import Request, Response, Upstream


class Sink(Upstream):
    """Another origin, answering every request with `body`; what it got stays in `requests`."""

    def __init__(self, body=None):
        super().__init__()
        self.body = body if body is not None else {"full_name": "sink", "description": "sink got a request"}

    def handle(self, request: Request) -> Response:
        return Response(200, self.body)

    def credentials_seen(self) -> list[str]:
        return [r.headers["authorization"] for r in self.requests if "authorization" in r.headers]


class Stalling:
    """An HTTP server on loopback that never finishes an answer in time.

    `mode="trickle"`: a 200 with a JSON body sent one byte every `interval`
    seconds, the status line first (so no read ever waits long enough to
    time out). `mode="cut"`: headers promising a long body, a piece of it,
    then the connection closed."""

    def __init__(self, mode: str = "trickle", interval: float = 0.5):
        self.mode, self.interval = mode, interval
        self.connections = 0
        self.stopped = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def start(self) -> "Stalling":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.sock.close()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        body = b'{"issues": [], "isLast": true, "name": "' + b"x" * 400 + b'"}'
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        try:
            conn.recv(65536)
            if self.mode == "cut":
                conn.sendall(head + b"Content-Length: %d\r\n\r\n" % (len(body) * 10) + body[:50])
                return
            for byte in head + b"Content-Length: %d\r\n\r\n" % len(body) + body:
                if self.stopped.is_set():
                    return
                conn.sendall(bytes([byte]))
                time.sleep(self.interval)
        except OSError:
            pass
        finally:
            conn.close()
