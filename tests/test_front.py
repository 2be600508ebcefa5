"""The front (runtime/front.py): slow, chunked and oversized requests, as `serve` meets them.

Each test runs the front and gunicorn as `serve` does (runtime.supervisor's
commands: gunicorn on a private Unix socket, one worker of two threads),
on the test database. Carol is on the Tramline team; she searches while
strangers hold connections open a byte at a time (slowloris), dribble a
body, send one chunked or declare one of 100 MB.
"""

import contextlib
import hashlib
import hmac
import http.client
import json
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection

from backlog.imports import import_records
from backlog.models import Product
from connectors.models import Source
from runtime.supervisor import front_command, gunicorn_command

from .conftest import TRAMLINE, api_key, jsonl
from .test_mcp import server_env
from .test_serve import free_port, wait_until_serving

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SECRET = "0f4e2a9c7b1d3e5f6a8b0c2d4e6f8a1b"
PING = json.dumps({"zen": "Design for failure.", "hook_id": 1, "repository": {"full_name": "tramline/app"}}).encode()
JUNIT = b"""<?xml version="1.0"?>
<testsuite name="renewal" tests="1" failures="1"><testcase classname="RenewalTest" name="testRenew">
<failure message="payment sheet never opened" type="java.lang.AssertionError">java.lang.AssertionError: payment sheet
    at com.tramline.renewal.RenewalTest.testRenew(RenewalTest.java:42)</failure></testcase></testsuite>"""


@pytest.fixture
def carol(db):
    assert not import_records(jsonl(*TRAMLINE).splitlines()).problems
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    user = User.objects.create_user("carol", password="a-long-passphrase")
    user.groups.add(team)
    return user


@contextlib.contextmanager
def served(settings, **env):
    """The front on a free port before gunicorn (one worker, two threads), as serve starts them."""
    settings.SERVE_WORKERS, settings.SERVE_THREADS = 1, 2
    for name, value in env.items():
        setattr(settings, name, value)
    variables = {
        **server_env(connection.settings_dict["NAME"]),
        "GITHUB_WEBHOOK_SECRET": SECRET,
        **{name: str(value) for name, value in env.items()},
    }
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="qa-front-") as private:
        upstream = Path(private) / "gunicorn.sock"
        app = subprocess.Popen(gunicorn_command(f"unix:{upstream}"), env=variables, stderr=subprocess.DEVNULL)
        front = subprocess.Popen(front_command(f"127.0.0.1:{port}", upstream), env=variables)
        try:
            wait_until_serving(front, f"http://127.0.0.1:{port}/healthz")
            yield port
        finally:
            for process in (front, app):
                process.terminate()
                process.wait(30)


def ask(port: int, method: str, path: str, body=None, headers=None, timeout=15.0) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {}, encode_chunked=not isinstance(body, bytes | None))
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def signed(body: bytes) -> dict:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": "ping", "X-Hub-Signature-256": signature, "Content-Type": "application/json"}


def dribble(port: int, head: bytes, stop: threading.Event) -> None:
    """A client sending `head` (and then a body it never finishes) a byte a second."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for byte in head + b"x" * 10_000:
            if stop.wait(0.5):
                return
            sock.sendall(bytes([byte]))


def test_strangers_sending_a_byte_a_second_leave_carols_search_answered(settings, carol):
    """40 sockets on two kinds of slowloris (headers to /healthz, a body to
    /hooks/github): gunicorn's two threads alone would all be held."""
    token = api_key(carol)
    stop = threading.Event()
    heads = [
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ",
        (b"POST /hooks/github HTTP/1.1\r\nHost: localhost\r\nX-GitHub-Event: ping\r\nContent-Length: 10000\r\n\r\n"),
    ]
    with served(settings, SERVE_HEADER_TIMEOUT=60, SERVE_BODY_TIMEOUT=60) as port:
        # The body's stranger sends its headers at once, then a byte a second.
        strangers = [
            threading.Thread(target=dribble, args=(port, heads[n % 2][: 200 if n % 2 else 20], stop)) for n in range(40)
        ]
        for stranger in strangers:
            stranger.start()
        time.sleep(2)  # all connected, each holding its request open
        try:
            answers = [
                ask(
                    port,
                    "GET",
                    "/api/search?query=renewal&mode=keyword",
                    headers={"Authorization": f"Token {token}"},
                    timeout=10,
                )
                for _ in range(5)
            ]
        finally:
            stop.set()
            for stranger in strangers:
                stranger.join(10)
    assert [status for status, _ in answers] == [200] * 5
    assert all("BUG-12" in [hit["key"] for hit in answer["results"]] for _, answer in answers)


def test_headers_or_a_body_that_do_not_arrive_in_time_are_a_408_that_names_which(settings, carol):
    with served(settings, SERVE_HEADER_TIMEOUT=1, SERVE_BODY_TIMEOUT=1) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")  # and never the blank line
            headers_late = sock.recv(4096).decode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /hooks/github HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
            began = time.monotonic()
            body_late = sock.recv(4096).decode()
            waited = time.monotonic() - began
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            quiet = sock.recv(4096)  # connected, sent nothing: closed without a word

    assert headers_late.startswith("HTTP/1.1 408") and "SERVE_HEADER_TIMEOUT" in headers_late
    assert body_late.startswith("HTTP/1.1 408") and "SERVE_BODY_TIMEOUT" in body_late
    assert "1 of 100 bytes" in body_late and "database" not in body_late
    assert waited < 8 and quiet == b""


def test_a_slow_upload_is_not_counted_against_the_databases_time(settings, carol):
    """A signed ping and a JUnit report, each taking 2 s to arrive, with a request
    allowed 1 s on the database: the upload is the front's to wait for, not the app's
    (before the front, each was a 503 "The database is not reachable")."""
    token = api_key(carol)
    Source.objects.create(
        name="Tramline GitHub",
        kind="github",
        url="https://api.github.com",
        project="tramline/app",
        product_key="PRD-1",
        token_env="TRAMLINE_GITHUB_TOKEN",
    )

    def slowly(body: bytes):
        for start in range(0, len(body), max(1, len(body) // 4)):
            time.sleep(0.5)
            yield body[start : start + max(1, len(body) // 4)]

    with served(settings, DATABASE_REQUEST_TIMEOUT=1, SERVE_BODY_TIMEOUT=10) as port:
        ping = ask(port, "POST", "/hooks/github", body=slowly(PING), headers=signed(PING))
        report = ask(
            port,
            "POST",
            "/api/runs?product=PRD-1",
            body=slowly(JUNIT),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/xml"},
        )

    assert ping == (200, {"status": "pong", "message": ping[1]["message"]}), ping
    assert report[0] == 200, report
    assert report[1]["counts"]["failed"] == 1


def test_chunked_bodies_reach_every_endpoint_whole(settings, carol):
    """`curl -T -` and most libraries stream a body without a length; Django took such
    a body for none ("The body is empty")."""
    token = api_key(carol)
    with served(settings) as port:
        report = ask(
            port,
            "POST",
            "/api/runs?product=PRD-1",
            body=iter([JUNIT[:100], JUNIT[100:]]),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/xml"},
        )
        draft = json.dumps({"title": "Renewal payment sheet never opens"}).encode()
        duplicates = ask(
            port,
            "POST",
            "/api/bugs/check-duplicates",
            body=iter([draft[:10], draft[10:]]),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )

    assert report[0] == 200 and report[1]["counts"]["failed"] == 1, report
    assert duplicates[0] == 200, duplicates
    assert "BUG-12" in [hit["key"] for hit in duplicates[1]["results"]]


def test_a_declared_100_mb_upload_is_refused_before_a_byte_of_it_is_read(settings, carol):
    token = api_key(carol)
    with served(settings) as port, socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/runs?product=PRD-1 HTTP/1.1\r\nHost: localhost\r\n"
            + f"Authorization: Token {token}\r\n".encode()
            + b"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 104857600\r\n\r\n"
        )
        answer = sock.recv(4096).decode()  # answered with nothing of the body sent

    assert answer.startswith("HTTP/1.1 413"), answer
    assert '"too_large"' in answer and "nothing was read" in answer
