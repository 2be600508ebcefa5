"""Database-side pieces of the backlog: SQL functions and migration operations.

Kept small and named, so that models and migrations read as Django code.
"""

from django.core.management.base import CommandError
from django.db import DatabaseError, models
from django.db.migrations.operations.base import Operation
from django.db.utils import InterfaceError, OperationalError

# FORMAT.md: raw_data keys are denormalized into searchable columns; a missing
# key or a value that is empty after trimming white space becomes NULL. A
# list (steps) becomes one item per line, blank items dropped; an object
# becomes "key: value" lines; numbers and booleans become their JSON text.
# IMMUTABLE, so stored generated columns may call it.
RAW_TEXT_FUNCTION_SQL = r"""
CREATE OR REPLACE FUNCTION backlog_raw_text(raw jsonb, field text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT NULLIF(regexp_replace(
    CASE jsonb_typeof(raw -> field)
      WHEN 'string' THEN raw ->> field
      WHEN 'array' THEN (
        SELECT string_agg(btrim(item, E' \t\r\n'), E'\n' ORDER BY position)
        FROM jsonb_array_elements_text(raw -> field) WITH ORDINALITY AS t(item, position)
        WHERE btrim(item, E' \t\r\n') <> '')
      WHEN 'object' THEN (
        SELECT string_agg(name || ': ' || (value #>> '{}'), E'\n' ORDER BY name)
        FROM jsonb_each(raw -> field) AS t(name, value))
      WHEN 'null' THEN NULL
      ELSE (raw -> field)::text
    END,
    '^[[:space:]]+|[[:space:]]+$', '', 'g'), '')
$$;
"""
DROP_RAW_TEXT_FUNCTION_SQL = "DROP FUNCTION IF EXISTS backlog_raw_text(jsonb, text);"


class RawText(models.Func):
    """`backlog_raw_text(raw_data, 'field')`: one denormalized raw_data field."""

    function = "backlog_raw_text"
    output_field = models.TextField(null=True)

    def __init__(self, json_field: str, key: str):
        super().__init__(models.F(json_field), models.Value(key))


# The extensions the code needs: the oldest version with everything it uses, what that
# is, and where a server gets them. config/checks.py confirms them at every command.
REQUIRED_EXTENSIONS = {
    "vector": ("0.8.0", "halfvec and HNSW (0.7), hnsw.iterative_scan (0.8)", "pgvector 0.8 or newer"),
    "pg_trgm": ("1.3", "word_similarity and its <% operator", "postgresql-contrib"),
}


class CreateRequiredExtension(Operation):
    """CREATE EXTENSION, or one clear error that names the fix.

    Django's own CreateExtension fails with a raw SQL error on a server that
    lacks the extension; a CommandError is printed by `manage.py migrate`
    as a single message, without a traceback.
    """

    reversible = True

    def __init__(self, name: str, package_hint: str):
        self.name = name
        self.package_hint = package_hint

    def state_forwards(self, app_label, state):
        pass

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        ensure_extension(schema_editor.connection, self.name, self.package_hint)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        pass  # other databases objects may use the extension; leave it

    def describe(self):
        return f"Create extension {self.name}"

    def deconstruct(self):
        return (self.__class__.__qualname__, [self.name, self.package_hint], {})


def ensure_extension(connection, name: str, package_hint: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT installed_version FROM pg_available_extensions WHERE name = %s", [name])
        row = cursor.fetchone()
        if row is None:
            raise CommandError(
                f"The PostgreSQL server has no '{name}' extension, which this project needs. "
                f"Install it on the server ({package_hint}), or unset DATABASE_URL to use "
                "the embedded PostgreSQL that ships with it."
            )
        if row[0] is None:
            try:
                cursor.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}"')
            except DatabaseError as error:  # config.checks says so first, unless checks were skipped
                raise CommandError(
                    f"This role may not create the '{name}' extension ({str(error).strip().splitlines()[0]}). "
                    f"Have a superuser run in this database: CREATE EXTENSION {name}; then migrate again "
                    "(docs/deploy.md, step 1)."
                ) from None


# SQLSTATEs of a server going away or not back yet: admin_shutdown, crash_shutdown,
# cannot_connect_now (starting up, in recovery); class 08 is connection exceptions.
UNAVAILABLE_SQLSTATES = {"57P01", "57P02", "57P03"}


def database_unavailable(error: BaseException) -> bool:
    """Whether `error` says the database cannot be reached (stopped, restarting,
    recovering from a crash), as opposed to one statement that failed.

    psycopg reports a refused or broken connection without a SQLSTATE, and
    Django's InterfaceError is a connection already closed under it.
    """
    if isinstance(error, InterfaceError):
        return True
    if not isinstance(error, OperationalError):
        return False
    state = getattr(error.__cause__, "sqlstate", None)
    return state is None or state.startswith("08") or state in UNAVAILABLE_SQLSTATES
