"""`manage.py triage FILE --product KEY`: triage a JUnit report and print the triage as JSON.

The same call as POST /api/runs and the triage_run tool (triage.service), so
the same file prints the same triage; the run is stored as theirs are.
`--markdown` prints it as a pull request comment (triage.summary), and
`--fail-on-new` exits with NEW_FAILURES when any cause is new: a CI job's gate.
"""

import json
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from search.contract import SearchError
from triage import service, summary

NEW_FAILURES = 3  # the exit status of --fail-on-new when a cause is new (1: the command failed)


class Command(BaseCommand):
    help = "Triage a JUnit XML report (`-` reads standard input): each failure's cause, its likely known bugs, or new."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the JUnit XML report, or - for standard input")
        parser.add_argument("--product", required=True, help="the key of the product the run tested")
        parser.add_argument("--user", help="triage as this user (what they may see); default: every product")
        parser.add_argument("--max-tokens", type=int, help="whole groups within that many tokens")
        parser.add_argument("--commit", help="the commit the run tested (else the report's commit property)")
        parser.add_argument("--markdown", action="store_true", help="print a summary for a pull request comment")
        parser.add_argument(
            "--site", default="http://127.0.0.1:8000", help="where the summary's links point (this service's URL)"
        )
        parser.add_argument(
            "--fail-on-new", action="store_true", help=f"exit with status {NEW_FAILURES} when any cause is new"
        )

    def handle(self, *args, file, product, user=None, max_tokens=None, markdown=False, fail_on_new=False, **options):
        acting = None
        if user:
            acting = get_user_model().objects.filter(username=user, is_active=True).first()
            if acting is None:
                raise CommandError(f"no active user {user!r}")
        try:
            data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        except OSError as error:
            raise CommandError(f"{file}: {error.strerror or error}") from None
        params = {"product": product, "max_tokens": max_tokens, "commit": options.get("commit")}
        try:
            answer = service.call(params, acting, data=data, name="" if file == "-" else Path(file).name)
        except SearchError as error:
            raise CommandError(str(error)) from None
        if markdown:
            self.stdout.write(summary.markdown(answer, options["site"]), ending="")
        else:
            self.stdout.write(json.dumps(answer, ensure_ascii=False, indent=2))
        if fail_on_new and any(group["verdict"] == "new" for group in answer["groups"]):
            self.stdout.flush()
            sys.exit(NEW_FAILURES)
