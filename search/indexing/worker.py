"""Keep the embedding worker running beside the server.

`serve` runs `manage.py embed --watch` as a child process. A worker can die:
the database restarts under it, the model cannot load, the machine runs out
of memory. The supervisor starts it again after a back-off that doubles from
BACKOFF_FIRST to BACKOFF_MAX seconds while it keeps dying, and starts again
from the first once a run has lasted STABLE_AFTER seconds. It records what it
sees in the `search_worker` row (search.models.Worker): state, restarts, the
last error (the tail of the worker's stderr) and a heartbeat, which index
health and the dashboard show from any process. Each line a worker writes to
its stderr (its warnings and errors: a scheduled sync that failed is one) is
logged as it comes, under the worker's name, so it reaches the service's log
and not only its row.

The worker runs at a lower CPU priority (WORKER_NICENESS): it
embeds on every core (EMBEDDING_THREADS), and a request should not wait
for a backlog. `rounds` is the loop of the commands it supervises that
wait for work (`hooks --watch`, `writeback --watch`).
"""

import collections
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from search.models import Worker, WorkerState

logger = logging.getLogger(__name__)

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
STABLE_AFTER = 60.0
HEARTBEAT_SECONDS = 10.0
STDERR_LINES = 20
#: Added to the embedding worker's niceness (0-19): requests come first.
WORKER_NICENESS = 10


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child about to run (Popen's preexec_fn): on Linux, the kernel sends
    it SIGTERM when the process that started it dies, even by SIGKILL, so a
    killed `serve` leaves no server or worker behind. Elsewhere nothing."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    def __init__(
        self,
        name: str,
        command: list[str],
        backoff_first: float = BACKOFF_FIRST,
        niceness: int = 0,
        env: dict[str, str] | None = None,
    ):
        """``niceness`` is added to the child's (os.nice): a positive one gives it less of a busy CPU.
        ``env``: variables set for the child on top of this process's environment."""
        self.name = name
        self.command = command
        self.env = env
        self.backoff_first = backoff_first
        self.niceness = niceness
        self.restarts = 0
        self.process: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"supervise-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30) -> None:
        """Stop the worker (SIGTERM: it stores the batch in hand) and stop supervising it."""
        self._stopping.set()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
        self._thread.join(timeout)

    def _run(self) -> None:
        delay = self.backoff_first
        try:
            while not self._stopping.is_set():
                began = time.monotonic()
                returncode, stderr = self._run_once()
                if self._stopping.is_set():
                    break
                self.restarts += 1
                delay = self.backoff_first if time.monotonic() - began >= STABLE_AFTER else delay
                error = f"exited with status {returncode}" + (f": {stderr}" if stderr else "")
                logger.warning("%s worker %s; starting it again in %.0f s", self.name, error, delay)
                self._record(WorkerState.RESTARTING, pid=None, last_error=error, last_error_at=timezone.now())
                self._stopping.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            self._record(WorkerState.STOPPED, pid=None)
        finally:
            connection.close()  # this thread's own connection

    def _run_once(self) -> tuple[int, str]:
        """Run the worker until it exits; its exit status and the tail of its stderr."""
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **self.env} if self.env else None,
            preexec_fn=self._prepare_child,
        )
        tail = collections.deque(maxlen=STDERR_LINES)
        reader = threading.Thread(target=self._read_stderr, args=(self.process.stderr, tail), daemon=True)
        reader.start()
        self._record(WorkerState.RUNNING, pid=self.process.pid, started_at=timezone.now())
        while True:
            try:
                returncode = self.process.wait(HEARTBEAT_SECONDS)
                break
            except subprocess.TimeoutExpired:
                self._record(WorkerState.RUNNING, pid=self.process.pid)
        reader.join(5)
        lines = [line.strip() for line in tail if line.strip()]
        return returncode, " | ".join(lines[-3:])[-500:]

    def _read_stderr(self, stream, tail: collections.deque) -> None:
        for line in stream:
            tail.append(line)
            if line.strip():
                logger.warning("%s: %s", self.name, line.rstrip())

    def _prepare_child(self) -> None:
        die_with_parent()
        if self.niceness:
            os.nice(self.niceness)

    def _record(self, state: str, **fields) -> None:
        """Write the worker's row; a database that is down only delays it to the next heartbeat."""
        close_old_connections()
        try:
            Worker.objects.update_or_create(
                name=self.name,
                defaults={
                    "state": state,
                    "host": socket.gethostname(),
                    "heartbeat_at": timezone.now(),
                    "restarts": self.restarts,
                    **fields,
                },
            )
        except DatabaseError:
            logger.warning("could not record the %s worker's state", self.name, exc_info=True)


# -- a long-lived command's loop: `hooks --watch`, `writeback --watch` ----------------------------
#: After a database failure, the next round comes this much later (the database restarting).
PAUSE_SECONDS = 5.0


def rounds(work: Callable[[], int], idle_seconds: float, paused: str, stderr) -> None:
    """Run `work` until SIGTERM or Ctrl-C: the next round at once while it did something
    (its count), after `idle_seconds` when it did nothing, after PAUSE_SECONDS when the
    database failed (a line on stderr starting with `paused`, which serve logs)."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        while True:
            try:
                wait = 0.0 if work() else idle_seconds
            except DatabaseError as exc:  # the database restarting: look again in a moment
                stderr.write(f"{paused}, the database failed: {exc.__class__.__name__}")
                close_old_connections()
                wait = PAUSE_SECONDS
            if wait:
                time.sleep(wait)
    except KeyboardInterrupt:
        pass
