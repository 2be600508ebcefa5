"""`manage.py sync`: one sync of a source, every due source, or all of them on their schedules.

    JIRA_EMAIL=... JIRA_API_TOKEN=... manage.py sync jira --url https://example.atlassian.net --project HADOOP
    GITHUB_TOKEN=... manage.py sync github --repo mozilla/seamonkey
    manage.py sync "jira:HADOOP"          a source configured in the admin, by name
    manage.py sync --due                  every source whose schedule says so
    manage.py sync --watch                the same every minute until SIGTERM (serve runs it)

A source given by kind and project is made on its first sync (so the next
one is incremental), after its credentials and project were checked:
nothing is written when they are wrong.
"""

import signal
import sys
import time

from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from backlog.management.commands._progress import progress_bars
from connectors import sync
from connectors.base import SyncError
from connectors.models import Source
from connectors.sources import KINDS, connector_class

WATCH_SECONDS = 60
DEFAULT_URLS = {"github": "https://api.github.com", "testio": "https://api.test.io/customer/v2"}


class Command(BaseCommand):
    help = "Sync records from Jira, GitHub Issues, TestRail or TestIO (docs/connectors.md)."

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
            "--no-sweep", dest="sweep", action="store_false", default=True, help="do not look for deletions this time"
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
        try:
            result = sync.run(
                source,
                connector=connector,
                product=product,
                sweep=options["sweep"],
                full=options["full"],
                progress=progress_bars(options["progress"]),
            )
        except SyncError as exc:
            raise CommandError(f"{source.name}: {exc}") from None
        self.stdout.write(f"{source.name}: {result.summary()} ({result.requests} requests)")
        for error in result.errors:
            self.stderr.write(f"  {error}")

    def prepare(self, options):
        """The source to sync, checked upstream; a new one is saved only once its check passed."""
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
        url = (options["url"] or DEFAULT_URLS.get(kind) or "").rstrip("/")
        if not url:
            raise CommandError(f"--url is needed for {kind}, like https://example.atlassian.net")
        cls = connector_class(kind)
        source = Source.objects.filter(kind=kind, url=url, project=project).first() or Source(
            kind=kind,
            url=url,
            project=project,
            name=f"{kind}:{project}" + ("" if kind == "github" else f"@{url.split('://')[-1]}"),
            user_env=cls.user_env,
            token_env=cls.token_env,
            schedule_minutes=0,
        )
        for option, field in (("product", "product_key"), ("jql", "query"), ("labels", "query")):
            if options.get(option) is not None:
                setattr(source, field, options[option])
        teams = list(Group.objects.filter(name__in=options["team"]))
        if missing := set(options["team"]) - {team.name for team in teams}:
            raise CommandError(f"no group {', '.join(sorted(missing))}: make the team in the admin first")
        try:
            connector = sync.connect(source)
            product = connector.check()
        except SyncError as exc:
            raise CommandError(f"{source.name}: {exc}; nothing was written") from None
        source.save()
        if teams:
            source.teams.add(*teams)
        return source, connector, product

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
        """Sync due sources every WATCH_SECONDS until SIGTERM or Ctrl-C. A stop
        in the middle of a page rolls the page back; the next sync resumes there."""
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
        for source in Source.objects.filter(enabled=True).order_by("pk"):
            if source.due(timezone.now()):
                try:
                    sync.run(source)
                except SyncError as exc:
                    self.stderr.write(f"{source.name}: {exc}")
