"""Moving to the team's own PostgreSQL (DATABASE_URL), as docs/deploy.md's steps go.

The story: Erin's team runs the service on their own server. Its database
belongs to `qa_app`, an ordinary role: no superuser, as a DBA or a managed
service hands it out. Frank is the DBA, a superuser, who makes the
extensions when he is told which. The server here is the one the tests run
on (the embedded one, or DATABASE_URL's); the role and databases are the
test's own, dropped after it.
"""

import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import psycopg
import pytest
from django.contrib.auth.hashers import check_password
from django.db import connection
from psycopg import sql

from .conftest import ROOT, manage
from .pgbouncer import upstream
from .test_serve import fetch, free_port, wait_until_serving

pytestmark = pytest.mark.django_db

STATEMENTS = "CREATE EXTENSION vector; CREATE EXTENSION pg_trgm;"


class Server:
    """Frank's view of the server: he makes roles, databases and extensions."""

    def __init__(self, prefix: str):
        self.params = upstream(connection)
        self.prefix = prefix
        self.made: list[tuple[str, str]] = []

    def run(self, statement, database: str = "postgres") -> list[tuple]:
        with psycopg.connect(dbname=database, autocommit=True, **self.params) as frank:
            cursor = frank.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def role(self, name: str) -> str:
        """An ordinary role (LOGIN, no superuser), with a password for servers that ask for one."""
        role = f"{self.prefix}_{name}"
        self.run(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        self.run(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER PASSWORD 'erins-app'").format(sql.Identifier(role)))
        self.made.append(("ROLE", role))
        return role

    def database(self, name: str, owner: str | None = None, extensions: bool = False) -> str:
        database = f"{self.prefix}_{name}"
        self.run(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        owned = sql.SQL(" OWNER {}").format(sql.Identifier(owner)) if owner else sql.SQL("")
        self.run(sql.SQL("CREATE DATABASE {}{}").format(sql.Identifier(database), owned))
        self.made.insert(0, ("DATABASE", database))
        if extensions:  # what Frank runs when told
            for statement in STATEMENTS.split(";")[:-1]:
                self.run(statement, database)
        return database

    def url(self, database: str, role: str | None = None) -> str:
        host = quote(self.params["host"], safe="")
        who = f"{quote(role)}:erins-app" if role else quote(self.params["user"])
        return f"postgresql://{who}@{host}:{self.params['port']}/{database}"

    def drop(self) -> None:
        for kind, name in self.made:
            extra = " WITH (FORCE)" if kind == "DATABASE" else ""
            self.run(sql.SQL(f"DROP {kind} IF EXISTS {{}}{extra}").format(sql.Identifier(name)))


@pytest.fixture
def frank():
    server = Server(connection.settings_dict["NAME"])
    yield server
    server.drop()


def side_by_side(commands, env: dict) -> dict:
    """Each of `commands` in a process of its own, all at once (each is refused
    before it writes; its time is mostly Python's and Django's start); the
    CompletedProcess of each, by command."""
    with ThreadPoolExecutor(len(commands)) as pool:
        return dict(zip(commands, pool.map(lambda command: manage(*command.split(), env=env), commands), strict=True))


def env_for(url: str, **more: str) -> dict:
    return {"DATABASE_URL": url, "LOG_LEVEL": "WARNING", "SECRET_KEY": "own-postgres-test", **more}


def test_without_the_extensions_an_ordinary_role_is_told_what_a_superuser_runs_before_anything_is_touched(frank):
    qa_app = frank.role("qa_app")
    env = env_for(frank.url(frank.database("qa", owner=qa_app), qa_app), ADMIN_PASSWORD="a-long-passphrase")

    answers = side_by_side(("check", "migrate", "serve --no-serve"), env)

    for command, answer in answers.items():
        said = answer.stdout + answer.stderr
        assert answer.returncode != 0, command
        assert "Traceback" not in said, said
        assert f"Have a superuser (on a managed service, its admin role) run in database {frank.prefix}_qa: " in said
        assert STATEMENTS in said and "may not create vector" in said, said
    tables = frank.run("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'", f"{frank.prefix}_qa")
    assert tables == [(0,)]  # migrate stopped before its first migration


def test_an_unreachable_database_url_is_one_line_naming_its_host_and_port():
    env = env_for(f"postgresql://qa_app:secret@127.0.0.1:{free_port()}/qa")

    for command, answer in side_by_side(("check", "migrate", "serve --no-serve"), env).items():
        lines = [line for line in (answer.stdout + answer.stderr).splitlines() if "127.0.0.1" in line]
        assert answer.returncode != 0, command
        assert "Traceback" not in answer.stderr, answer.stderr
        assert len(lines) == 1 and "Cannot connect to the database at 127.0.0.1:" in lines[0], lines
        assert "Connection refused" in lines[0] and "secret" not in answer.stderr


@pytest.mark.slow
def test_with_the_extensions_made_by_a_superuser_the_ordinary_role_migrates_and_serves_without_demo_data(frank):
    qa_app = frank.role("qa_app")
    database = frank.database("qa", owner=qa_app, extensions=True)
    web = free_port()
    env = env_for(frank.url(database, qa_app), ADMIN_PASSWORD="a-long-passphrase", SERVE_WORKERS="1")
    env.pop("DEMO_RECORDS", None)
    serving = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{web}", "--no-embed", "--mcp-port", "0"],
        cwd=ROOT,
        env={**manage_env(), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_serving(serving, f"http://127.0.0.1:{web}/healthz")
        ready = fetch(f"http://127.0.0.1:{web}/readyz")
    finally:
        serving.send_signal(signal.SIGTERM)
        out, err = serving.communicate(timeout=60)

    assert ready[0] == 200 and json.loads(ready[2])["checks"]["database"] == "ok", ready
    assert "Database migrated" in out and "Demo data" not in out, out + err
    assert "Traceback" not in err, err
    assert frank.run("SELECT count(*) FROM backlog_bug", database) == [(0,)]
    assert frank.run(sql.SQL("SELECT rolsuper FROM pg_roles WHERE rolname = {}").format(qa_app)) == [(False,)]


def test_demo_data_is_the_embedded_servers_default_only():
    embedded = manage("serve", "--help", env={})
    own = manage("serve", "--help", env={"DATABASE_URL": "postgresql://qa_app@db.internal/qa"})

    assert "(default 5000, from DEMO_RECORDS)" in " ".join(embedded.stdout.split())
    assert "(default 0, from DEMO_RECORDS)" in " ".join(own.stdout.split())


def test_the_printed_admin_password_is_the_one_that_logs_in_to_the_database_served(frank):
    """Erin tries the service on a scratch database, then serves the team's
    again: the password printed is the team's, not the scratch one's."""
    team, scratch = frank.database("team", extensions=True), frank.database("scratch", extensions=True)
    kept = []

    def serve_once(database: str) -> str:
        env = env_for(frank.url(database), ADMIN_PASSWORD="", DEMO_RECORDS="0")
        answer = manage("serve", "--no-serve", env=env)
        assert answer.returncode == 0, answer.stderr
        line = next(line for line in answer.stdout.splitlines() if "Admin:" in line)
        kept.append(ROOT / line.split("(kept in ")[1].rstrip(")"))
        return line.split(" password ")[1].split()[0]

    def logs_in(password: str, database: str) -> bool:
        ((hashed,),) = frank.run("SELECT password FROM auth_user WHERE username = 'admin'", database)
        return check_password(password, hashed)

    try:
        first, other, again = serve_once(team), serve_once(scratch), serve_once(team)
    finally:
        for path in kept:
            path.unlink(missing_ok=True)

    assert logs_in(first, team) and logs_in(other, scratch)
    assert again == first and logs_in(again, team)
    assert kept[0] == kept[2] != kept[1]


def manage_env() -> dict:
    """The test process's environment for a child, without the suite's own database settings."""
    import os

    return {name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "DATABASE_POOLER")}
