"""How long a request may wait on the database: a deadline, kept by the client.

A server that hangs (its processes stopped, its host or VM paused, a network
that drops packets) still accepts connections, or holds them, and answers
nothing. Its own statement_timeout stops with it, and a Unix socket has no
keepalive, so only the client can end the wait. `within(seconds)` sets a
deadline for the code it wraps: config.middleware sets one per request
(DATABASE_REQUEST_TIMEOUT), /readyz a shorter one, each MCP tool call its
own. While one is set:

- a new connection gets the time left, at most, as libpq's connect_timeout,
  and none is tried once the deadline has passed;
- every round trip on a connection (a statement, a fetch, a commit: psycopg's
  `Connection.wait`) ends by the deadline. Past it, the statement is cancelled
  if the server takes the cancel within CANCEL_SECONDS (a live server then
  stops the work nobody waits for), the connection is closed, and
  `Passed` raised (a psycopg.OperationalError): on every surface a 503,
  sent CANCEL_SECONDS after the deadline at worst, which says why: the
  request took longer than its time (`request_timeout`: the server took
  the cancel, or no time was left before the wait began) or the database
  is not answering (`database_unavailable`).

Outside a deadline (management commands, the workers, migrations) nothing
changes: their statements may take as long as they need.
"""

import math
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import psycopg
from django.db.backends.postgresql import base

CANCEL_SECONDS = 0.5
PASSED = "the database did not answer in the time this request may wait on it; the connection was closed"

#: (the deadline's time.monotonic(), the seconds the block was given)
_deadline: ContextVar[tuple[float, float] | None] = ContextVar("database_deadline", default=None)


class Passed(psycopg.OperationalError):
    """The deadline passed. `budget`: the seconds the request was given; `answered`: whether
    the server took the cancel (it is alive: the request's own work or a slow statement
    used up the time, search.contract's RequestOverBudget) or not (it is not answering:
    DatabaseUnavailable). Told apart by search.contract.errors.unavailable."""

    def __init__(self, budget: float, answered: bool):
        super().__init__(PASSED)
        self.request_budget, self.server_answered = budget, answered


@contextmanager
def within(seconds: float | None):
    """Wait on the database at most `seconds` from now inside this block (None
    or 0: no bound of its own), or less when an enclosing block ends sooner."""
    if not seconds:
        yield
        return
    deadline = (time.monotonic() + seconds, seconds)
    outer = _deadline.get()
    token = _deadline.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        _deadline.reset(token)


def each_within(chunks: Iterable, seconds: float | None) -> Iterator:
    """`chunks`, each made within `seconds`: a streamed response's rows are read
    after the request's own block has ended."""
    chunks = iter(chunks)
    while True:
        with within(seconds):
            try:
                chunk = next(chunks)
            except StopIteration:
                return
        yield chunk


def remaining() -> float | None:
    """Seconds left before the deadline (0 or less: passed); None: no deadline."""
    deadline = _deadline.get()
    return None if deadline is None else deadline[0] - time.monotonic()


def budget() -> float:
    """The seconds the innermost deadline's block was given (0: none)."""
    deadline = _deadline.get()
    return 0.0 if deadline is None else deadline[1]


class Connection(psycopg.Connection):
    """psycopg's connection, whose round trips end by the deadline."""

    def wait(self, gen, *args, timeout: float | None = None, **kwargs):
        left = remaining()
        if left is None:
            return super().wait(gen, *args, timeout=timeout, **kwargs)
        if left > 0:
            try:
                return super().wait(gen, *args, timeout=left if timeout is None else min(timeout, left), **kwargs)
            except psycopg.OperationalError:
                if remaining() > 0:  # the server's error, or the caller's own timeout
                    raise
        # Past the deadline the connection is closed, even with nothing sent: a
        # transaction left open would be rolled back after the request, unbounded.
        # The time went on the request's own work when none was left for this wait.
        answered = left <= 0
        try:
            self.cancel_safe(timeout=CANCEL_SECONDS)
            answered = True
        except psycopg.Error:
            pass
        self.close()
        raise Passed(budget(), answered)


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL backend, connecting and waiting within the deadline.
    The embedded server's backend (runtime.postgres) and the one for a server
    of the user's (runtime.postgres.remote, DATABASE_URL) are this one."""

    def get_connection_params(self):
        params = super().get_connection_params()
        left = remaining()
        # A pool keeps the parameters it is made with: no request's deadline in them.
        if left is not None and not self.settings_dict["OPTIONS"].get("pool"):
            configured = int(float(params.get("connect_timeout") or 0))  # 0: none
            allowed = max(math.ceil(left), 1)
            params["connect_timeout"] = allowed if configured <= 0 else min(configured, allowed)
        return params

    def get_new_connection(self, conn_params):
        left = remaining()
        if left is not None and left <= 0:  # the request's own work took the time
            raise Passed(budget(), answered=True)
        connection = super().get_new_connection(conn_params)
        # psycopg.connect() makes psycopg's own class, and Django offers no hook for
        # another: ours adds only the bound on wait() (and a pool's connection, made
        # by the pool's threads, gets it here too).
        connection.__class__ = Connection
        return connection
