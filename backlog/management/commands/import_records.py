import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from backlog.audit import in_surface
from backlog.imports import import_records

from ._progress import progress_bars

MAX_PROBLEMS_SHOWN = 200


class Command(BaseCommand):
    help = (
        "Import QA records from a JSON Lines file in the interchange format "
        "(FORMAT.md), upserting by key. All or nothing by default."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="a .jsonl file, or - for standard input")
        parser.add_argument(
            "--skip-invalid",
            action="store_true",
            help="write the valid records and report the invalid ones, instead of writing nothing",
        )
        parser.add_argument("--dry-run", action="store_true", help="validate and report, write nothing")
        parser.add_argument(
            "--progress",
            action="store_true",
            default=None,
            help="show progress bars even when stderr is not a terminal",
        )
        parser.add_argument("--no-progress", dest="progress", action="store_false")

    @in_surface("import", command="import_records")  # the audit trail's context of what it writes
    def handle(self, file, skip_invalid, dry_run, progress, **options):
        if file == "-":
            report = import_records(
                sys.stdin.buffer, skip_invalid=skip_invalid, dry_run=dry_run, progress=progress_bars(progress)
            )
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"{file}: no such file. Give a .jsonl path, or - to read standard input.")
            with path.open("rb") as counting:
                total = sum(1 for _ in counting)
            with path.open("rb") as lines:
                report = import_records(
                    lines,
                    skip_invalid=skip_invalid,
                    dry_run=dry_run,
                    progress=progress_bars(progress),
                    total_lines=total,
                )

        for problem in report.problems[:MAX_PROBLEMS_SHOWN]:
            self.stderr.write(str(problem))
        if len(report.problems) > MAX_PROBLEMS_SHOWN:
            self.stderr.write(f"... and {len(report.problems) - MAX_PROBLEMS_SHOWN} more problems")

        if report.problems and not skip_invalid:
            raise CommandError(report.failure(retry="run again", skip_invalid="--skip-invalid"))
        if dry_run:
            self.stdout.write(f"Dry run, nothing written. Would have {report.summary()}.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Imported: {report.summary()}."))
        if report.problems:  # only with --skip-invalid: say so in the exit status too
            raise CommandError(f"{len(report.problems)} problem(s); those records were skipped.")
