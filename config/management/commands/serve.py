"""The main job: prepare everything, say how to connect, then serve.

`handle` only prepares and prints; `inner_run` hands over to Django's
runserver, as runserver itself splits parsing from serving.
"""

import os
import secrets
import signal
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

    def handle(self, addrport, demo_records, no_serve, no_embed, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        if demo_records:
            call_command("seed_demo", records=demo_records, if_empty=True, stdout=self.stdout)
        username, password_note = self.ensure_admin()
        base = f"http://{addrport if ':' in addrport else '127.0.0.1:' + addrport}"
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
            f"    HTTP:    {python} {manage} mcp --transport http --port 8001\n"
            f"             then http://127.0.0.1:8001/mcp with header Authorization: Bearer {token}\n"
        )
        if not no_serve:
            self.inner_run(addrport, embed=not no_embed)

    def inner_run(self, addrport, embed: bool):
        from search.health import EMBEDDING_WORKER
        from search.worker import Supervisor

        # Stopped by SIGTERM (a service manager, `docker stop`), exit as on
        # Ctrl-C: the worker is stopped and the embedded database detached.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        worker = None
        if embed:
            # The embedding worker runs beside the server, is started again
            # when it dies (search/worker.py), and stops with the server.
            command = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "embed", "--watch", "--no-progress"]
            worker = Supervisor(EMBEDDING_WORKER, command)
            worker.start()
        try:
            # insecure_serving: static files from the app folders with DEBUG off
            # too (runserver serves them only in debug mode otherwise).
            call_command("runserver", addrport, use_reloader=False, insecure_serving=True)
        finally:
            if worker is not None:
                worker.stop()

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
