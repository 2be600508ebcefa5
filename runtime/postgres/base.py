"""Django's PostgreSQL backend, pointed at the embedded server.

Settings name this package as the ENGINE when DATABASE_URL is not set. The
server is started (or joined) on the first connection, not at import time, so
commands that never touch the database never start it; and started again
when a new connection finds it stopped (embedded.revive). A request waits on
it within its deadline (runtime.postgres.deadline), as on any server.
"""

from functools import cache

from django.conf import settings
from django.db.backends.postgresql import client

from . import deadline, embedded


@cache
def _prepared(name: str) -> str:
    host = embedded.socket_dir(settings.EMBEDDED_PG_DIR)
    if name and name != "postgres":
        embedded.ensure_database(host, "postgres", name)
        embedded.update_extensions(host, "postgres", name)
    return host


class DatabaseClient(client.DatabaseClient):
    """`manage.py dbshell` with the psql that ships with the embedded server."""

    @classmethod
    def settings_to_cmd_args_env(cls, settings_dict, parameters):
        settings_dict = {**settings_dict, "HOST": _prepared(settings_dict["NAME"])}
        args, env = super().settings_to_cmd_args_env(settings_dict, parameters)
        args[0] = embedded.psql_path()
        return args, env


class DatabaseWrapper(deadline.DatabaseWrapper):
    client_class = DatabaseClient

    def get_connection_params(self):
        params = super().get_connection_params()
        # Only the project's own database is created here; test and benchmark
        # databases are created by Django's test machinery through "postgres".
        own = self.settings_dict["NAME"] == settings.EMBEDDED_PG_DATABASE
        params["host"] = _prepared(self.settings_dict["NAME"] if own else "postgres")
        params.setdefault("user", "postgres")
        return params

    def get_new_connection(self, conn_params):
        try:
            return super().get_new_connection(conn_params)
        except self.Database.OperationalError:  # psycopg's: Django wraps it later
            # Stopped or killed under us: start it again and connect once more.
            if not embedded.revive(settings.EMBEDDED_PG_DIR):
                raise
            return super().get_new_connection(conn_params)
