"""`manage.py writeback`: send the writes to the trackers that wait (writeback/worker.py).

manage.py writeback            send what is due, then stop
manage.py writeback --watch    keep sending until SIGTERM (serve runs it)
"""

import signal
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, close_old_connections

from writeback import worker


class Command(BaseCommand):
    help = "Send the writes to the teams' trackers that wait (docs/connectors.md, Writing back)."

    def add_arguments(self, parser):
        parser.add_argument("--watch", action="store_true", help="keep sending new writes until stopped")

    def handle(self, *args, watch: bool = False, **options):
        if not watch:
            self.stdout.write(f"{worker.send_due()} writes tried")
            return
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        try:
            while True:
                try:
                    if not worker.send_due(limit=100):
                        time.sleep(settings.WRITEBACK_POLL_SECONDS)
                except DatabaseError as exc:  # the database restarting: look again in a moment
                    self.stderr.write(f"writing back paused, the database failed: {exc.__class__.__name__}")
                    close_old_connections()
                    time.sleep(5)
        except KeyboardInterrupt:
            pass
