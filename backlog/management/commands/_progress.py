"""Helpers of the long commands: progress bars (tqdm on stderr, quiet when
not a terminal unless asked, so logs and pipes stay clean) and writing
records as JSON Lines."""

import sys
from collections.abc import Iterable

from django.core.management.base import CommandError
from tqdm import tqdm

from backlog.interchange import dumps


def progress_bars(enabled: bool | None = None):
    """A factory for backlog.imports: (description, total) -> a tqdm bar."""
    if enabled is None:
        enabled = sys.stderr.isatty()

    def make(description: str, total: int | None):
        return tqdm(
            desc=description,
            total=total,
            unit=" rec",
            unit_scale=True,
            file=sys.stderr,
            disable=not enabled,
            mininterval=0.25,
            dynamic_ncols=True,
        )

    return make


def write_jsonl(command, output: str, records: Iterable[dict], bar) -> None:
    """Write `records` one a line to `output` (a path, or - for the command's stdout)."""
    try:
        out = command.stdout if output == "-" else open(output, "w", encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror}") from exc
    try:
        for record in records:
            out.write(dumps(record) + "\n")
            bar.update(1)
    finally:
        bar.close()
        if out is not command.stdout:
            out.close()
