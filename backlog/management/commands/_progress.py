"""Progress bars for long commands: tqdm on stderr, quiet when not a terminal
unless asked, so logs and pipes stay clean."""

import sys

from tqdm import tqdm


def progress_bars(enabled: bool | None = None):
    """A factory for backlog.services: (description, total) -> a tqdm bar."""
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
