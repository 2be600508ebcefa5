"""The main job: prepare everything, say how to connect, then serve.

`handle` only prepares and prints; `inner_run` serves. The web app runs
under gunicorn (sync Django on threads in a few worker processes: the
ORM, the search SQL and the embedding model are all blocking calls, which
an ASGI server would only hand to a thread pool again), as a child
process beside supervised ones: the embedding worker, MCP over
streamable HTTP (`mcp --transport http`, the SDK's own ASGI app under
uvicorn), the saved searches' webhook sender (`notify_saved_searches
--watch`) and the sources' scheduled syncs (`sync --watch`). `--server runserver` keeps Django's development server.
"""

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Migrate, load demo data into an empty database, ensure an admin user, print how to connect, and serve."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default=os.environ.get("SERVE_ADDRPORT", "127.0.0.1:8000"))
        parser.add_argument("--demo-records", type=int, default=int(os.environ.get("DEMO_RECORDS", "5000")))
        parser.add_argument("--no-serve", action="store_true", help="prepare and print, but do not serve")
        parser.add_argument(
            "--no-embed",
            action="store_true",
            help="do not run the embedding worker (`embed --watch`) beside the server",
        )
        parser.add_argument(
            "--server",
            choices=["gunicorn", "runserver"],
            default=os.environ.get("SERVE_SERVER", "gunicorn"),
            help="gunicorn (default; SERVE_WORKERS processes x SERVE_THREADS threads) or Django's runserver",
        )
        parser.add_argument(
            "--mcp-port",
            type=int,
            default=int(os.environ.get("SERVE_MCP_PORT", "8001")),
            help="port of MCP over HTTP, served beside the app (0: not served)",
        )

    def handle(self, addrport, demo_records, no_serve, no_embed, server, mcp_port, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write("Database migrated, static files collected.")
        if demo_records:
            call_command("seed_demo", records=demo_records, if_empty=True, stdout=self.stdout)
        username, password_note = self.ensure_admin()
        if ":" not in addrport:
            addrport = f"127.0.0.1:{addrport}"
        base = f"http://{addrport}"
        host = addrport.rsplit(":", 1)[0]
        token = self.ensure_token(username)
        python, manage = sys.executable, Path(settings.BASE_DIR) / "manage.py"
        self.stdout.write(
            "\n"
            f"  Search:    {base}/search/   (staff UI; dashboard at {base}/dashboard/)\n"
            f"  Admin:     {base}/admin/   (user {username}, {password_note})\n"
            f"  REST API:  {base}/api/search?query=renewal   (Swagger UI at {base}/api/docs)\n"
            f"  Token:     {token}   ({username}'s token for REST and MCP over HTTP; revoke it in the admin)\n"
            f"  Database:  {self.database_description()}\n"
            f"  Vectors:   {self.embedding_status(no_embed)}\n"
            "\n"
            "  Connect an MCP client (details in docs/mcp.md):\n"
            f"    stdio:   {python} {manage} mcp\n"
            f"             e.g. claude mcp add qa-search -- {python} {manage} mcp\n"
            + (
                f"    HTTP:    http://{host}:{mcp_port}/mcp (served now) with header Authorization: Bearer {token}\n"
                if mcp_port and not no_serve
                else f"    HTTP:    {python} {manage} mcp --transport http --port 8001\n"
                f"             then http://127.0.0.1:8001/mcp with header Authorization: Bearer {token}\n"
            )
            + f"  Health:    {base}/healthz (alive), {base}/readyz (database and index)\n"
        )
        if not no_serve:
            self.inner_run(addrport, embed=not no_embed, server=server, mcp_port=mcp_port)

    def inner_run(self, addrport: str, embed: bool, server: str, mcp_port: int):
        from django.db import connections

        from search.health import EMBEDDING_WORKER
        from search.worker import WORKER_NICENESS, Supervisor, die_with_parent

        # Stopped by SIGTERM (a service manager, `docker stop`), exit as on
        # Ctrl-C: the children are stopped and the embedded database detached.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        # And when whatever started us dies (`make run` stopped by its PID: make
        # passes no signal on), the kernel sends that SIGTERM too.
        parent = os.getppid()
        die_with_parent()
        if os.getppid() != parent:  # it died before we asked
            sys.exit(128 + signal.SIGTERM)
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        helpers = []
        if embed:
            # Each runs beside the server, is started again when it dies
            # (search/worker.py), and stops with the server.
            worker = [sys.executable, manage, "embed", "--watch", "--no-progress"]
            helpers.append(Supervisor(EMBEDDING_WORKER, worker, niceness=WORKER_NICENESS))
        # Saved searches' webhooks: a round every SAVED_SEARCH_NOTIFY_SECONDS, never in a request.
        notifier = [sys.executable, manage, "notify_saved_searches", "--watch"]
        helpers.append(Supervisor("saved-search-notifier", notifier, niceness=WORKER_NICENESS))
        # Sources configured in the admin sync on their schedules (docs/connectors.md).
        syncer = [sys.executable, manage, "sync", "--watch", "--no-progress"]
        helpers.append(Supervisor("connector-sync", syncer, niceness=WORKER_NICENESS))
        if mcp_port:
            host = addrport.rsplit(":", 1)[0]
            command = [sys.executable, manage, "mcp", "--transport", "http", "--host", host, "--port", str(mcp_port)]
            helpers.append(Supervisor("mcp-http", command))
        for helper in helpers:
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
            for helper in helpers:
                helper.stop()

    def embedding_status(self, no_embed: bool) -> str:
        from search.service import health as index_health

        health = index_health()
        status = f"{health.embedded} of {health.documents} records embedded ({health.model})"
        if health.embedded < health.documents and not no_embed:
            status += "; the embedding worker fills in the rest while you search by keyword"
        return status

    def ensure_admin(self) -> tuple[str, str]:
        User = get_user_model()
        username = os.environ.get("ADMIN_USERNAME", "admin")
        password = os.environ.get("ADMIN_PASSWORD")
        password_file = Path(settings.BASE_DIR) / ".local" / "admin-password"
        if not User.objects.filter(username=username).exists():
            if not password:
                password = secrets.token_urlsafe(12)
                password_file.parent.mkdir(exist_ok=True)
                password_file.write_text(password + "\n")
                password_file.chmod(0o600)
            User.objects.create_superuser(username, f"{username}@localhost", password)
        if os.environ.get("ADMIN_PASSWORD"):
            return username, "password from ADMIN_PASSWORD"
        if password_file.exists():
            return username, f"password {password_file.read_text().strip()} (kept in .local/admin-password)"
        return username, "the password you set for it"

    def ensure_token(self, username: str) -> str:
        """The admin's API token (REST and MCP over HTTP); revoke it in the admin."""
        from rest_framework.authtoken.models import Token

        return Token.objects.get_or_create(user=get_user_model().objects.get(username=username))[0].key

    def database_description(self) -> str:
        if os.environ.get("DATABASE_URL"):
            return "DATABASE_URL"
        return f"embedded PostgreSQL, data in {settings.EMBEDDED_PG_DIR}"


def gunicorn_command(addrport: str) -> list[str]:
    """gunicorn serving config.wsgi at `addrport`: SERVE_WORKERS processes
    (default: two a core) of SERVE_THREADS threads (default 4), each request
    at most SERVE_TIMEOUT seconds. The request line is not limited here:
    Django answers one over REQUEST_LINE_MAX_BYTES with a 414 in JSON
    (config.middleware), where gunicorn would answer in plain text."""
    workers = os.environ.get("SERVE_WORKERS") or str(2 * (os.cpu_count() or 1))
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
        workers,
        "--threads",
        os.environ.get("SERVE_THREADS", "4"),
        "--timeout",
        os.environ.get("SERVE_TIMEOUT", "60"),
        "--graceful-timeout",
        "30",
        "--limit-request-line",
        "0",
        "--access-logfile",
        "-" if os.environ.get("SERVE_ACCESS_LOG") else "/dev/null",
        "--chdir",
        str(settings.BASE_DIR),
        # gunicorn's control socket is one path per user (~/.gunicorn/gunicorn.ctl):
        # a second instance on the machine would take it over, and stopping
        # either would delete the other's. serve stops gunicorn by signal.
        "--no-control-socket",
    ]
