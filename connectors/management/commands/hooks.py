"""`manage.py hooks`: process the webhook deliveries taken (connectors/hooks/).

manage.py hooks            process what waits, then stop
manage.py hooks --watch    keep processing until SIGTERM (serve runs it)
"""

import time

from django.conf import settings
from django.core.management.base import BaseCommand

from connectors import hooks
from search.indexing.worker import rounds as watch_rounds


class Command(BaseCommand):
    help = "Process the trackers' webhook deliveries (docs/connectors.md, Webhooks)."

    def add_arguments(self, parser):
        parser.add_argument("--watch", action="store_true", help="keep processing new deliveries until stopped")

    def handle(self, *args, watch: bool = False, **options):
        if not watch:
            self.stdout.write(f"{hooks.process_pending()} deliveries processed")
            return
        connectors = hooks.Connectors()  # kept across rounds: a burst does not check the project each time
        pruned_at = 0.0

        def work() -> int:
            nonlocal pruned_at
            if time.monotonic() - pruned_at > 3600:  # processed deliveries past WEBHOOK_KEEP_DAYS
                hooks.prune()
                pruned_at = time.monotonic()
            return hooks.process_pending(limit=100, connectors=connectors)

        watch_rounds(work, settings.WEBHOOK_POLL_SECONDS, "webhook processing paused", self.stderr)
