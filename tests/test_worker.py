"""The supervisor of serve's embedding worker (search/indexing/worker.py), with real child processes."""

import logging
import os
import sys
import time

import pytest
from django.db import connection

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


@pytest.mark.django_db(transaction=True)
def test_a_scheduled_sync_that_fails_is_one_line_in_the_services_log(monkeypatch, caplog):
    """Tramline's Jira source names a token variable nobody set. serve's sync
    worker fails it on schedule; serve's log says so, in one line (the worker's
    output used to go nowhere but its row)."""
    from connectors.models import Source
    from runtime.supervisor import helpers

    from .test_mcp import server_env

    for name, value in server_env(connection.settings_dict["NAME"]).items():
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)  # the worker inherits it: the test database
    monkeypatch.delenv("TRAMLINE_JIRA_TOKEN", raising=False)
    jira = {"kind": "jira", "url": "https://tramline.example", "project": "TRAM"}
    Source.objects.create(name="Tramline Jira", token_env="TRAMLINE_JIRA_TOKEN", **jira)
    caplog.set_level(logging.WARNING)
    (syncer,) = [s for s in helpers("127.0.0.1:0", embed=False, mcp_port=0) if s.name == "connector-sync"]
    syncer.start()
    try:
        deadline = time.monotonic() + 60
        while not any("Tramline Jira" in record.getMessage() for record in caplog.records):
            assert time.monotonic() < deadline, "nothing was logged"
            time.sleep(0.2)
        time.sleep(1)  # anything more the failure would add
    finally:
        syncer.stop()

    said = [record.getMessage() for record in caplog.records if record.name == "search.indexing.worker"]
    assert said == [
        "connector-sync: Tramline Jira: TRAMLINE_JIRA_TOKEN is not set: put the Jira API token in that environment "
        "variable (docs/connectors.md says which token and scopes)"
    ]
