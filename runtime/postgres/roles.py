"""The role the served app runs as on the embedded server: neither superuser nor owner.

`serve` migrates as the server's superuser (`postgres`, the tables' owner),
then grants APP_ROLE what the app does to rows and runs every process it
starts (gunicorn, the workers, MCP over HTTP) as that role
(EMBEDDED_PG_USER). On the audit trail's event tables the role may only
read and insert, so no statement the app sends can rewrite history: not an
UPDATE or DELETE (refused by privilege before the append-only trigger is
asked), not `SET session_replication_role = replica` (superusers only),
not `SET pgtrigger.ignore` (the privilege still refuses), not a disabled
trigger or a TRUNCATE (the owner's alone). docs/access.md says what this
promises, and against whom.
"""

from django.apps import apps
from django.db import connection
from psycopg import sql

APP_ROLE = "qa_app"
ROWS = "SELECT, INSERT, UPDATE, DELETE"


def event_tables() -> list[str]:
    """The audit trail's tables (django-pghistory's event models)."""
    from pghistory.models import Event

    return sorted(model._meta.db_table for model in apps.get_models() if issubclass(model, Event))


def grant_app_role() -> str:
    """Make APP_ROLE (once a cluster) and grant it the app's rights in this database, as its
    owner; run after every migrate, as `serve` does (the default privileges cover tables a
    later migrate makes, until then). The role's name."""
    role, database = sql.Identifier(APP_ROLE), sql.Identifier(connection.settings_dict["NAME"])
    statements = [
        sql.SQL(
            "DO $$ BEGIN CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS; "
            "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        ).format(role),
        sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(database, role),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role),
        sql.SQL(f"GRANT {ROWS} ON ALL TABLES IN SCHEMA public TO {{}}").format(role),
        sql.SQL("GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {}").format(role),
        sql.SQL(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT {ROWS} ON TABLES TO {{}}").format(role),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {}").format(
            role
        ),
        sql.SQL("REVOKE UPDATE, DELETE, TRUNCATE ON {} FROM {}").format(
            sql.SQL(", ").join(sql.Identifier(table) for table in event_tables()), role
        ),
    ]
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement.as_string(connection.connection))
    return APP_ROLE
