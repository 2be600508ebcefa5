"""Connection pooling (docs/deploy.md, "Connection pooling").

The settings: DATABASE_POOL turns on Django's psycopg pool, DATABASE_POOLER
sets Django up for a PgBouncer in transaction mode.

Behind a real PgBouncer (Debian's package; skipped where it is not
installed): with two server connections for every client, Alice's
statements and Bob's land on whichever is free. Alice imports, embeds,
searches and exports while Bob takes a server connection from under her
mid-export; then Bob holds both connections and finds nothing of Alice's
on either: no session setting, prepared statement, cursor, temporary
table, advisory lock or LISTEN. `make pool-check` runs the search, import,
REST and MCP tests behind one too.
"""

import copy
import runpy
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.db.utils import ConnectionHandler

from backlog.exports import export_records
from backlog.imports import import_records
from search import service
from search.indexing.vectors import embed_pending

from . import pgbouncer
from .conftest import TRAMLINE, VAT_BUG, jsonl

ROOT = Path(__file__).resolve().parent.parent


def database_settings(monkeypatch, **env: str) -> dict:
    """DATABASES["default"] as config/settings.py makes it from `env`."""
    for name in ("DATABASE_URL", "DATABASE_REPLICA_URLS", "DATABASE_POOL", "DATABASE_POOLER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "settings-test-only")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(ROOT / "config" / "settings.py"))["DATABASES"]


# -- the settings ----------------------------------------------------------------------------


def test_behind_pgbouncer_no_server_side_cursor_and_no_prepared_statement(monkeypatch):
    databases = database_settings(
        monkeypatch,
        DATABASE_URL="postgres://qa@pgbouncer:6432/qa",
        DATABASE_REPLICA_URLS="postgres://qa@pgbouncer-standby:6432/qa",
        DATABASE_POOLER="pgbouncer-transaction",
    )

    assert set(databases) == {"default", "replica1"}
    for database in databases.values():
        assert database["DISABLE_SERVER_SIDE_CURSORS"] is True
        assert database["OPTIONS"]["prepare_threshold"] is None
        assert database["CONN_MAX_AGE"] == 60  # a connection to PgBouncer holds no server connection while idle
        assert "pool" not in database["OPTIONS"]


def test_djangos_own_pool_hands_connections_back_after_each_request(monkeypatch):
    embedded = database_settings(monkeypatch, DATABASE_POOL="2,4")["default"]
    own_server, replica = database_settings(
        monkeypatch,
        DATABASE_URL="postgres://qa@db/qa",
        DATABASE_REPLICA_URLS="postgres://qa@standby/qa",
        DATABASE_POOL="1, 8",
    ).values()

    assert embedded["ENGINE"] == "runtime.postgres"
    assert embedded["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 4}
    assert embedded["CONN_MAX_AGE"] == 0  # Django refuses a pool with persistent connections
    for database in (own_server, replica):
        assert database["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 8} and database["CONN_MAX_AGE"] == 0
    assert not own_server.get("DISABLE_SERVER_SIDE_CURSORS")  # the pool lends a connection for a whole request


@pytest.mark.parametrize(
    "env, message",
    [
        ({"DATABASE_POOL": "8"}, "DATABASE_POOL='8': use MIN,MAX, like 2,4."),
        ({"DATABASE_POOL": "two,four"}, "DATABASE_POOL='two,four': use MIN,MAX"),
        ({"DATABASE_URL": "postgres://qa@db/qa", "DATABASE_POOLER": "pgbouncer"}, "use pgbouncer-transaction"),
        ({"DATABASE_POOLER": "pgbouncer-transaction"}, "point DATABASE_URL at the PgBouncer"),
    ],
)
def test_settings_that_cannot_work_say_what_to_set(monkeypatch, env, message):
    with pytest.raises(ImproperlyConfigured, match=message.replace("(", r"\(")):
        database_settings(monkeypatch, **env)


# -- behind PgBouncer --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bouncer(django_db_setup, django_db_blocker):
    """A PgBouncer in transaction mode in front of the test database's server:
    two server connections, whoever asks."""
    if reason := pgbouncer.missing():
        pytest.skip(reason)
    if settings.DATABASE_POOLER:
        pytest.skip("the tests already reach the database through a PgBouncer (make pool-check)")
    with django_db_blocker.unblock():
        server = pgbouncer.upstream(connection)
    with pgbouncer.PgBouncer(server, pool_size=2) as running:
        yield running


@contextmanager
def behind(bouncer, monkeypatch):
    """In this thread, Django's connection goes through `bouncer`, set up as
    config/settings.py sets it up for DATABASE_POOLER=pgbouncer-transaction."""
    name = connection.settings_dict["NAME"]
    pooled = database_settings(monkeypatch, DATABASE_URL=bouncer.url(name), DATABASE_POOLER="pgbouncer-transaction")
    wrapper = ConnectionHandler({"default": copy.deepcopy(pooled["default"])})["default"]
    direct = connections["default"]
    connections["default"] = wrapper
    try:
        yield
    finally:
        wrapper.close()
        connections["default"] = direct


def bob(bouncer) -> psycopg.Connection:
    """Bob's client: a transaction of his holds a server connection until it ends."""
    return psycopg.connect(bouncer.url(connection.settings_dict["NAME"]))


LEFT_ON_THE_SESSION = """
    SELECT pg_backend_pid(),
           (SELECT coalesce(array_agg(name ORDER BY name), '{}') FROM pg_settings WHERE source = 'session'),
           (SELECT count(*) FROM pg_prepared_statements),
           (SELECT count(*) FROM pg_cursors),
           (SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()),
           (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'),
           (SELECT count(*) FROM pg_listening_channels())
"""


def test_a_shared_server_connection_carries_nothing_from_one_client_to_the_next(bouncer, transactional_db, monkeypatch):
    with behind(bouncer, monkeypatch):
        # Import: a temporary table, COPY and an upsert in one transaction;
        # seven times, past psycopg's threshold for preparing a statement.
        for _ in range(7):
            report = import_records(jsonl(*TRAMLINE, VAT_BUG).splitlines())
            assert report.written and not report.problems, report.problems
        assert embed_pending() > 0  # the embedding worker's batches
        hybrid = service.call("search", {"query": "renewal on android"})
        assert hybrid["mode"] == "hybrid" and "degraded" not in hybrid  # hnsw settings, SET LOCAL
        assert hybrid["results"][0]["key"] == "BUG-12"
        typo = service.call("search", {"query": "renwal button", "mode": "keyword"})
        assert typo["corrected_query"] == "renewal button"  # pg_trgm's threshold, SET LOCAL
        assert service.call("timeline", {"key": "BUG-12"})["record"]["key"] == "BUG-12"

        # Export, while Bob takes the server connection it started on: the
        # rest must not depend on finding anything there.
        exported = export_records()
        first = next(exported)
        with bob(bouncer) as bobs:
            bobs.execute("SELECT 1")  # in a transaction: his until it ends
            rest = list(exported)
        assert [first["key"]] + [record["key"] for record in rest] == [
            "PRD-1",
            "PRD-2",
            "FEAT-7",
            "FEAT-9",
            "TEST-3",
            "BUG-12",
            "BUG-20",
        ]

    # Both server connections in Bob's hands at once: whatever Alice left, he meets.
    with bob(bouncer) as one, bob(bouncer) as other:
        left = [one.execute(LEFT_ON_THE_SESSION).fetchone(), other.execute(LEFT_ON_THE_SESSION).fetchone()]
    assert left[0][0] != left[1][0]  # two server processes: the whole pool
    assert [row[1:] for row in left] == [([], 0, 0, 0, 0, 0)] * 2
