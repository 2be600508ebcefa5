from itertools import islice

from django.core.management.base import BaseCommand, CommandError

from backlog.audit import in_surface
from backlog.demo import generate
from backlog.imports import import_records
from backlog.interchange import dumps
from backlog.models import RECORD_MODELS

from ._progress import progress_bars, write_jsonl


class Command(BaseCommand):
    help = (
        "Generate realistic demo QA records (products, features, tests, bugs), the same "
        "for the same --seed, and import them; or write them as JSON Lines with --output."
    )

    def add_arguments(self, parser):
        parser.add_argument("--records", type=int, default=5000, help="how many records in all (default 5000)")
        parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        parser.add_argument("--output", help="write JSON Lines to this file (- for stdout) instead of the database")
        parser.add_argument("--if-empty", action="store_true", help="do nothing if the database holds records already")
        parser.add_argument("--progress", action="store_true", default=None)
        parser.add_argument("--no-progress", dest="progress", action="store_false")

    @in_surface("seed_demo", command="seed_demo")  # the audit trail's context of what it writes
    def handle(self, records, seed, output, if_empty, progress, **options):
        if records < 1:
            raise CommandError("--records must be at least 1.")
        bars = progress_bars(progress)
        if output:
            write_jsonl(self, output, generate(records, seed), bars("generating", records))
            return
        if if_empty and any(model.objects.exists() for model in RECORD_MODELS.values()):
            self.stdout.write("The database already holds records; no demo data loaded.")
            return
        lines = (dumps(record) for record in generate(records, seed))
        report = import_records(lines, progress=bars, total_lines=records)
        if report.problems:  # a bug in the generator, not in the user's input
            raise CommandError("demo data failed validation:\n" + "\n".join(map(str, islice(report.problems, 20))))
        self.stdout.write(self.style.SUCCESS(f"Demo data (seed {seed}): {report.summary()}."))
