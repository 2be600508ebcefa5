"""What one sync or webhook delivery did: its counts, and the first errors in one line each.

Upstream's words reach the errors as PostgreSQL can store them (a run's
errors are JSON): no NUL, no lone surrogate.
"""

import logging
from dataclasses import dataclass, field

logger = logging.getLogger("connectors.sync")  # the name its warnings have always had in the logs

ERRORS_KEPT = 20


@dataclass
class Tally:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    deleted: int = 0
    fetched: int = 0
    missed: int = 0
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> str:
        """Log and keep `message` (the first ERRORS_KEPT); it as kept."""
        message = _storable_text(message)
        logger.warning("sync: %s", message)
        if len(self.errors) < ERRORS_KEPT:
            self.errors.append(message)
        return message


def one_line(exc: BaseException) -> str:
    """An exception no check foresaw, in one line: its type, and its first words."""
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _storable_text(text: str) -> str:
    """Upstream's words as PostgreSQL stores them in JSON: no NUL, no lone surrogate."""
    return text.replace("\x00", "").encode(errors="replace").decode()
