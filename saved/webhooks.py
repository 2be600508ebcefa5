"""Sending a saved search's new matches to its webhook.

`notify_all()` (run by `manage.py notify_saved_searches`, which `serve`
keeps running) asks each saved search with a webhook for its matches
updated since `notified_until`, as its owner may see them at that moment,
and POSTs them as JSON. Nothing here runs in a web request.

The request: `Content-Type: application/json`, the body below, and

    X-QA-Search-Event: saved_search.new_matches
    X-QA-Search-Delivery: <a new UUID for every run; the same on each retry>
    X-QA-Search-Signature-256: sha256=<hex HMAC-SHA256 of the body, keyed by the saved search's secret>

A receiver verifies it by computing the HMAC of the raw body with the secret
(shown on the saved search's page) and comparing, in constant time:
`hmac.compare_digest(header, "sha256=" + hmac.new(secret, body, "sha256").hexdigest())`.

Delivery: at most WEBHOOK_ATTEMPTS tries (a connection error, a timeout, a
429 or a 5xx is tried again after WEBHOOK_BACKOFF, then twice that, ...;
another 4xx is not), each WEBHOOK_TIMEOUT seconds at most, no redirects
followed. When it is delivered, `notified_until` moves to the time the
search ran; when not, it stays, so the next run sends those records again
(with any newer ones), and the failure is recorded on the saved search
(`failures`, `last_error`), which the dashboard and the admin show.

Only http and https URLs are taken. Unless SAVED_SEARCH_WEBHOOK_PRIVATE is
on, a URL whose host is, or resolves to, a loopback, private, link-local or
otherwise reserved address is refused, when it is saved and again before
each send (server-side request forgery: a webhook must not reach the
database, a cloud metadata service or the intranet on a user's behalf),
and the address each send connects to is checked too (DNS rebinding).
Webhooks ignore HTTP(S)_PROXY: they go straight to their host.
"""

import hashlib
import hmac
import http.client
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from search.contract import SearchError

from .addresses import WebhookRefused, check_url, refused_address
from .models import SavedSearch

logger = logging.getLogger(__name__)

EVENT = "saved_search.new_matches"
SIGNATURE_HEADER = "X-QA-Search-Signature-256"
RECORD_FIELDS = ("key", "kind", "product", "feature", "title", "status", "severity", "created_at", "updated_at")
ERROR_MAX_CHARS = 500


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Outcome:
    saved: SavedSearch
    sent: int  # records delivered (0: nothing new, or a failure)
    error: str | None = None


def notify_all() -> list[Outcome]:
    """Every saved search with a webhook, once: its new matches sent, or its failure recorded.

    Each is handled in a transaction that holds its row (skipping one another
    notifier holds), so two notifiers never send the same records twice."""
    outcomes = []
    for pk in SavedSearch.objects.exclude(webhook_url="").values_list("pk", flat=True):
        with transaction.atomic():
            saved = SavedSearch.objects.select_for_update(skip_locked=True).filter(pk=pk).first()
            if saved is not None:
                outcomes.append(notify(saved))
    return outcomes


def notify(saved: SavedSearch) -> Outcome:
    until = timezone.now()  # taken before the search: a record written meanwhile is sent next time
    try:
        if not saved.owner.is_active:
            raise WebhookRefused(f"its owner {saved.owner.get_username()!r} is no longer active")
        check_url(saved.webhook_url)
        body, sent = payload(saved, until)
        if sent:
            deliver(saved.webhook_url, saved.webhook_secret, body)
    except (WebhookRefused, SearchError) as exc:
        return _failed(saved, str(exc))
    saved.notified_until = until
    fields = ["notified_until"]
    if sent:
        saved.last_delivery_at, saved.failures, saved.last_error = timezone.now(), 0, ""
        fields += ["last_delivery_at", "failures", "last_error"]
    saved.save(update_fields=fields)
    return Outcome(saved, sent)


def payload(saved: SavedSearch, until) -> tuple[bytes, int]:
    """The body to send and how many records it lists (0: nothing to send)."""
    ranked = saved.ranked()
    most, records = settings.SAVED_SEARCH_WEBHOOK_RECORDS, []
    for batch in ranked.documents(since=saved.notified_until):
        records += [_record(rank, row) for rank, row in batch]
        if len(records) >= most:
            break
    if not records:
        return b"", 0
    records = records[:most]
    total = ranked.count(saved.notified_until) if len(records) == most else len(records)
    body = {
        "event": EVENT,
        "saved_search": {"id": saved.pk, "name": saved.name, **saved.params()},
        "since": saved.notified_until.isoformat(),
        "until": until.isoformat(),
        "total": total,
        "records": records,
    }
    return json.dumps(body, ensure_ascii=False).encode(), len(records)


def _record(rank: int, row: dict) -> dict:
    record = {name: row[name] for name in RECORD_FIELDS}
    record["created_at"], record["updated_at"] = row["created_at"].isoformat(), row["updated_at"].isoformat()
    return {"rank": rank, **record}


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 3xx is an answer, not a new address to send the records to


def _check_peer(sock) -> None:
    """The address a send actually connected to, judged as check_url judges a
    host's: a name that resolved to a public address for the check and to an
    inside one for the connection (DNS rebinding) sends nothing."""
    address = sock.getpeername()[0]
    if why := refused_address(address):
        sock.close()
        raise WebhookRefused(f"the webhook's connection went to {why}, a private or reserved address; nothing was sent")


class _CheckedHTTPConnection(http.client.HTTPConnection):
    def connect(self):
        super().connect()
        _check_peer(self.sock)


class _CheckedHTTPSConnection(http.client.HTTPSConnection):
    def connect(self):
        http.client.HTTPConnection.connect(self)  # TCP only: checked before any TLS is spoken
        _check_peer(self.sock)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host)


class _CheckedHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(_CheckedHTTPConnection, req)


class _CheckedHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_CheckedHTTPSConnection, req, context=self._context)


def _opener() -> urllib.request.OpenerDirector:
    """No redirects followed, no HTTP(S)_PROXY of the environment (the webhook
    goes straight to its host: a proxy would connect where we cannot check),
    and, unless SAVED_SEARCH_WEBHOOK_PRIVATE, the address connected to checked."""
    handlers = [_NoRedirects, urllib.request.ProxyHandler({})]
    if not settings.SAVED_SEARCH_WEBHOOK_PRIVATE:
        handlers += [_CheckedHTTPHandler, _CheckedHTTPSHandler]
    return urllib.request.build_opener(*handlers)


def deliver(url: str, secret: str, body: bytes) -> None:
    """POST `body`, tried up to WEBHOOK_ATTEMPTS times; WebhookRefused with the last reason when it never got a 2xx."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "qa-search-webhook/1",
        "X-QA-Search-Event": EVENT,
        "X-QA-Search-Delivery": str(uuid.uuid4()),
        SIGNATURE_HEADER: sign(secret, body),
    }
    attempts = settings.SAVED_SEARCH_WEBHOOK_ATTEMPTS
    opener = _opener()
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with opener.open(request, timeout=settings.SAVED_SEARCH_WEBHOOK_TIMEOUT):
                return  # a 2xx: urllib raises HTTPError for anything else, 3xx included (no redirects)
        except urllib.error.HTTPError as exc:
            reason, again = f"HTTP {exc.code} {exc.reason}", exc.code == 429 or exc.code >= 500
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason, again = f"{getattr(exc, 'reason', exc)}", True
        logger.warning("webhook %s: attempt %d of %d failed: %s", url, attempt, attempts, reason)
        if not again or attempt == attempts:
            raise WebhookRefused(f"{url}: {reason} (after {attempt} attempt{'s' if attempt > 1 else ''})")
        time.sleep(settings.SAVED_SEARCH_WEBHOOK_BACKOFF * 2 ** (attempt - 1))


def _failed(saved: SavedSearch, error: str) -> Outcome:
    saved.failures += 1
    saved.last_error, saved.last_error_at = error[:ERROR_MAX_CHARS], timezone.now()
    saved.save(update_fields=["failures", "last_error", "last_error_at"])
    logger.warning("saved search %s (%s): webhook not delivered: %s", saved.pk, saved.name, error)
    return Outcome(saved, 0, error)
