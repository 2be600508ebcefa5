"""`manage.py sync`: one sync of a source, every due source, or all of them on their schedules.

    JIRA_EMAIL=... JIRA_API_TOKEN=... manage.py sync jira --url https://example.atlassian.net --project HADOOP
    GITHUB_TOKEN=... manage.py sync github --repo mozilla/seamonkey
    manage.py sync "jira:HADOOP"          a source configured in the admin, by name
    manage.py sync --due                  every source whose schedule says so
    manage.py sync --watch                the same every minute until SIGTERM (serve runs it)

A source given by kind and project is made on its first sync (so the next
one is incremental), after its credentials and project were checked:
nothing is written when they are wrong, or when the product it would feed
exists and was not named with --product.

Under --watch each due source syncs in a thread of its own (SYNC_WORKERS at
once): a source stuck on a slow upstream holds its own thread until its
deadline (SYNC_RUN_DEADLINE), never the others' turn.
"""

import logging
import os
import signal
import sys
import threading
import time

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from backlog.management.commands._progress import progress_bars
from connectors import sync
from connectors.base import SyncError
from connectors.http import origin, without_credentials
from connectors.models import Source
from connectors.ownership import claim_product
from connectors.sources import KINDS, connector_class

logger = logging.getLogger(__name__)

WATCH_SECONDS = 60
DEFAULT_URLS = {"github": "https://api.github.com", "testio": "https://api.test.io/customer/v2"}


class Command(BaseCommand):
    help = "Sync records from Jira, GitHub Issues, TestRail or TestIO (docs/connectors.md)."

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.syncing: dict[int, threading.Thread] = {}  # under --watch: the syncs running, by source

    def add_arguments(self, parser):
        parser.add_argument("source", nargs="?", help=f"a kind ({', '.join(KINDS)}) or a configured source's name")
        parser.add_argument("--url", help="the site (Jira, TestRail) or API base (GitHub Enterprise, TestIO)")
        parser.add_argument("--project", help="Jira project key, TestRail project id, TestIO product id")
        parser.add_argument("--repo", help="GitHub repository, OWNER/NAME")
        parser.add_argument("--product", help="our product key (default: from the project or repository)")
        parser.add_argument("--jql", help="Jira: JQL ANDed to the project's, like 'issuetype = Bug'")
        parser.add_argument("--labels", help="GitHub: only issues with these labels, comma-separated")
        parser.add_argument("--team", action="append", default=[], help="a group who sees the product (repeat)")
        parser.add_argument("--full", action="store_true", help="read everything, not only what changed")
        parser.add_argument(
            "--sweep",
            dest="sweep",
            action="store_true",
            default=None,
            help="look for deletions now (default: every time for Jira and GitHub, when due for TestRail and TestIO)",
        )
        parser.add_argument("--no-sweep", dest="sweep", action="store_false", help="no deletion sweep this time")
        parser.add_argument(
            "--allow-mass-delete",
            action="store_true",
            help="let the sweep delete more than SYNC_SWEEP_MAX_SHARE of the source's records",
        )
        parser.add_argument(
            "--register-webhook",
            metavar="URL",
            help="GitHub: create or update the repository's webhook to URL (this service's /hooks/github), "
            "signed with the secret in the source's webhook variable, then sync",
        )
        parser.add_argument("--due", action="store_true", help="sync every configured source that is due")
        parser.add_argument("--watch", action="store_true", help="sync due sources every minute until stopped")
        parser.add_argument("--progress", action="store_true", default=None, help="progress bars even off a terminal")
        parser.add_argument("--no-progress", dest="progress", action="store_false")

    def handle(self, *args, **options):
        if Source._meta.db_table not in connection.introspection.table_names():
            raise CommandError("the database has no connectors tables yet: run manage.py migrate first")
        if options["watch"]:
            return self.watch()
        if options["due"]:
            return self.due(options)
        if not options["source"]:
            raise CommandError("name a source: a kind (jira, github, testrail, testio) or a configured source's name")
        source, connector, product = self.prepare(options)
        if options["register_webhook"]:
            connector = self.register_webhook(source, connector, options["register_webhook"])
        sweep = options["sweep"]
        if sweep is None and connector_class(source.kind).sweep_is_cheap:
            sweep = True  # by hand, a cheap sweep every time; a costly one when due
        try:
            result = sync.run(
                source,
                connector=connector,
                product=product,
                sweep=sweep,
                full=options["full"],
                allow_mass_delete=options["allow_mass_delete"],
                progress=progress_bars(options["progress"]),
            )
        except SyncError as exc:
            raise CommandError(f"{source.name}: {exc}") from None
        self.stdout.write(f"{source.name}: {result.summary()} ({result.requests} requests)")
        for error in result.errors:
            self.stderr.write(f"  {error}")

    def prepare(self, options):
        """The source to sync; a new one is checked upstream and saved only once its check passed
        (a known one is checked by its run, which is stored with the cause when it fails)."""
        name = options["source"]
        if name not in KINDS:
            source = Source.objects.filter(name=name).first()
            if source is None:
                known = ", ".join(Source.objects.values_list("name", flat=True)) or "none configured yet"
                raise CommandError(f"no source {name!r}: give a kind ({', '.join(KINDS)}) or a name ({known})")
            return source, None, None
        kind = name
        project = options["repo"] if kind == "github" else options["project"]
        if not project:
            raise CommandError("--repo OWNER/NAME is needed" if kind == "github" else "--project is needed")
        url = self.site(kind, options["url"])
        cls = connector_class(kind)
        source = Source.objects.filter(kind=kind, url=url, project=project).first() or Source(
            kind=kind,
            url=url,
            project=project,
            name=self.new_name(kind, project, url),
            user_env=cls.user_env,
            token_env=cls.token_env,
            schedule_minutes=0,
            sweep_minutes=cls.sweep_minutes,
        )
        for option, field in (("product", "product_key"), ("jql", "query"), ("labels", "query")):
            if options.get(option) is not None:
                setattr(source, field, options[option])
        teams = list(Group.objects.filter(name__in=options["team"]))
        if missing := set(options["team"]) - {team.name for team in teams}:
            raise CommandError(f"no group {', '.join(sorted(missing))}: make the team in the admin first")
        if source.pk is not None and not teams:
            source.save()  # the options given again; its run checks upstream, and is stored whatever it meets
            return source, None, None
        try:
            connector = sync.connect(source)
            product = connector.check()
            ours = claim_product(source, product)
        except SyncError as exc:
            raise CommandError(f"{source.name}: {exc}; nothing was written") from None
        except Exception as exc:  # an answer no check foresaw: one line, not a traceback
            logger.exception("the first check of %s failed", source.name)
            raise CommandError(
                f"{source.name}: upstream sent what could not be read ({type(exc).__name__}); nothing was written"
            ) from None
        if teams and not ours:
            raise CommandError(
                f"--team sets who sees a product this source makes; {product.key} existed before it and keeps "
                "its own teams (change them in the admin, Products). Nothing was written"
            )
        source.save()
        if teams:
            source.teams.add(*teams)
        return source, connector, product

    @staticmethod
    def site(kind: str, given: str | None) -> str:
        """The --url given (or the kind's default), without a trailing slash; refused
        when missing, holding a user or password, or not an http(s) address."""
        url = (given or DEFAULT_URLS.get(kind) or "").strip().rstrip("/")
        if not url:
            raise CommandError(f"--url is needed for {kind}, like https://example.atlassian.net")
        if url != without_credentials(url):
            raise CommandError(
                f"--url holds a user or password: give {without_credentials(url)} and put them in the "
                "environment variables docs/connectors.md names (nothing was written)"
            )
        scheme, host, _ = origin(url)
        if scheme not in ("http", "https") or not host:
            raise CommandError(f"--url {url!r} is not an http(s) address: give it whole, like https://{url}")
        return url

    def register_webhook(self, source: Source, connector, url: str):
        """Create or update the source's webhook upstream (GitHub); the connector, for the sync after."""
        if source.kind != "github":
            raise CommandError(
                f"--register-webhook is for GitHub; a {source.get_kind_display()} webhook is made in its admin "
                "pages (docs/connectors.md, Webhooks, says what to fill in)"
            )
        scheme, host, _ = origin(url)
        if scheme not in ("http", "https") or not host or not url.rstrip("/").endswith("/hooks/github"):
            raise CommandError(f"--register-webhook {url!r}: give this service's address ending in /hooks/github")
        secret = os.environ.get(source.hook_secret_variable, "")
        if len(secret) < 16:
            raise CommandError(
                f"{source.hook_secret_variable} is {'not set' if not secret else 'shorter than 16 characters'}: "
                "put a long random secret in it (python -c 'import secrets; print(secrets.token_hex(32))'), "
                "here and in the service's environment; nothing was changed"
            )
        connector = connector or sync.connect(source)
        try:
            done = connector.register_hook(url, secret)
        except SyncError as exc:
            raise CommandError(f"{source.name}: {exc}") from None
        self.stdout.write(f"{source.name}: webhook to {url} {done} (events: {', '.join(connector.HOOK_EVENTS)})")
        return connector

    @staticmethod
    def new_name(kind: str, project: str, url: str) -> str:
        """`kind:project` (with the site but for github.com), made unique: the same
        repository on two API hosts is two sources."""
        host = url.split("://")[-1]
        name = f"{kind}:{project}" + ("" if kind == "github" else f"@{host}")
        if Source.objects.filter(name=name[:200]).exists():
            name = f"{kind}:{project}@{host}"
        return name[:200]

    def due(self, options) -> None:
        failed = 0
        for source in Source.objects.filter(enabled=True):
            if not source.due():
                continue
            try:
                result = sync.run(source, progress=progress_bars(options["progress"]))
                self.stdout.write(f"{source.name}: {result.summary()}")
            except SyncError as exc:
                failed += 1
                self.stderr.write(f"{source.name}: {exc}")
        if failed:
            raise CommandError(f"{failed} source(s) failed; the dashboard lists their errors")

    def watch(self) -> None:
        """Sync due sources every WATCH_SECONDS until SIGTERM or Ctrl-C, each in
        a thread of its own. A stop in the middle of a page rolls the page
        back; the next sync resumes there."""
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        try:
            while True:
                close_old_connections()
                try:
                    self.round()
                except DatabaseError as exc:  # the database restarting: the next round tries again
                    self.stderr.write(f"sync round skipped, the database failed: {exc.__class__.__name__}")
                close_old_connections()
                time.sleep(WATCH_SECONDS)
        except KeyboardInterrupt:
            pass

    def round(self) -> None:
        """Start a sync of every due source not syncing already, up to SYNC_WORKERS at once."""
        syncing = self.syncing
        for pk in [pk for pk, thread in syncing.items() if not thread.is_alive()]:
            del syncing[pk]
        for source in Source.objects.filter(enabled=True).order_by("pk"):
            if len(syncing) >= max(settings.SYNC_WORKERS, 1):
                break
            if source.pk not in syncing and source.due(timezone.now()):
                thread = threading.Thread(target=self.sync_one, args=(source,), name=f"sync {source}", daemon=True)
                syncing[source.pk] = thread
                thread.start()

    def sync_one(self, source: Source) -> None:
        """One scheduled sync, in its own thread and database connection; nothing it
        meets ends the worker (the run is stored with its cause)."""
        try:
            sync.run(source)
        except SyncError as exc:
            self.stderr.write(f"{source.name}: {exc}")
        except Exception:
            logger.exception("sync of %s failed", source.name)
            self.stderr.write(f"{source.name}: the sync failed; the log says why")
        finally:
            connection.close()

    def wait(self) -> None:
        """Until the syncs started are done (tests, and `--due`-like callers)."""
        for thread in list(self.syncing.values()):
            thread.join()
