"""Django's PostgreSQL backend, pointed at the embedded server.

Settings name this package as the ENGINE when DATABASE_URL is not set. The
server is started (or joined) on the first connection, not at import time, so
commands that never touch the database never start it.
"""

from functools import cache

from django.conf import settings
from django.db.backends.postgresql import base

from . import embedded


@cache
def _prepared(name: str) -> str:
    host = embedded.socket_dir(settings.EMBEDDED_PG_DIR)
    if name and name != "postgres":
        embedded.ensure_database(host, "postgres", name)
    return host


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        params = super().get_connection_params()
        dbname = self.settings_dict["NAME"]
        # The test runner names its own database (test_<name>) and creates it
        # itself through the "postgres" database, so only the main one is
        # created here.
        is_test_db = dbname and dbname.startswith("test_")
        params["host"] = _prepared("postgres" if is_test_db else dbname)
        params.setdefault("user", "postgres")
        return params
