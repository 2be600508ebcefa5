"""Read replicas, on a real streaming standby.

The story: a primary and its hot standby, run with the embedded
PostgreSQL's own programs, as its system user, on sockets in a folder of
this module's. The primary holds a copy of the test database Django made
(pg_dump); the standby is a base backup of it (pg_basebackup -R) that
streams its WAL. Tramline's records are imported on the primary and
replayed on the standby; searches and record reads through search.service
(and over REST) run there, on the standby's own GIN and HNSW indexes,
while a request that writes reads from the primary. Then the standby stops
replaying: a bug written meanwhile is missing there, so the lag guard
sends the search to the primary, which has it; once replay resumes, the
standby serves again.

These tests commit (a standby sees nothing uncommitted), so they take no
django_db mark: both servers are thrown away at the end, stopped and
deleted even when a test fails (and stopped by a watchdog if the run is killed).
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connections, transaction
from django.db.utils import load_backend
from django.test.utils import override_settings

from backlog.imports import import_records
from backlog.models import Bug
from runtime.postgres import embedded, replicas, watchdog
from search import service
from search.indexing.vectors import embed_pending

from .conftest import TRAMLINE, VAT_BUG, client_with_token, jsonl, seeing_all_products

pytestmark = pytest.mark.slow

STANDBY = "replica"  # the alias the standby gets here (settings name theirs replica1, replica2, ...)
PREFIX = "qa-replica-"
FILLER = 1200  # bugs beside Tramline's: enough that the planner matches words through the GIN index
SCRATCH = Path("/dev/shm") if Path("/dev/shm").is_dir() else None  # throwaway servers: in memory where we can
PRIMARY_PORT, STANDBY_PORT = 5432, 5433  # on sockets in the run's own folder, so no other server's


def run_as_server_user(*command: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    """A PostgreSQL program, as the user the embedded server runs as (root may not run it)."""
    return subprocess.run(
        [str(embedded.bin_dir() / command[0]), *command[1:]],
        user=embedded.system_user(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        **kwargs,
    )


def start(data: Path, port: int) -> subprocess.Popen:
    """Start the server on `data`: a socket only, beside `data`; a small buffer cache.
    Watched: if this process is killed outright, the server stops (runtime/postgres/watchdog.py)."""
    options = f"-h '' -k {data.parent} -p {port} -c shared_buffers=32MB"
    run_as_server_user("pg_ctl", "-D", str(data), "-l", f"{data}.log", "-o", options, "-w", "start")
    (data / ".handle_pids.json").write_text(json.dumps([os.getpid()]))
    return subprocess.Popen(
        [sys.executable, "-m", watchdog.__name__, str(data)], start_new_session=True, stderr=subprocess.DEVNULL
    )


def stop(data: Path, guard: subprocess.Popen) -> None:
    guard.kill()
    guard.wait()
    with contextlib.suppress(subprocess.SubprocessError):
        run_as_server_user("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop", timeout=30)


def remove_abandoned_folders() -> None:
    """Folders of runs killed outright: their watchdogs stopped the servers; nothing else deletes them."""
    for folder in Path(SCRATCH or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        if not any((folder / name / "postmaster.pid").exists() for name in ("primary", "standby")):
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def primary_and_standby(database: str, source: str):
    """A primary holding a copy of `database` from the server at socket
    folder `source`, and a hot standby streaming from it; yields their
    socket folder. Both are stopped and the folder deleted afterwards."""
    remove_abandoned_folders()
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=SCRATCH))
    if user := embedded.system_user():
        shutil.chown(folder, user)
    primary, standby = folder / "primary", folder / "standby"
    running = []
    try:
        began = time.monotonic()
        run_as_server_user("initdb", "-D", str(primary), "--auth=trust", "-U", "postgres", "--no-sync")
        running.append((primary, start(primary, PRIMARY_PORT)))
        # Schema and rows of the test database, with the extensions it uses.
        # Without owners and grants: the roles of the shared server (qa_app: runtime/postgres/roles.py) are not here.
        dump = run_as_server_user(
            "pg_dump", "-h", source, "-U", "postgres", "--no-owner", "--no-privileges", database
        ).stdout
        psql = ["psql", "-qX", "-v", "ON_ERROR_STOP=1", "-h", str(folder), "-p", str(PRIMARY_PORT), "-U", "postgres"]
        run_as_server_user(*psql, "-c", f'CREATE DATABASE "{database}"')
        run_as_server_user(*psql, "-d", database, input=dump)
        # The standby: a base backup that writes its own recovery settings (-R), started in hot standby.
        run_as_server_user(
            "pg_basebackup", "-h", str(folder), "-p", str(PRIMARY_PORT), "-U", "postgres", "-D", str(standby),
            "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        running.append((standby, start(standby, STANDBY_PORT)))
        print(f"\nprimary and standby up in {time.monotonic() - began:.1f} s")
        yield str(folder)
    finally:
        for data, guard in reversed(running):
            stop(data, guard)
        shutil.rmtree(folder, ignore_errors=True)


def connection_to(alias: str, host: str, port: int, like):
    """A connection like `like`'s (same database name and options) to the server at `host`, `port`."""
    settings_dict = {**like.settings_dict, "ENGINE": "django.db.backends.postgresql", "HOST": host, "PORT": str(port)}
    return load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias)


def replay_caught_up(alias: str = STANDBY, timeout: float = 20) -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        written = cursor.fetchone()[0]
    deadline = time.monotonic() + timeout
    with connections[alias].cursor() as cursor:
        while True:
            cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [written])
            if cursor.fetchone()[0]:
                return
            assert time.monotonic() < deadline, "the standby did not replay the primary's writes"
            time.sleep(0.05)


def filler_bugs(count: int) -> list[dict]:
    parts = ["Checkout", "Login", "Invoice list", "Map view", "Settings", "Push alert", "Receipt", "Search bar"]
    faults = ["freezes", "shows a blank page", "crashes", "is slow", "loses its scroll position", "flickers"]
    return [
        {
            "kind": "bug",
            "key": f"BUG-{1000 + i}",
            "product": "PRD-2",
            "title": f"{parts[i % len(parts)]} {faults[i % len(faults)]} after update {i}",
            "severity": "low",
            "status": "open",
        }
        for i in range(count)
    ]


def forget_lag_checks() -> None:
    replicas._checked.clear()


@pytest.fixture(scope="module")
def standby(django_db_setup, django_db_blocker):
    """A primary and its standby, as the aliases "default" and STANDBY, with
    Tramline's records (embedded) and FILLER more bugs written on the
    primary and replayed on the standby.

    The primary is a server of the module's own holding a copy of the test
    database, not the server the tests share: a base backup copies every
    database of a server, and the shared one holds every benchmark's too
    (over a gigabyte: 5 to 15 s to copy, and growing)."""
    with django_db_blocker.unblock():
        shared = connections["default"]
        if shared.settings_dict["ENGINE"] != "runtime.postgres":
            pytest.skip("the servers are made with the embedded server's programs (DATABASE_URL is set)")
        shared.ensure_connection()
        database = shared.settings_dict["NAME"]
        with primary_and_standby(database, shared.get_connection_params()["host"]) as sockets:
            connections["default"] = connection_to("default", sockets, PRIMARY_PORT, like=shared)
            connections.settings[STANDBY] = connection_to(STANDBY, sockets, STANDBY_PORT, like=shared).settings_dict
            routed = override_settings(  # what settings.py sets when DATABASE_REPLICA_URLS names one
                DATABASE_REPLICAS=[STANDBY],
                DATABASE_ROUTERS=["runtime.postgres.replicas.ReplicaRouter"],
                MIDDLEWARE=[*settings.MIDDLEWARE, "config.middleware.ReadYourWritesMiddleware"],
            )
            routed.enable()
            try:
                began = time.monotonic()
                for records in (TRAMLINE, filler_bugs(FILLER)):
                    report = import_records(jsonl(*records).splitlines())
                    assert report.written and not report.problems, report.problems
                    if records is TRAMLINE:
                        embed_pending()  # the filler goes without vectors: the model would take seconds
                with connections["default"].cursor() as cursor:
                    cursor.execute("ANALYZE search_document")
                replay_caught_up()
                took = time.monotonic() - began
                print(f"{FILLER + len(TRAMLINE)} records written on the primary and replayed in {took:.1f} s")
                yield STANDBY
            finally:
                routed.disable()
                forget_lag_checks()
                for alias in (STANDBY, "default"):
                    connections[alias].close()
                del connections[STANDBY]
                del connections.settings[STANDBY]
                connections["default"] = shared


@pytest.fixture
def on_standby(standby, django_db_blocker):
    forget_lag_checks()
    with django_db_blocker.unblock():
        yield standby
    forget_lag_checks()


@contextlib.contextmanager
def statements(alias: str):
    """The SQL run on `alias` in the block."""
    seen = []

    def record(execute, sql, params, many, context):
        seen.append((sql, params))
        return execute(sql, params, many, context)

    with connections[alias].execute_wrapper(record):
        yield seen


def in_recovery(alias: str) -> bool:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        return cursor.fetchone()[0]


def reads_the_index(statements: list[tuple]) -> bool:
    return any("search_document" in sql for sql, _ in statements)


def keys(body: dict) -> list[str]:
    return [hit["key"] for hit in body["results"]]


def indexes_used(alias: str, statements: list[tuple], seqscan: bool = True) -> set[str]:
    """The indexes in the plans `alias` makes for those of `statements` that read the search index."""
    used = set()
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        cursor.execute("SELECT set_config('enable_seqscan', %s, true)", ["on" if seqscan else "off"])
        for sql, params in statements:
            if "search_document" in sql:
                cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
                used |= index_names(cursor.fetchone()[0][0]["Plan"])
    return used


def index_names(plan: dict) -> set[str]:
    found = {plan["Index Name"]} if "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        found |= index_names(child)
    return found


def test_a_search_runs_on_the_standby_and_its_indexes(on_standby):
    with statements("default") as on_primary, statements(STANDBY) as on_replica:
        started = time.monotonic()
        body = service.call("search", {"query": "renewal android"})
        took = time.monotonic() - started

    assert keys(body)[0] == "BUG-12"
    assert body["mode"] == "hybrid"
    # The primary was asked only where its WAL is (the lag check); every statement of the search ran on the standby.
    assert [sql for sql, _ in on_primary if "pg_current_wal_lsn" not in sql] == []
    assert len(on_replica) > 5
    assert in_recovery(STANDBY) and not in_recovery("default")
    # The search's own statements, planned on the standby. Its GIN index finds
    # the words. For the nearest vectors the planner rightly reads the table
    # at this size: pgvector's estimate of an HNSW scan (from m, ef_search
    # and the rows) is more than reading 1,206 rows and sorting them. Told not
    # to read whole tables, as a large index makes it choose, it takes HNSW.
    planned = indexes_used(STANDBY, on_replica)
    without_seqscan = indexes_used(STANDBY, on_replica, seqscan=False)
    print(f"search on the standby: {took * 1000:.0f} ms, {len(on_replica)} statements")
    print(f"  indexes planned: {sorted(planned)}\n  without seqscan: {sorted(without_seqscan)}")
    assert "search_document_fts" in planned
    assert {"search_document_hnsw", "search_document_fts"} <= without_seqscan


def test_records_are_read_on_the_standby_through_the_orm(on_standby):
    with statements("default") as on_primary, statements(STANDBY) as on_replica:
        body = service.call("get", {"keys": "BUG-12"})

    assert [record["key"] for record in body["records"]] == ["BUG-12"]
    assert [sql for sql, _ in on_primary if "pg_current_wal_lsn" not in sql] == []
    assert reads_the_index(on_replica)


def test_over_rest_a_search_reads_the_standby_and_a_change_reads_the_primary(on_standby):
    """Dana, who reported the renewal bug, finds it over REST and marks it fixed."""
    dana = seeing_all_products(get_user_model().objects.create_user("dana"))
    dana.user_permissions.add(Permission.objects.get(codename="change_bug"))
    client = client_with_token(dana)
    with statements("default") as on_primary, statements(STANDBY) as on_replica:
        found = client.get("/api/search", {"query": "renewal android"})

    assert found.status_code == 200 and keys(found.json())[0] == "BUG-12"
    assert reads_the_index(on_replica) and not reads_the_index(on_primary)  # her token, her permissions: the primary

    with statements(STANDBY) as on_replica:
        changed = client.patch("/api/bugs/BUG-12", {"status": "fixed"}, format="json")

    assert changed.status_code == 200 and changed.json()["status"] == "fixed"
    assert on_replica == []  # a PATCH reads the bug it changes from the primary


def test_a_standby_that_stopped_replaying_is_skipped_for_the_primary(on_standby):
    with connections[STANDBY].cursor() as cursor:
        cursor.execute("SELECT pg_wal_replay_pause()")
        while True:
            cursor.execute("SELECT pg_get_wal_replay_pause_state()")
            if cursor.fetchone()[0] == "paused":
                break
            time.sleep(0.01)
    try:
        assert import_records(jsonl(VAT_BUG).splitlines()).written  # on the primary, not replayed
        max_lag = 0.3
        with override_settings(DATABASE_REPLICA_MAX_LAG=max_lag):
            started = time.monotonic()
            while (behind := replicas.lag(STANDBY)) <= max_lag:
                assert time.monotonic() - started < 10, f"the paused standby stays {behind} s behind"
                time.sleep(0.05)
            forget_lag_checks()
            with statements("default") as on_primary, statements(STANDBY) as on_replica:
                body = service.call("search", {"query": "VAT invoice", "mode": "keyword"})
        print(f"lag guard: {behind:.2f} s behind after {time.monotonic() - started:.2f} s; the primary answered")

        assert keys(body)[0] == "BUG-20"  # the primary has it
        assert len(on_primary) > 5
        assert [sql for sql, _ in on_replica if "pg_is_in_recovery" not in sql] == []  # only the lag check
        with connections[STANDBY].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_document WHERE key = 'BUG-20'")
            assert cursor.fetchone()[0] == 0  # the standby has not replayed it yet
    finally:
        with connections[STANDBY].cursor() as cursor:
            cursor.execute("SELECT pg_wal_replay_resume()")

    replay_caught_up()
    forget_lag_checks()
    with statements(STANDBY) as on_replica:
        assert keys(service.call("search", {"query": "VAT invoice", "mode": "keyword"}))[0] == "BUG-20"
    assert on_replica  # caught up again: back on the standby


def test_a_request_that_wrote_reads_its_writes_from_the_primary(on_standby):
    with replicas.request_reads("GET"):
        assert replicas.read_alias() == STANDBY
        Bug.objects.filter(key="BUG-12").update(severity="critical")
        assert replicas.read_alias() == "default"
        with statements(STANDBY) as on_replica:
            body = service.call("get", {"keys": "BUG-12"})
        assert body["records"][0]["severity"] == "critical"
        assert on_replica == []
    with replicas.request_reads("GET"):  # the next request starts on the standby again
        assert replicas.read_alias() == STANDBY
    with replicas.request_reads("POST"):  # a request that may write reads what it will change from the primary
        assert replicas.read_alias() == "default"
