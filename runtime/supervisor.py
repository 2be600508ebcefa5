"""`serve`'s children: the web server and the helpers beside it, started,
kept and stopped together.

The web app runs under gunicorn (sync Django on threads in a few worker
processes: the ORM, the search SQL and the embedding model are all blocking
calls, which an ASGI server would only hand to a thread pool again), as a
child process beside supervised ones: the embedding worker, MCP over
streamable HTTP (`mcp --transport http`, the SDK's own ASGI app under
uvicorn), the saved searches' webhook sender (`notify_saved_searches
--watch`), the sources' scheduled syncs (`sync --watch`) and the trackers'
webhook deliveries (`hooks --watch`). `--server
runserver` keeps Django's development server. Each helper is started again
when it dies (search.indexing.worker.Supervisor), and all stop with the server.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.db import connections

from search.indexing.health import EMBEDDING_WORKER
from search.indexing.worker import WORKER_NICENESS, Supervisor, die_with_parent


def run(addrport: str, embed: bool, server: str, mcp_port: int) -> None:
    """Serve at `addrport` until stopped, with the helpers beside the server."""
    # Stopped by SIGTERM (a service manager, `docker stop`), exit as on
    # Ctrl-C: the children are stopped and the embedded database detached.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    # And when whatever started us dies (`make run` stopped by its PID: make
    # passes no signal on), the kernel sends that SIGTERM too.
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:  # it died before we asked
        sys.exit(128 + signal.SIGTERM)
    children = helpers(addrport, embed, mcp_port)
    for helper in children:
        helper.start()
    web = None
    try:
        if server == "runserver":
            call_command("runserver", addrport, use_reloader=False)
            return
        connections.close_all()  # nothing of this process's is shared with the server's
        web = subprocess.Popen(gunicorn_command(addrport), preexec_fn=die_with_parent)
        web.wait()
    finally:
        if web is not None and web.poll() is None:
            web.terminate()  # gunicorn's graceful stop: requests in hand are answered
            web.wait(60)
        for helper in children:
            helper.stop()


def helpers(addrport: str, embed: bool, mcp_port: int) -> list[Supervisor]:
    """The supervised commands that run beside the web server."""
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    found = []
    if embed:
        worker = [sys.executable, manage, "embed", "--watch", "--no-progress"]
        found.append(Supervisor(EMBEDDING_WORKER, worker, niceness=WORKER_NICENESS))
    # Saved searches' webhooks: a round every SAVED_SEARCH_NOTIFY_SECONDS, never in a request.
    notifier = [sys.executable, manage, "notify_saved_searches", "--watch"]
    found.append(Supervisor("saved-search-notifier", notifier, niceness=WORKER_NICENESS))
    # Sources configured in the admin sync on their schedules (docs/connectors.md).
    # A failed sync is one line of the command's on stderr, which the supervisor logs;
    # the sync's own warning of the same failure would make it two (the run keeps it).
    syncer = [sys.executable, manage, "sync", "--watch", "--no-progress"]
    found.append(Supervisor("connector-sync", syncer, niceness=WORKER_NICENESS, env={"LOG_LEVEL": "ERROR"}))
    # The trackers' webhook deliveries, processed within a second of their arrival.
    found.append(Supervisor("webhook-processor", [sys.executable, manage, "hooks", "--watch"]))
    if mcp_port:
        host = addrport.rsplit(":", 1)[0]
        command = [sys.executable, manage, "mcp", "--transport", "http", "--host", host, "--port", str(mcp_port)]
        found.append(Supervisor("mcp-http", command))
    return found


def gunicorn_command(addrport: str) -> list[str]:
    """gunicorn serving config.wsgi at `addrport`: SERVE_WORKERS processes
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
        addrport,
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
