"""Webhook intake: a delivery received, answered in well under the vendors' 10 s.

A delivery is

- **verified** before its body is read as JSON: GitHub's and Jira's
  HMAC-SHA256 of the raw body (`X-Hub-Signature-256`, `X-Hub-Signature`),
  TestRail's shared secret in a header of its webhook (`X-Webhook-Secret`;
  TestRail signs nothing), each compared in constant time with the secret
  in the environment variable the source names (Source.hook_secret_variable);
  never stored;
- **routed** to the sources that sync the project it names; one that names
  a project no source syncs is counted (Source.hook_ignored) and dropped;
- **bounded**: WEBHOOK_MAX_BYTES a body, WEBHOOK_RATE_PER_MINUTE a source,
  WEBHOOK_BACKLOG deliveries waiting (past it a 503, and the vendor retries);
- **stored, then answered** (202): one row a source it is for (Delivery),
  its vendor's delivery id unique, so the same delivery twice is taken once.

connectors.hooks.processing does the rest.
"""

import hashlib
import hmac
import json
import logging
import math
import os
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from backlog.interchange import MAX_RAW_DATA_DEPTH, nests_deeper, no_nul_anywhere
from backlog.text import SURROGATE_PROBLEM, surrogate_at

from ..models import Delivery, Source
from . import gate

logger = logging.getLogger("connectors.hooks")

KINDS = ("github", "jira", "testrail")


class Refused(Exception):
    """A delivery answered with a 4xx or 503: `status`, a code and a message that says what to fix."""

    def __init__(self, status: int, code: str, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.code, self.retry_after = status, code, retry_after


@dataclass
class Taken:
    status: str  # "accepted", "duplicate", "ignored", "pong"
    message: str


def receive(kind: str, headers, body: bytes) -> Taken:
    """Verify, route and store one delivery; what to answer. Refused for a bad one (nothing written)."""
    if kind not in KINDS:
        raise Refused(
            404,
            "not_found",
            f"no webhooks for {kind[:40]!r}: POST to /hooks/github, /hooks/jira or "
            "/hooks/testrail (TestIO has no webhooks; its sources sync on schedule)",
        )
    if len(body) > settings.WEBHOOK_MAX_BYTES:
        raise too_large()
    header, check = SIGNATURES[kind]
    verified = _verified(kind, header, check, headers.get(header, ""), body)
    payload = _json(body)
    event, delivery_id, project, upstream_id = READERS[kind](headers, payload, body)
    if event == "ping":
        return Taken("pong", "the webhook reaches this service and its signature is right")
    if project:
        targets = [s for s in verified if _same_project(s, project)]
    else:  # only a Jira link event names no project (each Jira source reads its issues again)
        targets = verified if kind == "jira" and event.startswith("issuelink_") else []
    if not targets:
        gate.count([s.pk for s in verified], "hook_ignored")
        gate.flush()  # a signed delivery: counted at once (a refusal's wait for the next flush)
        which = f"no source here syncs {kind} project {project[:80]!r}" if project else "it names no project"
        return Taken("ignored", f"{which}; nothing was written")
    _bounded(targets)
    if not _store(targets, delivery_id, event[:100], upstream_id, payload):
        return Taken("duplicate", f"delivery {delivery_id[:80]} was taken before; nothing changed")
    return Taken("accepted", f"{event} taken; it is processed within seconds")


def _verified(kind: str, header: str, check, given: str, body: bytes) -> list[Source]:
    """The enabled sources of `kind` whose secret signs `body`, read again from the database;
    Refused (401) when none does. The refusal says nothing of this service's configuration
    (which variables hold the secrets, whether any is set): its log does, to the operator."""
    sources = gate.enabled_sources(kind)
    secrets = {source.pk: os.environ.get(source.hook_secret_variable, "") for source in sources}
    matches = {secret: check(secret, body, given) for secret in set(secrets.values()) if secret}  # once a secret
    verified = [s.pk for s in sources if secrets[s.pk] and matches[secrets[s.pk]]]
    if verified:
        return list(Source.objects.filter(pk__in=verified, enabled=True).order_by("pk"))
    with_secret = [s.pk for s in sources if secrets[s.pk]]
    gate.count(with_secret, "hook_refused")
    if not with_secret:
        names = sorted({source.hook_secret_variable for source in sources}) or [f"{kind.upper()}_WEBHOOK_SECRET"]
        _warn_once(
            kind,
            f"a {kind} webhook was refused: no enabled {kind} source has its secret set "
            f"({' or '.join(names)} is empty in the environment; docs/connectors.md, Webhooks)",
        )
    what = "is missing" if not given else "does not match the body"
    raise Refused(
        401,
        "bad_signature",
        f"the {header} header {what}: sign the webhook with the secret this service was given for it "
        "(docs/connectors.md, Webhooks); nothing was written",
    )


_warned: dict[str, float] = {}


def _warn_once(kind: str, message: str) -> None:
    """`message` in the service's log at most once a minute a kind: a flood does not flood the log."""
    if time.monotonic() - _warned.get(kind, -60.0) >= 60.0:
        _warned[kind] = time.monotonic()
        logger.warning(message)


def too_large() -> Refused:
    return Refused(413, "too_large", f"the body is over {settings.WEBHOOK_MAX_BYTES:,} bytes (WEBHOOK_MAX_BYTES)")


def _store(targets: list[Source], delivery_id: str, event: str, upstream_id: str, payload: dict) -> bool:
    """One row a source, and the sources' last delivery time, in one statement;
    whether any row was new (the same delivery again is no row: ON CONFLICT on
    delivery_once). The time is stamped at most once a second a source, and a
    source whose row a processor holds (to the end of a delivery, upstream reads
    included) is skipped, so that the acknowledgement never waits for it: the
    processor stamps it (processing._apply)."""
    sources = Source._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH stamped AS (
                    UPDATE {sources} SET hook_received_at = now()
                    WHERE id IN (SELECT id FROM {sources} WHERE id = ANY(%(sources)s)
                                 AND (hook_received_at IS NULL OR hook_received_at < now() - interval '1 second')
                                 FOR NO KEY UPDATE SKIP LOCKED))
                INSERT INTO {Delivery._meta.db_table}
                    (source_id, delivery_id, event, upstream_id, received_at, payload, status, attempts, outcome)
                SELECT s, %(delivery)s, %(event)s, %(upstream)s, now(), %(payload)s::jsonb, 'pending', 0, ''
                FROM unnest(%(sources)s::bigint[]) s
                ON CONFLICT (source_id, delivery_id) DO NOTHING RETURNING id""",
            {
                "sources": [s.pk for s in targets],
                "delivery": delivery_id,
                "event": event,
                "upstream": upstream_id,
                "payload": json.dumps(payload),
            },
        )
        return bool(cursor.fetchall())


def _hmac_sha256(secret: str, body: bytes, given: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), given.strip().lower().encode())


def _shared_secret(secret: str, body: bytes, given: str) -> bool:
    return hmac.compare_digest(secret.encode(), given.strip().encode())


SIGNATURES = {
    "github": ("X-Hub-Signature-256", _hmac_sha256),
    "jira": ("X-Hub-Signature", _hmac_sha256),
    "testrail": ("X-Webhook-Secret", _shared_secret),
}


def _json(body: bytes) -> dict:
    """The body as a JSON object PostgreSQL's jsonb stores (no NaN or Infinity, no NUL
    character, no lone surrogate), or Refused saying what is wrong."""
    try:
        payload = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        raise Refused(
            400, "invalid_json", "the body is not JSON: send the webhook with content type application/json"
        ) from None
    if not isinstance(payload, dict):
        raise Refused(400, "invalid_json", f"the body is a JSON {type(payload).__name__}, not an object")
    if nests_deeper(payload, MAX_RAW_DATA_DEPTH + 1):
        raise Refused(400, "invalid_json", f"the body nests more than {MAX_RAW_DATA_DEPTH + 1} levels deep")
    if (where := surrogate_at(payload)) is not None:
        raise Refused(400, "invalid_json", f"the body's {where or 'text'} {SURROGATE_PROBLEM}")
    try:
        no_nul_anywhere(payload)
    except ValueError as exc:
        raise Refused(400, "invalid_json", f"the body {exc}") from None
    return payload


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A JSON number as a float; one past a float's range (1e400, read as infinity) is refused."""
    if math.isfinite(value := float(text)):
        return value
    raise Refused(400, "invalid_json", f"the body's number {text[:40]} is out of range: send it as a string")


def _body_id(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _text(value, limit: int = 100) -> str:
    return str(value)[:limit] if isinstance(value, (str, int)) and not isinstance(value, bool) else ""


def _github(headers, payload: dict, body: bytes) -> tuple[str, str, str | None, str]:
    event = headers.get("X-GitHub-Event", "")
    if not event:
        raise Refused(400, "invalid_request", "X-GitHub-Event is missing: GitHub names the event in it")
    repository = payload.get("repository")
    project = _text(repository.get("full_name"), 200) if isinstance(repository, dict) else ""
    issue = payload.get("issue")
    action = _text(payload.get("action"), 40)
    return (
        f"{event}.{action}" if action else event,
        _text(headers.get("X-GitHub-Delivery"), 200) or _body_id(body),
        project or None if event != "ping" else None,
        _text(issue.get("number")) if isinstance(issue, dict) else "",
    )


def _jira(headers, payload: dict, body: bytes) -> tuple[str, str, str | None, str]:
    event = _text(payload.get("webhookEvent"))
    if not event:
        raise Refused(400, "invalid_request", "webhookEvent is missing: this is not a Jira webhook's body")
    issue = payload.get("issue") if isinstance(payload.get("issue"), dict) else {}
    fields = issue.get("fields") if isinstance(issue.get("fields"), dict) else {}
    project = fields.get("project") if isinstance(fields.get("project"), dict) else {}
    key = _text(project.get("key")) or _text(issue.get("key")).rpartition("-")[0]
    # A link event names issues by id only: every Jira source reads them again, and those that hold none skip it.
    return (
        event,
        _text(headers.get("X-Atlassian-Webhook-Identifier"), 200) or _body_id(body),
        key or None,
        _text(issue.get("id")),
    )


def _testrail(headers, payload: dict, body: bytes) -> tuple[str, str, str | None, str]:
    event = _text(payload.get("event") or payload.get("event_type"))
    if not event:
        raise Refused(400, "invalid_request", 'the body names no "event": use the payload docs/connectors.md gives')
    project = _text(payload.get("project_id"))
    data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
    case = _text(payload.get("case_id")) or _text(data.get("case_id")) or _text(data.get("id"))
    return event.lower().replace(" ", "_"), _body_id(body), project or None, case


READERS = {"github": _github, "jira": _jira, "testrail": _testrail}


def _same_project(source: Source, project: str) -> bool:
    ours = source.project.strip().strip("/").upper()
    return ours == project.upper() or (source.kind == "testrail" and ours.lstrip("P") == project.upper().lstrip("P"))


def _bounded(targets: list[Source]) -> None:
    """Refused (429, 503) past a source's rate or the backlog: the vendor sends it again later.
    One statement, each count stopped at its limit (a partial index holds the waiting ones,
    delivery_recent a source's last minute)."""
    backlog, rate = settings.WEBHOOK_BACKLOG, settings.WEBHOOK_RATE_PER_MINUTE
    table = Delivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT (SELECT count(*) FROM (SELECT 1 FROM {table} WHERE status = 'pending' LIMIT %(backlog)s) w),
                       (SELECT array_agg(s) FROM unnest(%(sources)s::bigint[]) s
                        WHERE (SELECT count(*) FROM (SELECT 1 FROM {table} d WHERE d.source_id = s
                               AND d.received_at >= now() - interval '1 minute' LIMIT %(rate)s) r) >= %(rate)s)""",
            {"backlog": backlog, "rate": rate, "sources": [s.pk for s in targets]},
        )
        waiting, busy = cursor.fetchone()
    if waiting >= backlog:
        raise Refused(
            503,
            "backlog",
            f"{backlog:,} deliveries are waiting to be processed (WEBHOOK_BACKLOG); send it again later",
            retry_after=30,
        )
    if busy:
        source = next(s for s in targets if s.pk in busy)
        raise Refused(
            429,
            "throttled",
            f"{source} took {rate:,} deliveries in the last minute (WEBHOOK_RATE_PER_MINUTE); send it again later",
            retry_after=60,
        )
