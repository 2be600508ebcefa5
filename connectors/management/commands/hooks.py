"""`manage.py hooks`: process the webhook deliveries taken (connectors/hooks/).

manage.py hooks            process what waits, then stop
manage.py hooks --watch    keep processing until SIGTERM (serve runs it)
"""

import signal
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from connectors import hooks


class Command(BaseCommand):
    help = "Process the trackers' webhook deliveries (docs/connectors.md, Webhooks)."

    def add_arguments(self, parser):
        parser.add_argument("--watch", action="store_true", help="keep processing new deliveries until stopped")

    def handle(self, *args, watch: bool = False, **options):
        if not watch:
            self.stdout.write(f"{hooks.process_pending()} deliveries processed")
            return
        connectors = hooks.Connectors()  # kept across rounds: a burst does not check the project each time
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        pruned_at = 0.0
        try:
            while True:
                try:
                    if time.monotonic() - pruned_at > 3600:  # processed deliveries past WEBHOOK_KEEP_DAYS
                        hooks.prune()
                        pruned_at = time.monotonic()
                    if not hooks.process_pending(limit=100, connectors=connectors):
                        time.sleep(settings.WEBHOOK_POLL_SECONDS)
                except DatabaseError as exc:  # the database restarting: look again in a moment
                    self.stderr.write(f"webhook processing paused, the database failed: {exc.__class__.__name__}")
                    close_old_connections()
                    time.sleep(5)
        except KeyboardInterrupt:
            pass
