"""Fill in missing and stale embeddings; with --watch, keep doing it.

`handle` parses and installs signal handlers; the loop itself is short and
exits cleanly on SIGTERM/SIGINT, after the batch in hand is stored.
"""

import signal
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from backlog.management.commands._progress import progress_bars
from search.indexing.embeddings import get_provider
from search.indexing.provider import EmbeddingError
from search.indexing.vectors import embed_pending, pending_count


class Command(BaseCommand):
    help = "Compute embeddings for records that have none or an outdated one (resumable)."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument("--watch", action="store_true", help="keep running and embed new writes as they come")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between checks with --watch")
        parser.add_argument("--progress", action="store_true", default=None)
        parser.add_argument("--no-progress", dest="progress", action="store_false")

    def handle(self, batch_size, watch, interval, progress, **options):
        self.stopping = False
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.stop)
        provider = get_provider()
        self.stderr.write(f"Embedding model: {provider.model_id}; {pending_count()} record(s) to embed.")
        bars = progress_bars(progress)
        while True:
            close_old_connections()
            try:
                written = embed_pending(batch_size=batch_size, progress=bars, should_stop=lambda: self.stopping)
            except EmbeddingError as exc:
                raise CommandError(str(exc)) from exc
            if written:
                self.stdout.write(f"Embedded {written} record(s).")
            if not watch or self.stopping:
                break
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline and not self.stopping:
                time.sleep(0.1)
        self.stdout.write(f"{pending_count()} record(s) still to embed.")

    def stop(self, signum, frame):
        self.stopping = True
