"""The supervisor of serve's embedding worker (search/indexing/worker.py), with real child processes."""

import os
import sys
import time

import pytest

from search.indexing.worker import WORKER_NICENESS, Supervisor
from search.models import Worker, WorkerState


@pytest.mark.django_db(transaction=True)  # the supervisor writes its row from a thread of its own
def test_the_worker_runs_at_a_lower_priority_and_its_error_is_recorded():
    """The child says its niceness on stderr and exits; the supervisor records that as the last error."""
    says_its_niceness = [sys.executable, "-c", "import os, sys; sys.exit(f'niceness {os.nice(0)}')"]
    supervisor = Supervisor("nice-test", says_its_niceness, backoff_first=30, niceness=WORKER_NICENESS)
    supervisor.start()
    try:
        deadline = time.monotonic() + 30
        while not Worker.objects.filter(name="nice-test", state=WorkerState.RESTARTING).exists():
            assert time.monotonic() < deadline, "the supervisor recorded no exit"
            time.sleep(0.1)
    finally:
        supervisor.stop()
    worker = Worker.objects.get(name="nice-test")
    assert worker.last_error == f"exited with status 1: niceness {min(19, os.nice(0) + WORKER_NICENESS)}"
    assert worker.state == WorkerState.STOPPED
