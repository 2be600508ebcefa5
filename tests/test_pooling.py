"""Connection pooling (docs/deploy.md, "Connection pooling").

The settings: DATABASE_POOL turns on Django's psycopg pool, DATABASE_POOLER
sets Django up for a PgBouncer in transaction mode.
"""

import runpy
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

ROOT = Path(__file__).resolve().parent.parent


def database_settings(monkeypatch, **env: str) -> dict:
    """DATABASES["default"] as config/settings.py makes it from `env`."""
    for name in ("DATABASE_URL", "DATABASE_POOL", "DATABASE_POOLER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "settings-test-only")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(ROOT / "config" / "settings.py"))["DATABASES"]["default"]


# -- the settings ----------------------------------------------------------------------------


def test_behind_pgbouncer_no_server_side_cursor_and_no_prepared_statement(monkeypatch):
    database = database_settings(
        monkeypatch, DATABASE_URL="postgres://qa@pgbouncer:6432/qa", DATABASE_POOLER="pgbouncer-transaction"
    )

    assert database["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert database["OPTIONS"]["prepare_threshold"] is None
    assert database["CONN_MAX_AGE"] == 60  # a connection to PgBouncer holds no server connection while idle
    assert "pool" not in database["OPTIONS"]


def test_djangos_own_pool_hands_connections_back_after_each_request(monkeypatch):
    embedded = database_settings(monkeypatch, DATABASE_POOL="2,4")
    own_server = database_settings(monkeypatch, DATABASE_URL="postgres://qa@db/qa", DATABASE_POOL="1, 8")

    assert embedded["ENGINE"] == "config.postgres"
    assert embedded["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 4}
    assert embedded["CONN_MAX_AGE"] == 0  # Django refuses a pool with persistent connections
    assert own_server["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 8} and own_server["CONN_MAX_AGE"] == 0
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
