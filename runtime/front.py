"""The front: every request read whole, within its time, before gunicorn sees it.

A gthread worker's thread reads its request's headers and body itself, at the
client's pace: forty sockets sending a byte a second hold every thread, and
every other user waits (slowloris). `serve` therefore listens here, in one
asyncio process (`python -m runtime.front`), and gunicorn on a Unix socket
only this process reaches. For each request the front

- reads the request line and headers within `header_timeout` seconds (past
  it a 408; a connection that sent nothing is closed), and at most
  `max_header_bytes` of them (a 431);
- refuses a body over `max_body` on its declared length, before reading it
  (a 413; the app's own limits per endpoint, smaller, are checked there);
- reads the body, sized or chunked, within `body_timeout` seconds plus one
  second a MIN_BODY_RATE bytes (past it a 408 naming what arrived), kept in
  memory up to SPOOL_BYTES and in a temporary file beyond;
- then hands gunicorn the whole request at once, with a Content-Length
  (so a chunked body reaches Django as any other), and relays the answer,
  streamed, to the client, who must take it at a pace too (`body_timeout`
  without progress ends the connection).

A slow client costs a coroutine and its buffer, never a worker's thread, and
the app's time for a request starts when the request is whole. This is what
nginx's request buffering does in front of an app server (docs/deploy.md);
h11 speaks HTTP/1.1 on both sides. Errors are the app's JSON error shape.
"""

import argparse
import asyncio
import contextlib
import json
import logging
import os
import resource
import signal
import tempfile
import time
from http import HTTPStatus

import h11

logger = logging.getLogger("runtime.front")

#: A body may take `body_timeout` seconds, and one second more for each this many bytes.
MIN_BODY_RATE = 64 * 1024
#: A body past this many bytes waits in a temporary file, not in memory.
SPOOL_BYTES = 1024 * 1024
#: How long a refused client's further bytes are read (and dropped), so that it sees the answer.
LINGER_SECONDS = 2.0
#: Bytes read from a socket at a time.
READ_BYTES = 64 * 1024
#: Request headers the front takes from the client, not passes on: hop-by-hop (RFC 9110 7.6.1),
#: and the framing it sets itself.
HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"expect",
    b"content-length",
}

#: And the answer's, which the front frames for its client itself (names as the app wrote them).
RESPONSE_HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding"}


class Refusal(Exception):
    """An answer the front gives itself: status, code and message, in the app's error shape."""

    def __init__(self, status: int, code: str, message: str, headers: tuple = ()):
        super().__init__(message)
        self.status, self.code, self.headers = status, code, headers

    def response(self) -> tuple[h11.Response, bytes]:
        body = json.dumps({"error": {"code": self.code, "message": str(self)}}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *self.headers,
        ]
        return h11.Response(status_code=self.status, headers=headers, reason=HTTPStatus(self.status).phrase), body


class Front:
    def __init__(
        self,
        upstream: str,
        *,
        header_timeout: float,
        body_timeout: float,
        keepalive: float,
        max_body: int,
        max_header_bytes: int,
        max_connections: int,
        upstream_timeout: float,
    ):
        self.upstream = upstream
        self.header_timeout, self.body_timeout, self.keepalive = header_timeout, body_timeout, keepalive
        self.max_body, self.max_header_bytes = max_body, max_header_bytes
        self.max_connections, self.upstream_timeout = max_connections, upstream_timeout
        self.open = 0

    async def client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection: its requests in turn, until it or a refusal closes it."""
        self.open += 1
        writer.transport.set_write_buffer_limits(high=SPOOL_BYTES)
        try:
            if self.open > self.max_connections:
                raise Refusal(
                    503,
                    "busy",
                    f"The server holds {self.max_connections:,} connections "
                    "(SERVE_MAX_CONNECTIONS); try again in a moment.",
                    ((b"retry-after", b"1"),),
                )
            await self.requests(reader, writer)
        except Refusal as refusal:
            await self.refuse(reader, writer, h11.Connection(h11.SERVER), refusal)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass  # the client went away, or stopped taking the answer
        except h11.ProtocolError as error:  # the app's answer could not be relayed as HTTP/1.1
            logger.warning("an answer could not be relayed: %s", error)
        finally:
            self.open -= 1
            writer.transport.abort()

    async def requests(self, reader, writer) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_header_bytes)
        peer = writer.get_extra_info("peername")
        first = True
        while True:
            try:
                request = await self.read_head(conn, reader, first)
                if request is None:
                    return
                body = await self.read_body(conn, reader, writer, request)
            except Refusal as refusal:
                await self.refuse(reader, writer, conn, refusal)
                return
            except h11.RemoteProtocolError as error:
                status = error.error_status_hint
                code = "headers_too_large" if status == 431 else "bad_request"
                await self.refuse(reader, writer, conn, Refusal(status, code, _protocol(status, error)))
                return
            with body:
                await self.relay(conn, reader, writer, request, body, peer)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
            first = False

    async def read_head(self, conn: h11.Connection, reader, first: bool) -> h11.Request | None:
        """The next request's line and headers; None when the client closed, or sent nothing in time."""
        began = time.monotonic()
        # A kept-alive connection waits `keepalive` for its next request; then its headers get their time.
        idle = self.header_timeout if first else self.keepalive
        heard = bool(conn.trailing_data[0])  # a pipelined request's first bytes
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                return event
            if isinstance(event, h11.ConnectionClosed):
                return None
            left = (began + (self.header_timeout if heard else idle)) - time.monotonic()
            data = await _read(reader, left)
            if data is None:
                if not heard:
                    return None
                raise Refusal(
                    408,
                    "request_timeout",
                    f"The request's headers did not arrive within "
                    f"{self.header_timeout:g} s (SERVE_HEADER_TIMEOUT); send them at once.",
                )
            if not heard:
                heard, began = True, time.monotonic()
            conn.receive_data(data)

    async def read_body(self, conn: h11.Connection, reader, writer, request: h11.Request):
        """The request's body, whole: a file-like object at its start."""
        declared = _header(request, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise Refusal(
                413,
                "too_large",
                f"The body is {int(declared):,} bytes, over the {self.max_body:,} "
                "any endpoint here takes; nothing was read.",
            )
        if conn.they_are_waiting_for_100_continue:
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")))
        expected = int(declared) if declared is not None and declared.isdigit() else None
        body = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        began, received = time.monotonic(), 0
        try:
            while True:
                event = conn.next_event()
                if isinstance(event, h11.Data):
                    received += len(event.data)
                    if received > self.max_body:
                        raise Refusal(
                            413, "too_large", f"The body is over the {self.max_body:,} bytes any endpoint here takes."
                        )
                    body.write(event.data)
                    continue
                if isinstance(event, h11.EndOfMessage):
                    body.seek(0)
                    return body
                if isinstance(event, h11.ConnectionClosed):
                    raise ConnectionError("the client closed before its body was whole")
                allowed = self.body_timeout + max(expected or 0, received) / MIN_BODY_RATE
                data = await _read(reader, began + allowed - time.monotonic())
                if data is None:
                    of = f" of {expected:,}" if expected is not None else ""
                    raise Refusal(
                        408,
                        "request_timeout",
                        f"The request's body did not arrive in time: "
                        f"{received:,}{of} bytes in {time.monotonic() - began:.0f} s (SERVE_BODY_TIMEOUT "
                        f"{self.body_timeout:g} s, and 1 s more a {MIN_BODY_RATE // 1024} KB); "
                        "nothing was done. Send it again from a faster connection.",
                    )
                conn.receive_data(data)
        except BaseException:
            body.close()
            raise

    async def relay(self, conn: h11.Connection, reader, writer, request: h11.Request, body, peer) -> None:
        """Send the whole request to gunicorn and its answer to the client."""
        if _header(request, b"host") is None:  # an HTTP/1.0 request may leave it out; the app needs it
            raise Refusal(400, "bad_request", "The request names no Host header; send one.")
        size = body.seek(0, os.SEEK_END)
        body.seek(0)
        forwarded = _header(request, b"x-forwarded-for")
        client = peer[0] if isinstance(peer, tuple) else "unknown"
        headers = [(n, v) for n, v in request.headers if n not in HOP_BY_HOP and n != b"x-forwarded-for"]
        headers += [
            (b"content-length", str(size).encode()),
            (b"connection", b"close"),
            (b"x-forwarded-for", (f"{forwarded}, {client}" if forwarded else client).encode()),
        ]
        up = h11.Connection(h11.CLIENT)
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.upstream, limit=READ_BYTES)
        except OSError:
            raise Refusal(
                503,
                "unavailable",
                "The app server is starting or restarting; send the request again in a few seconds.",
                ((b"retry-after", b"2"),),
            ) from None
        try:
            up_writer.write(up.send(h11.Request(method=request.method, target=request.target, headers=headers)))
            while chunk := body.read(READ_BYTES):
                up_writer.write(up.send(h11.Data(data=chunk)))
                await up_writer.drain()
            up_writer.write(up.send(h11.EndOfMessage()))
            await up_writer.drain()
            await self.answer(conn, writer, up, up_reader)
        except Refusal as refusal:
            await self.refuse(reader, writer, conn, refusal)
        finally:
            up_writer.transport.abort()

    async def answer(self, conn: h11.Connection, writer, up: h11.Connection, up_reader) -> None:
        """gunicorn's answer, relayed as it comes."""
        began = time.monotonic()
        while True:
            event = up.next_event()
            if event is h11.NEED_DATA:
                if conn.our_state is h11.SEND_RESPONSE:  # nothing sent yet: the app has its whole time
                    data = await _read(up_reader, began + self.upstream_timeout - time.monotonic())
                else:
                    data = await _read(up_reader, self.upstream_timeout)  # gunicorn's own timeout ends it first
                if data is None and conn.our_state is h11.SEND_RESPONSE:
                    raise Refusal(
                        504,
                        "timeout",
                        f"The app did not answer within {self.upstream_timeout:g} s; "
                        "send the request again, or a narrower one.",
                    )
                if data is None:
                    raise ConnectionError("the app stopped sending its answer")
                up.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                headers = [(n, v) for n, v in event.headers.raw_items() if n.lower() not in RESPONSE_HOP_BY_HOP]
                writer.write(
                    conn.send(h11.Response(status_code=event.status_code, headers=headers, reason=event.reason))
                )
            elif isinstance(event, h11.Data):
                writer.write(conn.send(h11.Data(data=event.data)))
            elif isinstance(event, h11.EndOfMessage):
                writer.write(conn.send(h11.EndOfMessage()))
                await asyncio.wait_for(writer.drain(), self.body_timeout)
                return
            elif isinstance(event, h11.ConnectionClosed):
                if conn.our_state is h11.SEND_RESPONSE:
                    raise Refusal(
                        502,
                        "bad_gateway",
                        "The app server closed the request without an answer "
                        "(it was restarted, or the request took longer than SERVE_TIMEOUT).",
                    )
                raise ConnectionError("the app ended its answer early")
            await asyncio.wait_for(writer.drain(), self.body_timeout)

    async def refuse(self, reader, writer, conn: h11.Connection, refusal: Refusal) -> None:
        """Answer `refusal` and end the connection, when an answer can still be sent."""
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        response, body = refusal.response()
        with contextlib.suppress(h11.LocalProtocolError, ConnectionError, TimeoutError):
            writer.write(conn.send(response) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
            await asyncio.wait_for(writer.drain(), 5)
            # A client still sending what was refused reads the answer only if the connection
            # is not reset under it: stop writing, and take (and drop) what it sends a while.
            writer.write_eof()
            until = time.monotonic() + LINGER_SECONDS
            while (data := await _read(reader, until - time.monotonic())) and len(data):
                pass


async def _read(reader: asyncio.StreamReader, seconds: float) -> bytes | None:
    """The next bytes (b"" at the end), or None when none came within `seconds`."""
    if seconds <= 0:
        return None
    try:
        return await asyncio.wait_for(reader.read(READ_BYTES), seconds)
    except TimeoutError:
        return None


def _header(request: h11.Request, name: bytes) -> str | None:
    values = [value.decode("latin-1") for key, value in request.headers if key == name]
    return ", ".join(values) if values else None


def _protocol(status: int, error: Exception) -> str:
    if status == 431:
        return "The request's headers are too large; send fewer or shorter ones."
    return f"The request is not valid HTTP/1.1 ({error}); send a well-formed request."


async def main(args: argparse.Namespace) -> None:
    front = Front(
        args.upstream,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        keepalive=args.keepalive,
        max_body=args.max_body,
        max_header_bytes=args.max_header_bytes,
        max_connections=args.max_connections,
        upstream_timeout=args.upstream_timeout,
    )
    host, _, port = args.listen.rpartition(":")
    server = await asyncio.start_server(
        front.client, host.strip("[]") or None, int(port), backlog=2048, limit=READ_BYTES, reuse_address=True
    )
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stopping.set)
    async with server:
        await stopping.wait()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Read each request whole, then hand it to gunicorn.")
    parser.add_argument("--listen", required=True, help="ADDR:PORT to serve")
    parser.add_argument("--upstream", required=True, help="gunicorn's Unix socket")
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--body-timeout", type=float, default=30.0)
    parser.add_argument("--keepalive", type=float, default=5.0)
    parser.add_argument("--upstream-timeout", type=float, default=90.0)
    parser.add_argument("--max-body", type=int, required=True)
    parser.add_argument("--max-header-bytes", type=int, default=80 * 1024)
    parser.add_argument("--max-connections", type=int, default=1000)
    return parser.parse_args(argv)


if __name__ == "__main__":
    logging.basicConfig(format="%(message)s", level=logging.WARNING)
    options = parse()
    # Each connection is a descriptor, and one more while its request is relayed.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 2 * options.max_connections + 64))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    asyncio.run(main(options))
