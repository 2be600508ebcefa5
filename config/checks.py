"""System checks of the database, run by `manage.py check` and every command.

They confirm what the code needs of PostgreSQL before anything depends on it:
that the server answers (a DATABASE_URL whose host does not is one line
naming it), the `vector` and `pg_trgm` extensions at versions that have what
the code uses (backlog.db.REQUIRED_EXTENSIONS), made already or makeable by
the app's role (an ordinary role is told the statements a superuser runs,
before `migrate` touches anything), and, for the embedded server, that its
pgvector runs on this CPU. That last one is asked of a throwaway backend
(runtime/postgres/probe.py), once per wheel and machine, so a build that cannot
run here is one clear error instead of a server that crashes at every insert.
A server of the user's own (DATABASE_URL) is never probed that way: a crash
there would take it down, and its pgvector comes from a distribution or a
provider, built for the machine it runs on.
"""

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connection, transaction

from backlog.db import REQUIRED_EXTENSIONS

PLATFORMS = (
    "the embedded PostgreSQL runs on Linux (x86_64 with AVX2, aarch64), macOS and Windows; "
    "elsewhere set DATABASE_URL to a PostgreSQL with pgvector 0.8+ and pg_trgm (README, Platforms)"
)


def embedded() -> bool:
    return connection.settings_dict["ENGINE"] == "runtime.postgres"


@checks.register()
def database_extensions(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problems = []
    if embedded():
        problems += _embedded_build()
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT name, default_version, installed_version FROM pg_available_extensions WHERE name = ANY(%s)",
                [list(REQUIRED_EXTENSIONS)],
            )
            available = {name: (default, installed) for name, default, installed in cursor.fetchall()}
    except DatabaseError as error:
        return problems + [_unreachable(error)]
    for name, (oldest, uses, package) in REQUIRED_EXTENSIONS.items():
        problems += _extension(name, oldest, uses, package, *available.get(name, (None, None)))
    if not problems:
        missing = [name for name in REQUIRED_EXTENSIONS if available[name][1] is None]
        problems += _not_creatable(missing)
    return problems


def _unreachable(error: DatabaseError) -> checks.CheckMessage:
    """The server did not answer, or refused the connection: one line naming where it was asked."""
    params = connection.settings_dict
    where = "the embedded PostgreSQL" if embedded() else f"{params['HOST'] or 'localhost'}:{params['PORT'] or 5432}"
    reason = str(error).strip().splitlines()[0] if str(error).strip() else error.__class__.__name__
    return checks.Error(
        f"Cannot connect to the database at {where}: {reason.rsplit(' failed: ', 1)[-1].rstrip('.')}.",
        hint="Start that server or correct DATABASE_URL's host and port "
        "(unset DATABASE_URL to use the embedded PostgreSQL).",
        id="qasearch.E004",
    )


def _not_creatable(missing: list[str]) -> list[checks.CheckMessage]:
    """The extensions not made yet, if this role may not make one of them: the
    statements a superuser runs. Only trying tells: the catalog says an
    extension needs a superuser, but managed services let their admin role
    (rds_superuser, cloudsqlsuperuser, azure_pg_admin, neon_superuser...) make
    the ones they allow. The try is rolled back; `migrate` makes them."""
    refused = None
    for name in missing:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f'CREATE EXTENSION "{name}"')
                transaction.set_rollback(True)
        except DatabaseError as error:
            refused = refused or (name, str(error).strip().splitlines()[0])
    if refused is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database(), current_user")
        database, role = cursor.fetchone()
    statements = " ".join(f"CREATE EXTENSION {name};" for name in missing)
    return [
        checks.Error(
            f"The database {database} lacks the extension(s) {', '.join(missing)}, and the role {role} may not "
            f"create {refused[0]} ({refused[1]}).",
            hint=f"Have a superuser (on a managed service, its admin role) run in database {database}: {statements} "
            "Then migrate needs no superuser (docs/deploy.md, step 1).",
            id="qasearch.E005",
        )
    ]


def _extension(name, oldest, uses, package, default, installed) -> list[checks.CheckMessage]:
    if default is None:
        return [
            checks.Error(
                f"The PostgreSQL server has no '{name}' extension; the search needs it for {uses}.",
                hint=f"Install {package} on the server, or unset DATABASE_URL to use the embedded PostgreSQL.",
                id="qasearch.E002",
            )
        ]
    if installed is not None and _version(installed) < _version(oldest):
        newer = _version(default) >= _version(oldest)
        return [
            checks.Error(
                f"The '{name}' extension is at {installed}; the search needs {oldest} or newer for {uses}.",
                hint=f"Run ALTER EXTENSION {name} UPDATE; in the database (the server has {default})."
                if newer
                else f"Upgrade {package} on the server (it has {default}), then ALTER EXTENSION {name} UPDATE;",
                id="qasearch.E003",
            )
        ]
    if installed is None and _version(default) < _version(oldest):
        return [
            checks.Error(
                f"The server's '{name}' extension is {default}; the search needs {oldest} or newer for {uses}.",
                hint=f"Upgrade {package} on the server, or unset DATABASE_URL to use the embedded PostgreSQL.",
                id="qasearch.E003",
            )
        ]
    return []


def _embedded_build() -> list[checks.CheckMessage]:
    from runtime.postgres import probe, wheel

    result = probe.cached_run(
        wheel.bin_dir(), settings.BASE_DIR / ".local" / "pgvector-probe.json", user=wheel.system_user()
    )
    if result.passed:
        return []
    return [
        checks.Error(
            f"The embedded PostgreSQL's pgvector does not work on this machine: {result.detail}.",
            hint=f"Set DATABASE_URL to your own PostgreSQL server: {PLATFORMS}.",
            id="qasearch.E001",
        )
    ]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())
