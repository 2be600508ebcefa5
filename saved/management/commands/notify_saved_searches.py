"""Send saved searches' new matches to their webhooks; with --watch, keep doing it.

`handle` parses and installs signal handlers; each round is saved.webhooks.notify_all,
and the loop exits cleanly on SIGTERM/SIGINT between rounds.
"""

import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from saved.webhooks import notify_all


class Command(BaseCommand):
    help = "POST the new matches of every saved search that has a webhook (signed JSON, bounded retries)."

    def add_arguments(self, parser):
        parser.add_argument("--watch", action="store_true", help="keep running, a round every --interval seconds")
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.SAVED_SEARCH_NOTIFY_SECONDS,
            help="seconds between rounds with --watch (SAVED_SEARCH_NOTIFY_SECONDS)",
        )

    def handle(self, watch, interval, **options):
        self.stopping = False
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.stop)
        while True:
            if watch:  # a long-lived process: drop a connection the database closed meanwhile
                close_old_connections()
            try:
                self.round()
            except DatabaseError as exc:
                if not watch:
                    raise
                self.stderr.write(f"The database could not be read ({exc}); trying again in {interval:g} s.")
            if not watch or self.stopping:
                break
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline and not self.stopping:
                time.sleep(0.1)

    def round(self) -> None:
        for outcome in notify_all():
            name = f"saved search {outcome.saved.pk} ({outcome.saved.name})"
            if outcome.error:
                self.stderr.write(f"{name}: not delivered: {outcome.error}")
            elif outcome.sent:
                self.stdout.write(f"{name}: sent {outcome.sent} new match(es).")

    def stop(self, signum, frame):
        self.stopping = True
