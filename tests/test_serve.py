"""`manage.py serve` prepares everything and says how to connect."""

import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from accounts.tokens import check
from backlog.models import Bug
from runtime.management.commands.serve import collect_static

from .conftest import ROOT, api_key
from .test_mcp import server_env


@pytest.mark.django_db
def test_serve_migrates_loads_demo_data_creates_the_admin_and_prints_how_to_connect(settings):
    settings.ADMIN_PASSWORD = "a-long-test-passphrase"
    out = io.StringIO()

    call_command("serve", "127.0.0.1:8123", demo_records=120, no_serve=True, stdout=out)
    call_command("serve", "127.0.0.1:8123", demo_records=120, no_serve=True, stdout=out)

    text = out.getvalue()
    assert "Admin:     http://127.0.0.1:8123/admin/   (user admin, password from ADMIN_PASSWORD)" in text
    assert "Search:    http://127.0.0.1:8123/search/" in text
    token = re.search(r"Authorization: Bearer (\S+)", text).group(1)
    assert check(token).user.username == "admin"  # the printed key opens REST and MCP as the admin
    assert text.count(f"Authorization: Bearer {token}") >= 2  # and the second run printed the same one
    assert "manage.py mcp --transport http" in text
    assert "The database already holds records; no demo data loaded." in text  # second run
    assert "Database migrated, static files unchanged." in text  # second run: not compressed again
    assert "0 of 120 records embedded" in text
    assert Bug.objects.count() > 0
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password("a-long-test-passphrase")


def test_static_files_are_collected_again_only_when_they_changed(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "staticfiles"
    settings.STATIC_ROOT.mkdir()
    # A manifest, as in production (there compressed too; the suite's storage is plain).
    manifest = {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"}
    settings.STORAGES = {**settings.STORAGES, "staticfiles": manifest}
    assert collect_static() == "collected"
    assert collect_static() == "unchanged"  # what each start of serve did again: 1.4 s

    ours = tmp_path / "static"
    ours.mkdir()
    (ours / "team-logo.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    settings.STATICFILES_DIRS = [ours]
    assert collect_static() == "collected"
    assert list(settings.STATIC_ROOT.glob("team-logo.*.svg"))  # the manifest's hashed name
    (ours / "team-logo.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg' width='2'/>")
    assert collect_static() == "collected"
    (settings.STATIC_ROOT / "staticfiles.json").unlink()  # the manifest lost: collected again
    assert collect_static() == "collected"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fetch(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def wait_until_serving(process: subprocess.Popen, health: str, mcp: str | None = None, seconds: float = 120) -> None:
    """Until `health` answers 200 (and MCP over HTTP, when given, asks for a token)."""
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, "it ended before it served"
        try:
            if fetch(health)[0] == 200 and (mcp is None or fetch(mcp)[0] == 401):
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, "it did not answer"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_serve_runs_gunicorn_with_static_files_health_and_mcp_beside_it_and_leaves_nothing_running(stop):
    """The real main job on free ports: gunicorn's workers answer the API and
    pages, WhiteNoise the hashed static files, MCP over HTTP its own port,
    and the saved searches' webhook sender runs.
    SIGTERM stops the server and every child; so does SIGKILL, which serve
    cannot catch (its children are told by the kernel)."""
    web, mcp = free_port(), free_port()
    env = {**server_env(connection.settings_dict["NAME"]), "ADMIN_PASSWORD": "a-long-test-passphrase"}
    env.update(SERVE_WORKERS="2", SERVE_THREADS="2", DEBUG="false", SECRET_KEY="serve-test")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{web}", "--demo-records", "0", "--no-embed"]
        + ["--mcp-port", str(mcp)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    base = f"http://127.0.0.1:{web}"
    try:
        wait_until_serving(process, f"{base}/healthz", f"http://127.0.0.1:{mcp}/mcp")
        server_children = psutil.Process(process.pid).children(recursive=True)

        status, _, body = fetch(f"{base}/readyz")
        assert (status, json.loads(body)["checks"]["database"]) == (200, "ok")
        token = api_key(get_user_model().objects.get(username="admin"))
        status, _, body = fetch(f"{base}/api/search?query=renewal", {"Authorization": f"Token {token}"})
        assert status == 200 and json.loads(body)["total"] == 0
        with connection.cursor() as cursor:  # the app's connections: no superuser (runtime/postgres/roles.py)
            cursor.execute(
                "SELECT DISTINCT a.usename, r.rolsuper FROM pg_stat_activity a JOIN pg_roles r ON r.rolname = a.usename"
                " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.usename <> 'postgres'"
            )
            assert cursor.fetchall() == [("qa_app", False)]
        status, _, page = fetch(f"{base}/accounts/login/")
        stylesheet = re.search(r'href="(/static/[^"]+\.[0-9a-f]{12}\.css)"', page.decode()).group(1)
        status, headers, _ = fetch(base + stylesheet, {"Accept-Encoding": "gzip"})
        assert status == 200 and "max-age=315360000" in headers["Cache-Control"]
        assert headers.get("Content-Encoding") == "gzip"
        assert any("gunicorn" in " ".join(child.cmdline()) for child in server_children)
        # Saved searches' webhook sender runs beside it, and stops with it (below).
        assert any("notify_saved_searches --watch" in " ".join(child.cmdline()) for child in server_children)
        # So do the sources' scheduled syncs, and readyz reports on them.
        assert any("sync --watch" in " ".join(child.cmdline()) for child in server_children)
        assert json.loads(fetch(f"{base}/readyz")[2])["checks"]["sources"] == "none scheduled"
    finally:
        process.send_signal(stop)
        assert process.wait(60) == (0 if stop == signal.SIGTERM else -stop)  # a stop asked for is a success
    _, alive = psutil.wait_procs(server_children, timeout=30)
    assert [" ".join(child.cmdline()[:4]) for child in alive if child.status() != psutil.STATUS_ZOMBIE] == []


def test_health_answers_without_a_login_and_names_no_record(tramline, client):
    alive = client.get("/healthz")
    ready = client.get("/readyz")

    assert (alive.status_code, alive.json()) == (200, {"status": "alive"})
    assert ready.status_code == 200 and ready.json()["checks"]["database"] == "ok"
    assert "BUG-12" not in ready.content.decode() and "documents" not in ready.content.decode()


@pytest.mark.parametrize("path", ["/api/search", "/search/", "/admin/backlog/bug/"])
def test_a_url_over_the_limit_is_a_414_in_json(db, client, path, settings):
    settings.REQUEST_LINE_MAX_BYTES = 2000

    response = client.get(path, {"query": "renewal " * 400})

    assert response.status_code == 414
    assert response.json()["error"]["code"] == "uri_too_long"
    assert "REQUEST_LINE_MAX_BYTES" in response.json()["error"]["message"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigterm_to_make_run_by_its_pid_leaves_nothing_running():
    """What a service manager, `timeout` or `kill` does: SIGTERM to make's own
    PID, not to its process group. make passes no signal on; serve learns that
    its parent is gone and stops every process it started."""
    web = free_port()
    env = {**server_env(connection.settings_dict["NAME"]), "ADMIN_PASSWORD": "a-long-test-passphrase"}
    env.update(SERVE_ADDRPORT=f"127.0.0.1:{web}", SERVE_MCP_PORT=str(free_port()), DEMO_RECORDS="0")
    env.update(SERVE_WORKERS="1", SERVE_THREADS="2", SECRET_KEY="serve-test")
    env.pop("DEBUG", None)  # make run's own choice: off, as in production
    make = subprocess.Popen(
        ["make", "--no-print-directory", "run", f"BIN={sys.executable.rsplit('/', 1)[0]}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until_serving(make, f"http://127.0.0.1:{web}/healthz")
        started = psutil.Process(make.pid).children(recursive=True)
        assert any("gunicorn" in " ".join(p.cmdline()) for p in started)
        status, _, page = fetch(f"http://127.0.0.1:{web}/no-such-page")
        assert status == 404 and b"URLconf" not in page and b"settings" not in page  # no debug page

        make.send_signal(signal.SIGTERM)  # to make alone, as `kill PID` does
        make.wait(10)
        _, alive = psutil.wait_procs(started, timeout=10)
        assert alive == [], [" ".join(p.cmdline()) for p in alive]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(make.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_import_sent_chunked_is_read_through_gunicorn_within_the_same_limit(settings, alice):
    """Alice's script streams its file (Transfer-Encoding: chunked, no Content-Length), as
    curl -T - and most HTTP libraries do for a generator. gunicorn passes the body on;
    Django and DRF took it for no body ("The body is empty"). It is read now, and cut off
    at IMPORT_MAX_BYTES as a body with a length is."""
    import http.client

    from backlog.models import Product
    from runtime.supervisor import gunicorn_command

    from .conftest import TRAMLINE, jsonl

    token = api_key(alice)
    text = jsonl(*TRAMLINE).encode()
    port = free_port()
    settings.SERVE_WORKERS, settings.SERVE_THREADS = 1, 2
    env = {**server_env(connection.settings_dict["NAME"]), "IMPORT_MAX_BYTES": str(len(text) + 10)}
    server = subprocess.Popen(gunicorn_command(f"127.0.0.1:{port}"), env=env, stderr=subprocess.DEVNULL)

    def send_chunked(body: bytes) -> tuple[int, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        chunks = (body[start : start + 100] for start in range(0, len(body), 100))
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/x-ndjson"}
        connection.request("POST", "/api/import", body=chunks, headers=headers, encode_chunked=True)
        response = connection.getresponse()
        return response.status, json.loads(response.read())

    try:
        wait_until_serving(server, f"http://127.0.0.1:{port}/healthz")
        status, report = send_chunked(text)
        too_large_status, too_large = send_chunked(text + b"\n" * 11)
    finally:
        server.terminate()
        server.wait(30)

    assert status == 200, report
    assert report["written"] is True and report["created"] == {"product": 2, "feature": 2, "test": 1, "bug": 1}
    assert Product.objects.filter(key="PRD-1").exists()
    assert too_large_status == 413 and too_large["error"]["code"] == "too_large"


def test_make_run_installs_the_apps_requirements_only_and_make_test_the_tests_extras_too(tmp_path):
    """A team's server gets what the app runs on, not the test tools (803 MB
    with them); CI runs exactly the README's `make test`, which installs them."""

    def planned(target: str) -> list[str]:
        made = subprocess.run(
            ["make", "-n", "--no-print-directory", target, f"VENV={tmp_path / 'venv'}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return [line for line in made.stdout.splitlines() if "pip install" in line and " -r " in line]

    assert [line.split(" -r ")[1] for line in planned("run")] == ["requirements.txt"]
    assert [line.split(" -r ")[1] for line in planned("test")] == ["requirements-dev.txt"]
    assert (ROOT / "requirements-dev.txt").read_text().startswith("-r requirements.txt")
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "make test"
