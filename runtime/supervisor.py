"""`serve`'s children: the web server and the helpers beside it, started,
kept and stopped together.

The web app runs under gunicorn (sync Django on threads in a few worker
processes: the ORM, the search SQL and the embedding model are all blocking
calls, which an ASGI server would only hand to a thread pool again) on a
private Unix socket, behind the front (runtime/front.py), which listens at
SERVE_ADDRPORT and reads every request whole before a thread sees it. It
runs as a child process beside supervised ones: the front, the embedding worker, MCP over
streamable HTTP (`mcp --transport http`, the SDK's own ASGI app under
uvicorn), the saved searches' webhook sender (`notify_saved_searches
--watch`), the sources' scheduled syncs (`sync --watch`) and the trackers'
webhook deliveries (`hooks --watch`). `--server
runserver` keeps Django's development server. Each helper is started again
when it dies (search.indexing.worker.Supervisor), and all stop with the server.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.db import connections

from search.indexing.health import EMBEDDING_WORKER
from search.indexing.worker import WORKER_NICENESS, Supervisor, die_with_parent


def run(addrport: str, embed: bool, server: str, mcp_port: int, env: dict[str, str] | None = None) -> None:
    """Serve at `addrport` until stopped, with the helpers beside the server; `env`: variables
    set for every process started (the database role they run as: runtime/postgres/roles.py)."""
    # Stopped by SIGTERM (a service manager, `docker stop`, `kill` of `make run`):
    # the children are stopped and the embedded database detached, and a stop
    # asked for is a success (exit 0), not make's "Error 143".
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    # And when whatever started us dies (`make run` stopped by its PID: make
    # passes no signal on), the kernel sends that SIGTERM too.
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:  # it died before we asked
        sys.exit(0)
    env = env or {}
    children = helpers(addrport, embed, mcp_port, env)
    # gunicorn on a socket of its own, which only the front (runtime.front) reaches:
    # the front reads every request whole before a worker's thread sees it.
    private = Path(tempfile.mkdtemp(prefix="qa-search-"))  # 0700: this user's alone
    upstream = private / "gunicorn.sock"
    if server == "gunicorn":
        children.append(Supervisor("front", front_command(addrport, upstream), backoff_first=0.2))
    for helper in children:
        helper.start()
    web = None
    try:
        if server == "runserver":
            call_command("runserver", addrport, use_reloader=False)
            return
        connections.close_all()  # nothing of this process's is shared with the server's
        web = subprocess.Popen(
            gunicorn_command(f"unix:{upstream}"), env={**os.environ, **env}, preexec_fn=die_with_parent
        )
        web.wait()
    finally:
        if web is not None and web.poll() is None:
            web.terminate()  # gunicorn's graceful stop: requests in hand are answered
            web.wait(60)
        for helper in children:
            helper.stop()
        shutil.rmtree(private, ignore_errors=True)


def helpers(addrport: str, embed: bool, mcp_port: int, env: dict[str, str] | None = None) -> list[Supervisor]:
    """The supervised commands that run beside the web server, each with `env` set."""
    env = env or {}
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    found = []
    if embed:
        worker = [sys.executable, manage, "embed", "--watch", "--no-progress"]
        found.append(Supervisor(EMBEDDING_WORKER, worker, niceness=WORKER_NICENESS, env=env))
    # Saved searches' webhooks: a round every SAVED_SEARCH_NOTIFY_SECONDS, never in a request.
    notifier = [sys.executable, manage, "notify_saved_searches", "--watch"]
    found.append(Supervisor("saved-search-notifier", notifier, niceness=WORKER_NICENESS, env=env))
    # Sources configured in the admin sync on their schedules (docs/connectors.md).
    # A failed sync is one line of the command's on stderr, which the supervisor logs;
    # the sync's own warning of the same failure would make it two (the run keeps it).
    syncer = [sys.executable, manage, "sync", "--watch", "--no-progress"]
    found.append(Supervisor("connector-sync", syncer, niceness=WORKER_NICENESS, env={**env, "LOG_LEVEL": "ERROR"}))
    # The trackers' webhook deliveries, processed within a second of their arrival.
    found.append(Supervisor("webhook-processor", [sys.executable, manage, "hooks", "--watch"], env=env))
    # Writes to the teams' trackers (writeback/): each pending one sent, exactly once.
    found.append(Supervisor("writeback-sender", [sys.executable, manage, "writeback", "--watch"], env=env))
    if mcp_port:
        host = addrport.rsplit(":", 1)[0]
        command = [sys.executable, manage, "mcp", "--transport", "http", "--host", host, "--port", str(mcp_port)]
        found.append(Supervisor("mcp-http", command, env=env))
    return found


def front_command(addrport: str, upstream: Path) -> list[str]:
    """The front at `addrport`, handing whole requests to gunicorn at `upstream`
    (runtime/front.py): SERVE_HEADER_TIMEOUT for a request's headers,
    SERVE_BODY_TIMEOUT (and more for a large one) for its body, and no body
    larger than the largest an endpoint takes, refused on its declared length."""
    largest = max(settings.IMPORT_MAX_BYTES, settings.TRIAGE_MAX_BYTES, settings.WEBHOOK_MAX_BYTES)
    return [
        sys.executable,
        "-m",
        "runtime.front",
        "--listen",
        addrport,
        "--upstream",
        str(upstream),
        "--header-timeout",
        str(settings.SERVE_HEADER_TIMEOUT),
        "--body-timeout",
        str(settings.SERVE_BODY_TIMEOUT),
        "--upstream-timeout",
        str(settings.SERVE_TIMEOUT + 10),  # gunicorn's own ends a request first
        # A multipart form's parts and boundaries around the largest file it may carry.
        "--max-body",
        str(largest + 64 * 1024),
        # The request line Django answers with a 414 in JSON (REQUEST_LINE_MAX_BYTES), and headers.
        "--max-header-bytes",
        str(settings.REQUEST_LINE_MAX_BYTES + 64 * 1024),
        "--max-connections",
        str(settings.SERVE_MAX_CONNECTIONS),
    ]


def gunicorn_command(bind: str) -> list[str]:
    """gunicorn serving config.wsgi at `bind` (ADDR:PORT, or unix:PATH): SERVE_WORKERS processes
    (default: two a core) of SERVE_THREADS threads (default 4), each request
    at most SERVE_TIMEOUT seconds. The request line is not limited here:
    Django answers one over REQUEST_LINE_MAX_BYTES with a 414 in JSON
    (config.middleware), where gunicorn would answer in plain text."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "--bind",
        bind,
        "--worker-class",
        "gthread",
        "--workers",
        str(settings.SERVE_WORKERS),
        "--threads",
        str(settings.SERVE_THREADS),
        "--timeout",
        str(settings.SERVE_TIMEOUT),
        "--graceful-timeout",
        "30",
        "--limit-request-line",
        "0",
        "--access-logfile",
        "-" if settings.SERVE_ACCESS_LOG else "/dev/null",
        "--chdir",
        str(settings.BASE_DIR),
        # gunicorn's control socket is one path per user (~/.gunicorn/gunicorn.ctl):
        # a second instance on the machine would take it over, and stopping
        # either would delete the other's. serve stops gunicorn by signal.
        "--no-control-socket",
    ]
