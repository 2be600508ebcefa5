"""How every harness here starts: the project on sys.path, its settings, and
DEBUG off as in production (with DEBUG on, Django records every SQL
statement it runs). Import it before anything that needs Django:

    import django_setup  # noqa: F401  (sets Django up)

`database(name)` gives a harness a database of its own.
"""

import contextlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "false")
os.environ.setdefault("SECRET_KEY", "benchmarks-only")

import django  # noqa: E402 - after the settings module is named

django.setup()


@contextlib.contextmanager
def database(name: str, keep: bool = False):
    """A migrated database named `name` on the settings' server, through
    Django's test-database machinery (so a test run beside it cannot drop
    it, nor it the project's own); yields its name. Dropped at the end
    unless `keep`, and then reused as it is by the next run. Not serialized:
    Django would copy every row into memory, gigabytes at a million records."""
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    connection.settings_dict["TEST"]["NAME"] = name
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=keep, serialized_aliases=set())
    try:
        yield connection.settings_dict["NAME"]
    finally:
        teardown_databases(old_config, verbosity=0, keepdb=keep)
