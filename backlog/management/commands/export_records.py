from django.core.management.base import BaseCommand

from backlog.exports import count_records, export_records
from backlog.interchange import KIND_ORDER
from backlog.models import RECORD_MODELS

from ._progress import progress_bars, write_jsonl


class Command(BaseCommand):
    help = "Export QA records as JSON Lines in the interchange format (FORMAT.md)."

    def add_arguments(self, parser):
        parser.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")
        parser.add_argument("--kind", action="append", choices=list(RECORD_MODELS), help="only this kind (repeatable)")
        parser.add_argument("--product", action="append", help="only records of this product key (repeatable)")
        parser.add_argument("--progress", action="store_true", default=None)
        parser.add_argument("--no-progress", dest="progress", action="store_false")

    def handle(self, output, kind, product, progress, **options):
        kinds = kind or list(KIND_ORDER)
        bar = progress_bars(progress)("exporting", count_records(kinds, product))
        write_jsonl(self, output, export_records(kinds, product), bar)
