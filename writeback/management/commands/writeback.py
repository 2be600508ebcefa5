"""`manage.py writeback`: send the writes to the trackers that wait (writeback/worker.py).

manage.py writeback            send what is due, then stop
manage.py writeback --watch    keep sending until SIGTERM (serve runs it)
"""

from django.conf import settings
from django.core.management.base import BaseCommand

from search.indexing.worker import rounds as watch_rounds
from writeback import worker


class Command(BaseCommand):
    help = "Send the writes to the teams' trackers that wait (docs/connectors.md, Writing back)."

    def add_arguments(self, parser):
        parser.add_argument("--watch", action="store_true", help="keep sending new writes until stopped")

    def handle(self, *args, watch: bool = False, **options):
        if not watch:
            self.stdout.write(f"{worker.send_due()} writes tried")
            return
        watch_rounds(
            lambda: worker.send_due(limit=100), settings.WRITEBACK_POLL_SECONDS, "writing back paused", self.stderr
        )
