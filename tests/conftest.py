"""Shared characters and helpers.

The story: Tramline Mobile is a transit ticketing app. Its "Season pass
renewal" feature has a test and a bug reported against it on Android 14.
Ledgerly is an invoicing web app with a PDF export feature.
"""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import psutil
import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.models import Scope
from accounts.tokens import issue
from backlog.imports import import_records
from tests.citus import citus_cluster  # noqa: F401  (a session fixture: a Citus cluster on loopback)
from tests.upstream.server import POLL_SECONDS


@pytest.fixture(scope="session", autouse=True)
def in_process_settings():
    """Pages in process name static files as the app folders hold them: the
    live server of the browser tests serves them from there (Django's
    StaticFilesHandler), and nothing depends on a collectstatic having run.
    Hashed names from the manifest, compressed and served by WhiteNoise, are
    checked on the real server (test_serve.py runs `serve`)."""
    from django.conf import settings
    from django.test.utils import override_settings

    # override_settings, not an assignment: its setting_changed signal resets
    # the storages already built (a module may have asked for one on import).
    in_process = override_settings(
        STATIC_ROOT=static_root(settings.STATIC_ROOT),
        STORAGES={
            **settings.STORAGES,
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        },
        # The suite sends many searches a minute as one user; test_serve.py
        # turns the limit on where it is the point.
        SEARCH_RATE_LIMIT="off",
        # Hundreds of users are made and log in; PBKDF2's million rounds cost a
        # quarter of a second each (Django's advice for tests). The real hashers
        # stay listed, so a hash another process made still checks.
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS],
    )
    in_process.enable()
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # WhiteNoise warns of a missing one
    yield
    in_process.disable()


def static_root(default) -> Path:
    """The folder this test process and the servers it starts collect static files into: a
    worker of `make test` (pytest-xdist) has its own, or a `serve` collecting in one worker
    replaces the files WhiteNoise is serving from in another."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return Path(default)
    os.environ["STATIC_ROOT"] = str(ROOT / ".local" / f"staticfiles-{worker}")
    return Path(os.environ["STATIC_ROOT"])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The tests on a Citus cluster run in one worker, one after another (`--dist
    loadgroup` hands out the tests whose ids end in "@citus" as one): the cluster is a
    session fixture, built once, and test_citus_layout's tests build on one database in
    turn. The id is set here: pytest-xdist's own xdist_group marker sets an attribute
    pytest 9.2 no longer reads, and its tests were spread over the workers, in any order.

    And every item has an id of its own. Schemathesis (4.32 under pytest 9) gives each of
    an API's operations the test function's bare id; pytest-xdist, which hands tests out
    by id, ran one of test_fuzz's 38 operations and dropped the other 37 unreported."""
    shared = Counter(item.nodeid for item in items)
    for item in items:
        own = f"{item.parent.nodeid}::{item.name}" if shared[item.nodeid] > 1 else item.nodeid
        if "citus_cluster" in getattr(item, "fixturenames", ()):
            own += "@citus"
        if own == item.nodeid:
            continue
        if hasattr(item, "_id"):  # pytest 9.2's structured id
            item._id = type(item._id).parse(own)
        else:
            item._nodeid = own


def pytest_sessionstart(session):
    """Under `make test` (pytest-xdist) every worker joins one embedded server: it is made
    and started here, in the process that starts them, before they do. Left to the
    workers, two made a fresh checkout's data folder at once, and one of them failed
    every test it had ("initdb: could not change permissions of directory")."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(session.config.option, "numprocesses", None):
        return
    from django.conf import settings

    if settings.EMBEDDED_DATABASE:
        from runtime.postgres import embedded

        embedded.socket_dir(settings.EMBEDDED_PG_DIR)


@pytest.fixture(autouse=True)
def no_refusals_left_to_count():
    """A refused webhook's count is added by a thread 10 s on (connectors/hooks/gate.py):
    by then another test's database is open. A test that wants it flushes itself."""
    yield
    from connectors.hooks import gate

    gate.discard()


def jsonl(*records: dict) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


TRAMLINE = [
    {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile", "description": "Ticketing app for city transit"},
    {
        "kind": "feature",
        "key": "FEAT-7",
        "product": "PRD-1",
        "name": "Season pass renewal",
        "acceptance_criteria": "Given an expiring pass, when I tap Renew, then the payment sheet opens",
    },
    {
        "kind": "test",
        "key": "TEST-3",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "title": "Renew an expired pass with a saved card",
        "steps": ["Open Passes", "Tap Renew", "Pay"],
        "status": "active",
        "created_at": "2026-01-10T08:00:00+00:00",
        "updated_at": "2026-01-11T08:00:00+00:00",
    },
    {
        "kind": "bug",
        "key": "BUG-12",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "test": "TEST-3",
        "title": "Renewal button does nothing on Android 14",
        "severity": "high",
        "status": "open",
        "created_at": "2026-02-01T10:00:00+00:00",
        "updated_at": "2026-02-02T10:00:00+00:00",
        "raw_data": {
            "actual_result": "Tapping Renew shows a spinner forever",
            "expected_result": "The payment sheet opens",
            "steps": ["Open Passes", "Tap Renew"],
            "environment": "Pixel 7, Android 14",
            "reporter": "dana",
        },
    },
    {"kind": "product", "key": "PRD-2", "name": "Ledgerly", "description": "Invoicing for small firms"},
    {"kind": "feature", "key": "FEAT-9", "product": "PRD-2", "name": "PDF export"},
]


# Ledgerly's reminder bug: a word of Tramline's ("renewal") in a product Tramline's team cannot see.
LEDGERLY_BUG = {
    "kind": "bug",
    "key": "BUG-30",
    "product": "PRD-2",
    "feature": "FEAT-9",
    "title": "Invoice renewal reminder button does nothing",
    "severity": "critical",
    "status": "open",
    "created_at": "2026-02-05T10:00:00+00:00",
}

# Ledgerly's invoice bug, which several stories add to Tramline's.
VAT_BUG = {
    "kind": "bug",
    "key": "BUG-20",
    "product": "PRD-2",
    "feature": "FEAT-9",
    "title": "Invoice PDF has the wrong VAT total",
    "severity": "critical",
    "status": "open",
    "created_at": "2026-03-01T09:00:00+00:00",
    "raw_data": {"actual_result": "VAT is 19% instead of 20%", "expected_result": "VAT is 20%"},
}


@pytest.fixture
def tramline(db):
    report = import_records(jsonl(*TRAMLINE).splitlines())
    assert report.written and not report.problems, report.problems
    return report


def run_import(text: str, *args: str) -> tuple[int, str, str]:
    """Run `manage.py import_records -` on `text`; (exit code, stdout, stderr)."""
    import sys

    from django.core.management.base import CommandError

    out, err = io.StringIO(), io.StringIO()
    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(text.encode()))
    try:
        call_command("import_records", "-", *args, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        err.write(str(exc))
        code = 1
    finally:
        sys.stdin = stdin
    return code, out.getvalue(), err.getvalue()


# -- processes of their own: manage.py commands and embedded servers -------------------------

ROOT = Path(__file__).resolve().parent.parent


def manage(*args: str, env: dict, **kwargs) -> subprocess.CompletedProcess | subprocess.Popen:
    command = [sys.executable, str(ROOT / "manage.py"), *args]
    full_env = {**os.environ, **env}
    if "DATABASE_URL" not in env:  # the embedded server: no DATABASE_URL, nor the pooler it may name
        for name in ("DATABASE_URL", "DATABASE_POOLER"):
            full_env.pop(name, None)
    if kwargs.pop("background", False):
        return subprocess.Popen(
            command, env=full_env, cwd=ROOT, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
        )
    return subprocess.run(command, env=full_env, cwd=ROOT, capture_output=True, text=True, timeout=120, **kwargs)


def shell(code: str, env: dict) -> str:
    result = manage("shell", "--no-imports", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def attached(env: dict) -> subprocess.Popen:
    """A process (think: the dev server, a worker) that has joined the embedded
    server and waits for a line on its stdin; started, not yet waited for."""
    return manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.db import connection\nconnection.cursor()\nprint('in', flush=True); input()",
        env=env,
        background=True,
    )


@pytest.fixture
def pgdata(tmp_path):
    """A data folder for an embedded server of the test's own, stopped
    afterwards even when the test failed while it was still running."""
    yield tmp_path / "pgdata"
    pid_file = tmp_path / "pgdata" / "postmaster.pid"
    if pid_file.exists():
        with contextlib.suppress(psutil.NoSuchProcess, ValueError):
            # SIGINT: PostgreSQL's fast shutdown, which does not wait for clients.
            psutil.Process(int(pid_file.read_text().split()[0])).send_signal(signal.SIGINT)


@pytest.fixture
def quick_retries(settings):
    """Connector tests: three tries a request upstream, never waiting more than
    3 s between two (a site's Retry-After of 1 s is still waited out)."""
    settings.SYNC_HTTP_ATTEMPTS = 3
    settings.SYNC_HTTP_MAX_WAIT = 3


@pytest.fixture
def no_back_off(quick_retries, settings):
    """A site that is down, not slow: its three tries follow one another at once
    (the back-off's half second, then one, are not what such a test checks)."""
    settings.SYNC_HTTP_MAX_WAIT = 0.01


# -- the people of the API tests --------------------------------------------------------------
# Alice curates records (she may add, change and delete them and import
# files); Bob reads (an account and nothing more); an anonymous caller has
# neither token nor session.


def seeing_all_products(user):
    """`user`, given every product (backlog.access: the access_all_products permission)."""
    user.user_permissions.add(Permission.objects.get(codename="access_all_products"))
    return user


def api_key(user, scope: str = Scope.WRITE) -> str:
    """A new API token's key for `user` (read and write unless asked otherwise)."""
    return issue(user, "a test's token", scope)[1]


def client_with_token(user, scope: str = Scope.WRITE) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_key(user, scope)}")
    return client


@pytest.fixture
def alice(django_user_model):
    user = django_user_model.objects.create_user("alice", password="a-long-passphrase")
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="backlog",
            codename__regex=r"^(add|change|delete|view)_(product|feature|qatest|bug)$|^access_all_products$",
        )
    )
    return user


@pytest.fixture
def bob(django_user_model):
    return seeing_all_products(django_user_model.objects.create_user("bob", password="another-long-passphrase"))


@pytest.fixture
def curator(alice):
    return client_with_token(alice)


@pytest.fixture
def reader(bob):
    return client_with_token(bob)


@pytest.fixture
def anonymous():
    return APIClient()


# -- stand-ins for hosted services, on 127.0.0.1 ------------------------------------------------


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet request handler whose replies survive a client that gave up."""

    def reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    def log_message(self, *args):  # keep test output clean
        pass


@contextlib.contextmanager
def serving(server, monkeypatch):
    """`server` answering in a thread of its own, reached directly (no proxy)."""
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    threading.Thread(target=server.serve_forever, args=(POLL_SECONDS,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def forget_history() -> None:
    """Empty the audit trail's tables (TRUNCATE: they refuse DELETE). Records
    other modules committed and deleted leave their events behind; a test
    that resets sequences must clear them, or its events' ids collide."""
    from django.apps import apps
    from django.db import connection

    tables = [m._meta.db_table for m in apps.get_app_config("backlog").get_models() if m.__name__.endswith("Event")]
    tables.append(apps.get_model("pghistory", "Context")._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE " + ", ".join(tables))
