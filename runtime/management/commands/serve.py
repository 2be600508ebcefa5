"""The main job: prepare everything, say how to connect, then serve.

`handle` only prepares and prints; runtime.supervisor runs the web server
(gunicorn, or `--server runserver`) and the helpers beside it.
"""

import hashlib
import re
import secrets
import sys
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection

from runtime import supervisor
from runtime.postgres import roles


class Command(BaseCommand):
    help = "Migrate, load demo data into an empty database, ensure an admin user, print how to connect, and serve."

    def add_arguments(self, parser):
        parser.add_argument(
            "addrport",
            nargs="?",
            default=settings.SERVE_ADDRPORT,
            help="where to listen, ADDR:PORT or PORT (default %(default)s, from SERVE_ADDRPORT)",
        )
        parser.add_argument(
            "--demo-records",
            type=int,
            default=settings.DEMO_RECORDS,
            help="demo records loaded into an empty database (default %(default)s, from DEMO_RECORDS)",
        )
        parser.add_argument("--no-serve", action="store_true", help="prepare and print, but do not serve")
        parser.add_argument(
            "--no-embed",
            action="store_true",
            help="do not run the embedding worker (`embed --watch`) beside the server",
        )
        parser.add_argument(
            "--server",
            choices=["gunicorn", "runserver"],
            default=settings.SERVE_SERVER,
            help="gunicorn (SERVE_WORKERS processes x SERVE_THREADS threads) or Django's runserver "
            "(default %(default)s, from SERVE_SERVER)",
        )
        parser.add_argument(
            "--mcp-port",
            type=int,
            default=settings.SERVE_MCP_PORT,
            help="port of MCP over HTTP beside the app, 0: not served (default %(default)s, from SERVE_MCP_PORT)",
        )

    def handle(self, addrport, demo_records, no_serve, no_embed, server, mcp_port, **options):
        call_command("migrate", interactive=False, verbosity=0)
        children = {}
        if settings.EMBEDDED_DATABASE and connection.settings_dict["USER"] == "postgres":
            # Every process started below (gunicorn, the workers, MCP) runs as a role that is
            # neither superuser nor the tables' owner: no statement of theirs rewrites history.
            children["EMBEDDED_PG_USER"] = roles.grant_app_role()
        self.stdout.write(f"Database migrated, static files {collect_static()}.")
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
            supervisor.run(addrport, embed=not no_embed, server=server, mcp_port=mcp_port, env=children)

    def embedding_status(self, no_embed: bool) -> str:
        from search.service import health as index_health

        health = index_health()
        status = f"{health.embedded} of {health.documents} records embedded ({health.model})"
        if health.embedded < health.documents and not no_embed:
            status += "; the embedding worker fills in the rest while you search by keyword"
        return status

    def ensure_admin(self) -> tuple[str, str]:
        """The admin user, made if missing, and what its password is: one that
        logs in to this database, or none (a password kept for another
        database, or changed since, is never printed)."""
        User = get_user_model()
        username = settings.ADMIN_USERNAME
        kept = admin_password_file()
        admin = User.objects.filter(username=username).first()
        if admin is None:
            password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(12)
            if not settings.ADMIN_PASSWORD:
                keep_secret(kept, password)
            admin = User.objects.create_superuser(username, f"{username}@localhost", password)
        if settings.ADMIN_PASSWORD:
            if admin.check_password(settings.ADMIN_PASSWORD):
                return username, "password from ADMIN_PASSWORD"
            return username, "the password you set for it; ADMIN_PASSWORD is not it, an existing user's is left alone"
        # .local/admin-password: the one file of earlier versions, whichever database it was made for.
        for path in (kept, kept.parent.parent / "admin-password"):
            password = path.read_text().strip() if path.is_file() else ""
            if password and admin.check_password(password):
                if path != kept:
                    keep_secret(kept, password)
                return username, f"password {password} (kept in {kept.relative_to(settings.BASE_DIR)})"
        return username, "the password you set for it"

    def ensure_token(self, username: str) -> str:
        """The admin's API token (REST and MCP over HTTP, read and write), to print.
        The database keeps only its hash: the key is kept beside the admin's
        password file for this database, and a new one is made when that one
        no longer opens anything (revoked on the Tokens page or in the admin)."""
        from accounts import tokens
        from accounts.models import Scope

        password_file = admin_password_file()
        kept = password_file.parent / f"{password_file.name}.token"
        key = kept.read_text().strip() if kept.is_file() else ""
        token = tokens.check(key) if key else None
        if token is not None and token.user.get_username() == username:
            return key
        user = get_user_model().objects.get(username=username)
        _, key = tokens.issue(user, "printed by manage.py serve", Scope.WRITE)
        keep_secret(kept, key)
        return key

    def database_description(self) -> str:
        if settings.EMBEDDED_DATABASE:
            return f"embedded PostgreSQL, data in {settings.EMBEDDED_PG_DIR}"
        return "DATABASE_URL"


def keep_secret(path: Path, secret: str) -> None:
    """Write `secret` to `path`, readable by this user only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(secret + "\n")
    path.chmod(0o600)


def admin_password_file() -> Path:
    """Where the admin's generated password is kept for the database served:
    a file per database (its server, port and name), so a run against
    another database never replaces the password that logs in to this one."""
    params = connection.settings_dict
    if settings.EMBEDDED_DATABASE:
        identity = f"{settings.EMBEDDED_PG_DIR}/{params['NAME']}"
    else:
        identity = f"{params['HOST'] or 'localhost'}:{params['PORT'] or 5432}/{params['NAME']}"
    readable = re.sub(r"[^A-Za-z0-9_.]+", "-", identity).strip("-.")[-80:]
    digest = hashlib.sha256(identity.encode()).hexdigest()[:8]
    return Path(settings.BASE_DIR) / ".local" / "admin-passwords" / f"{readable}-{digest}"


def collect_static() -> str:
    """collectstatic, unless the static files are those the last one collected (each
    file's path, size and time, the app's and every installed app's): it compresses
    every file again, 1.4 s of each start on 2 cores. What was done, said."""
    root = Path(settings.STATIC_ROOT)
    seen = hashlib.sha256(repr(settings.STORAGES["staticfiles"]).encode())
    ignored = apps.get_app_config("staticfiles").ignore_patterns  # what collectstatic leaves out
    for finder in finders.get_finders():
        for path, storage in sorted(finder.list(ignored), key=lambda found: found[0]):
            stat = Path(storage.path(path)).stat()
            seen.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    stamp, fingerprint = root / ".collected", seen.hexdigest()
    manifest = getattr(staticfiles_storage, "manifest_name", None)  # a manifest storage's file map
    if stamp.exists() and stamp.read_text() == fingerprint and (not manifest or staticfiles_storage.exists(manifest)):
        return "unchanged"
    call_command("collectstatic", interactive=False, verbosity=0)
    stamp.write_text(fingerprint)
    return "collected"
