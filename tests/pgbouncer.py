"""A PgBouncer in transaction mode in front of this project's PostgreSQL:
the setup docs/deploy.md describes ("Connection pooling"), started for a
test, for `make pool-check` and for bench/load_bench.py.

    python -m tests.pgbouncer [--pool-size 4] [pytest arguments]

runs pytest with DATABASE_URL pointing at such a PgBouncer (and
DATABASE_POOLER=pgbouncer-transaction), in front of the server the settings
name: the embedded one, or DATABASE_URL's. Every server connection is shared
by whichever client has a transaction to run, `--pool-size` of them per
database (4 by default, fewer than the tests' clients).

The test database (TEST_DATABASE_NAME, test_pgbouncer by default) is created
and migrated through PgBouncer, and dropped directly afterwards: PgBouncer
keeps its idle server connections open, and PostgreSQL drops no database
that has connections, so Django's own DROP through PgBouncer would fail.

Debian's package (`apt-get install pgbouncer`; 1.18 on Debian 12) provides
the binary; `missing()` says why none can run.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parent.parent


def binary() -> str | None:
    # /usr/sbin is not on every user's PATH.
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")


def missing() -> str | None:
    """Why PgBouncer cannot run here, or None."""
    if binary() is None:
        return "pgbouncer is not installed (Debian: apt-get install pgbouncer; `make system-packages` does it)"
    return None


def upstream(connection) -> dict:
    """Where a Django connection's server is: host (or socket folder), port, user, password."""
    params = connection.get_connection_params()
    return {
        "host": params.get("host") or "localhost",
        "port": int(params.get("port") or 5432),
        "user": params.get("user") or "postgres",
        "password": params.get("password") or "",
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PgBouncer:
    """One PgBouncer process on a free loopback port, in transaction mode,
    passing every database name through to `server` (see `upstream`)."""

    def __init__(self, server: dict, pool_size: int = 4):
        self.server = server
        self.pool_size = pool_size
        self.port = free_port()
        self.user = server["user"]
        self.process: subprocess.Popen | None = None
        self.folder: Path | None = None

    def url(self, database: str) -> str:
        return f"postgres://{quote(self.user)}@127.0.0.1:{self.port}/{quote(database)}"

    def __enter__(self) -> "PgBouncer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        self.folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        server = " ".join(f"{name}={value}" for name, value in self.server.items() if value)
        (self.folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            # Any database name, to the same server: the tests' database is made by the test run.
            f"* = {server}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            # Loopback only, as the server's own user (`server` holds its password, if any).
            "auth_type = any\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\n"
            "reserve_pool_size = 0\n"
            "max_client_conn = 500\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
            f"pidfile = {self.folder / 'pgbouncer.pid'}\n"
        )
        user = None
        if os.geteuid() == 0:  # PgBouncer refuses to run as root: as the embedded server's user
            from runtime.postgres.embedded import system_user

            user = system_user()
            shutil.chown(self.folder, user)
        from search.indexing.worker import die_with_parent  # a killed test run leaves no PgBouncer behind

        # user= rather than PgBouncer's -u: a change of user after the start would clear die_with_parent's signal.
        self.process = subprocess.Popen(
            [binary(), str(self.folder / "pgbouncer.ini")],
            user=user,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                self.admin("SHOW VERSION")
                return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = self.log()
                    self.stop()
                    raise RuntimeError(f"PgBouncer did not start:\n{log}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def log(self) -> str:
        try:
            return (self.folder / "pgbouncer.log").read_text()[-3000:]
        except (OSError, TypeError):
            return ""

    def admin(self, command: str) -> list[dict]:
        """A command of PgBouncer's console (SHOW POOLS, SHOW STATS, ...): its rows by column name."""
        with psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            dbname="pgbouncer",
            user=self.user,
            autocommit=True,
            connect_timeout=2,
            row_factory=dict_row,
        ) as console:
            return console.execute(command).fetchall()


def drop_database(server: dict, name: str) -> None:
    """DROP DATABASE on the server itself, ending whatever connections it has."""
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], usage=__doc__.split("\n\n")[1].strip())
    parser.add_argument("--pool-size", type=int, default=4)
    args, pytest_args = parser.parse_known_args()
    if reason := missing():
        print(f"pool check not run: {reason}", file=sys.stderr)
        return 1
    os.environ.pop("DATABASE_POOLER", None)  # this process talks to the server itself
    os.environ.pop("DATABASE_POOL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection

    # Opened here and kept: this process stays attached to the embedded
    # server, which therefore runs until the tests are done.
    connection.ensure_connection()
    server = upstream(connection)
    database = connection.settings_dict["NAME"]
    test_database = os.environ.get("TEST_DATABASE_NAME") or "test_pgbouncer"
    drop_database(server, test_database)
    with PgBouncer(server, args.pool_size) as bouncer:
        env = {
            **os.environ,
            "DATABASE_URL": bouncer.url(database),
            "DATABASE_POOLER": "pgbouncer-transaction",
            "TEST_DATABASE_NAME": test_database,
        }
        version = bouncer.admin("SHOW VERSION")[0]["version"]
        print(
            f"pytest behind {version} (transaction mode, {args.pool_size} server connections a database): "
            f"DATABASE_URL={env['DATABASE_URL']}",
            flush=True,
        )
        # --reuse-db: pytest-django creates the database through PgBouncer and leaves it; dropped below.
        done = subprocess.run([sys.executable, "-m", "pytest", "--reuse-db", *pytest_args], cwd=ROOT, env=env)
        stats = [row for row in bouncer.admin("SHOW STATS") if row["database"] == test_database]
    drop_database(server, test_database)
    for row in stats:
        print(
            f"through PgBouncer to {test_database}: {row['total_xact_count']:,} transactions, "
            f"{row['total_query_count']:,} statements"
        )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
