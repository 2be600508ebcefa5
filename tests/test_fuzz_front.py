"""Fuzzing the front (runtime/front.py) and the reports behind it: framing, pace and depth.

The front and gunicorn run as `serve` runs them (tests/test_front.py's
`served`, the headers' and body's timeouts cut to a second). Hypothesis
sends what a careless or hostile client does: bodies chunked at any sizes
(chunk extensions too) or with a length, lengths that lie (shorter than the
body, longer and then nothing), pauses between any two pieces, shorter and
longer than the timeouts, to the endpoints that take a body; and JUnit
reports whose suites nest at any depth. Every connection is answered, or
closed, in bounded time, never with a 5xx or a traceback; a request that
arrived whole in time is answered as it would be sent at once.
"""

import contextlib
import json
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import api_key
from .fuzzing import EXAMPLES, leak, tally
from .test_front import JUNIT, carol, served  # noqa: F401  (carol: a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TIMEOUT = 1.0  # SERVE_HEADER_TIMEOUT and SERVE_BODY_TIMEOUT, for these runs
# Every wait of the front is bounded: headers, body (and its per-64 KB allowance), the linger.
ANSWERED_WITHIN = TIMEOUT * 2 + 2.0 + 5.0
# A fifteenth of the budget: each example is a real connection, some of them slow on purpose.
NETWORK = settings(
    max_examples=max(EXAMPLES // 15, 8),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)

ENDPOINTS = [
    ("/hooks/github", {"X-GitHub-Event": "ping", "Content-Type": "application/json"}, b'{"zen": "x"}'),
    ("/api/runs?product=PRD-1", {"Content-Type": "application/xml"}, JUNIT),
    ("/api/bugs/check-duplicates", {"Content-Type": "application/json"}, b'{"title": "renewal sheet"}'),
    ("/api/import", {"Content-Type": "application/x-ndjson"}, b'{"kind": "bug", "key": "BUG-777"}\n'),
]


def chunked(body: bytes, sizes: list[int], extension: bool) -> list[bytes]:
    """`body` in HTTP/1.1 chunks of `sizes` (the rest in one), ending with the last chunk."""
    pieces, at = [], 0
    for size in [*sizes, len(body)]:
        piece = body[at : at + size]
        at += len(piece)
        if piece:
            ext = b";x=y" if extension else b""
            pieces.append(b"%x%s\r\n%s\r\n" % (len(piece), ext, piece))
        if at >= len(body):
            break
    return [*pieces, b"0\r\n\r\n"]


REQUESTS = st.fixed_dictionaries(
    {
        "endpoint": st.sampled_from(range(len(ENDPOINTS))),
        "framing": st.sampled_from(["length", "chunked", "short length", "long length"]),
        "sizes": st.lists(st.integers(1, 40), max_size=6),
        "extension": st.booleans(),
        "pauses": st.lists(st.sampled_from([0.0, 0.0, 0.05, 0.3, TIMEOUT * 1.5]), max_size=4),
    }
)


def pieces_of(request: dict, token: str) -> tuple[list[bytes], bool]:
    """The request's bytes in the pieces they are sent in, and whether it is whole and valid."""
    path, headers, body = ENDPOINTS[request["endpoint"]]
    head = f"POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Token {token}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    framing = request["framing"]
    if framing == "chunked":
        head += "Transfer-Encoding: chunked\r\n\r\n"
        return [head.encode(), *chunked(body, request["sizes"], request["extension"])], True
    declared = {"length": len(body), "short length": max(len(body) // 2, 1), "long length": len(body) + 100}[framing]
    head += f"Content-Length: {declared}\r\nConnection: close\r\n\r\n"
    cut = [body[:5], body[5:]] if request["sizes"] else [body]
    return [head.encode(), *cut], framing == "length"


def send(port: int, pieces: list[bytes], pauses: list[float]) -> tuple[bytes, float]:
    """Send `pieces` with `pauses` between them; what came back and how long it took."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWERED_WITHIN) as sock:
        for n, piece in enumerate(pieces):
            if n and n - 1 < len(pauses):
                time.sleep(pauses[n - 1])
            with contextlib.suppress(OSError):  # refused mid-way: the answer is read below
                sock.sendall(piece)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
                if b"\r\n\r\n" in answer and _whole(answer):
                    break
    return answer, time.monotonic() - began


def _whole(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def test_any_framing_and_pace_of_a_body_is_answered_in_bounded_time_and_never_5xx(settings, carol):  # noqa: F811
    token = api_key(carol)
    with served(settings, SERVE_HEADER_TIMEOUT=TIMEOUT, SERVE_BODY_TIMEOUT=TIMEOUT) as port:

        @NETWORK
        @given(request=REQUESTS)
        def check(request):
            pieces, valid = pieces_of(request, token)
            paused = sum(request["pauses"][: len(pieces) - 1])
            in_time = paused < TIMEOUT / 2  # past it, a 408 or an answer may both be right
            answer, took = send(port, pieces, request["pauses"])
            status, text = status_of(answer), answer.decode("utf-8", "replace")
            tally("front", server_error=status >= 500, body=text)
            assert took < ANSWERED_WITHIN, (request, took)
            assert status < 500 and not leak(text), (request, text[:600])
            if valid and in_time:  # whole and in time: answered as it would be sent at once
                assert status in (200, 201, 202, 400, 401, 403), (request, text[:600])
                assert b"The body is empty" not in answer
            if request["framing"] == "long length" and in_time:
                assert status == 408 and b"SERVE_BODY_TIMEOUT" in answer, (request, text[:600])

        check()


DEPTHS = st.lists(st.sampled_from(["testsuite", "testsuites"]), max_size=50).map(lambda tags: tags * 60)


@settings(max_examples=max(EXAMPLES // 10, 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(tags=DEPTHS, cases_at=st.sets(st.integers(0, 3000), max_size=5))
def test_reports_nested_to_any_depth_are_read_or_refused_clearly_on_rest(carol, tags, cases_at):  # noqa: F811
    from rest_framework.test import APIClient

    case = '<testcase classname="c.T" name="t{}"><failure type="java.lang.AssertionError">boom</failure></testcase>'
    opened = "".join(f'<{tag} name="s{n}">' + (case.format(n) if n in cases_at else "") for n, tag in enumerate(tags))
    report = (opened + "".join(f"</{tag}>" for tag in reversed(tags))) or "<testsuite/>"
    rest = APIClient()
    rest.force_authenticate(carol)

    answer = rest.post("/api/runs?product=PRD-1", report.encode(), content_type="application/xml")

    tally("triage", server_error=answer.status_code >= 500, body=answer.content.decode())
    assert answer.status_code in (200, 400), answer.content[:600]
    if answer.status_code == 200:
        expected = len({n for n in cases_at if n < len(tags)})
        assert answer.json()["counts"]["failed"] == expected
    else:
        assert answer.json()["error"]["code"] == "invalid_junit" and not leak(json.dumps(answer.json()))
