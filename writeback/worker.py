"""The sender: pending writes, oldest first, each sent so that it happens once upstream.

- **Claimed, then sent.** A write is claimed with `SELECT ... FOR UPDATE SKIP
  LOCKED` in a short transaction that counts the attempt and moves its next
  try past the send's deadline (a lease), and committed before any request
  goes out: two senders never hold one write, no transaction stays open
  across a call, and a sender that dies mid-call leaves the write to be
  taken again when its lease ends, its attempt counted.
- **Asked before sent again.** Every attempt after the first asks upstream
  for the write's marker first (`Connector.find_marked`): an answer lost in
  flight, a 5xx after the issue was made, a sender killed mid-call, all end
  with the one issue found, never a second one.
- **Sent once, bounded.** The write itself is one request, never retried
  blind (`Connector.send_once`); every request is bounded in time by the
  connector's client. A refusal (4xx) fails the write with upstream's own
  words; anything else leaves it pending, tried again after the back-off a
  sync's requests wait (the client's: exponential from half a second, with
  jitter, Retry-After honoured, at most SYNC_HTTP_MAX_WAIT), up to
  WRITEBACK_ATTEMPTS sends or WRITEBACK_DEADLINE after it was asked for.
- **A duplicate is a comment, then a close.** `Connector.mark_duplicate`
  (GitHub: the comment "Duplicate of #N" with the marker's hidden line,
  then closed with state_reason duplicate, then the issue read again);
  a retry asks for the marked comment first, and closing twice is harmless.
- **In order, per source.** While a source's oldest pending write waits out
  a back-off (upstream down, busy or in doubt), the later writes to that
  source wait behind it: when upstream returns they land in the order they
  were asked for. Writes to a source that answers go out side by side.
- **A comment is a comment.** A failure linked to a bug (triage) is one
  comment, looked for by its marker before any retry; the record here is
  not written again for it.
- **Upstream's answer is the record.** The issue upstream answered is
  written through the sync's writer (connectors.writer), in the transaction
  that marks the write sent: searchable at once, and the webhook that
  follows finds nothing to change.
"""

import logging
import random
import time
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from backlog.audit import surface
from connectors.base import ProductInfo, SyncError, WriteInDoubt, WriteRefused
from connectors.http import UpstreamError
from connectors.models import SyncedRecord
from connectors.sync import connect
from connectors.tally import Tally, one_line
from connectors.writer import Writer, mapped

from .models import Operation, Status, UpstreamWrite

logger = logging.getLogger(__name__)

#: Upstream's clock and ours may differ: a marked issue is looked for from this long before the write.
CLOCK_SKEW = timedelta(minutes=10)


def send_due(limit: int | None = None) -> int:
    """Send the writes that are due, oldest first; how many were tried."""
    tried = 0
    while limit is None or tried < limit:
        write = claim()
        if write is None:
            break
        attempt(write, settings.SYNC_HTTP_DEADLINE * 2)
        tried += 1
    return tried


def send_now(write_id: int, seconds: float) -> None:
    """Send one write now, within `seconds` (a surface waiting for its answer); nothing
    when another sender holds it or it is not due."""
    began = time.monotonic()
    write = claim(write_id, seconds)
    if write is None:
        return
    attempt(write, seconds)
    left = seconds - (time.monotonic() - began)
    if write.draft.get("duplicate_of") and write.status == Status.SENT and left > 1:  # filed as a duplicate
        after = UpstreamWrite.objects.filter(source=write.source, once=f"duplicate-after:{write.pk}")
        if then := after.values_list("pk", flat=True).first():
            send_now(then, left)


def claim(write_id: int | None = None, seconds: float | None = None) -> UpstreamWrite | None:
    """The oldest due write (or `write_id`, if due) no other sender holds, its attempt
    counted and its lease taken, committed before anything is sent."""
    now = timezone.now()
    lease = timedelta(seconds=(seconds or settings.SYNC_HTTP_DEADLINE * 2) + 30)
    with transaction.atomic():
        due = UpstreamWrite.objects.select_for_update(skip_locked=True, of=("self",)).filter(
            status=Status.PENDING, next_try_at__lte=now
        )
        due = due.exclude(Exists(_waiting_before()))
        if write_id is not None:
            due = due.filter(pk=write_id)
        write = due.select_related("source", "product").order_by("created_at", "id").first()
        if write is None:
            return None
        write.attempts += 1
        write.next_try_at, write.updated_at = now + lease, now
        write.save(update_fields=["attempts", "next_try_at", "updated_at"])
    return write


def _waiting_before():
    """An older pending write to the same source that is waiting out a back-off (it has an error)."""
    older = Q(created_at__lt=OuterRef("created_at")) | Q(created_at=OuterRef("created_at"), id__lt=OuterRef("id"))
    pending = UpstreamWrite.objects.filter(older, source=OuterRef("source"), status=Status.PENDING)
    return pending.exclude(error="")


def attempt(write: UpstreamWrite, seconds: float) -> None:
    """One attempt at a claimed write, ending sent, failed or pending for a later try."""
    if not write.source.write_back:
        return settle(write, status=Status.FAILED, error=f"{write.source} no longer writes back (write_back is off)")
    try:
        connector = connect(write.source)
        connector.client.deadline = time.monotonic() + seconds
        issue = send(write, connector)
    except WriteRefused as exc:
        return settle(write, status=Status.FAILED, error=str(exc))
    except (WriteInDoubt, UpstreamError, SyncError) as exc:
        return later(write, str(exc), getattr(exc, "wait", None))
    except Exception as exc:  # an answer no check foresaw: said in one line, never a traceback
        logger.exception("write %s to %s failed", write.pk, write.source)
        return later(write, f"upstream sent what could not be read ({one_line(exc)})", None)
    if write.operation == Operation.COMMENT:
        return commented(write, issue)
    written(write, connector, issue)


def send(write: UpstreamWrite, connector) -> dict:
    """The write sent (or found made by an earlier attempt, by its marker); the issue as upstream answers it."""
    again = write.attempts > 1  # an earlier one may have made it: its answer lost, or a 5xx after the write
    if write.operation == Operation.DUPLICATE:
        number, marker = write.draft["number"], write.marker
        commented = again and connector.find_marked_comment(number, marker) is not None
        return connector.mark_duplicate(number, write.draft["original"], marker, write.draft["filed_by"], commented)
    if write.operation == Operation.COMMENT:
        number, marker = write.draft["number"], write.marker
        found = connector.find_marked_comment(number, marker) if again else None
        return found if found is not None else connector.comment(number, write.draft["body"], marker)
    issue = connector.find_marked(write.marker, since=write.created_at - CLOCK_SKEW) if again else None
    return issue if issue is not None else connector.create_issue(write.draft, write.marker)


def later(write: UpstreamWrite, words: str, asked: float | None) -> None:
    """Pending again, after the back-off; failed once WRITEBACK_ATTEMPTS sends were begun."""
    words = " ".join(words.split())
    if write.attempts >= settings.WRITEBACK_ATTEMPTS or timezone.now() - write.created_at > _deadline():
        return settle(write, status=Status.FAILED, error=f"{words} ({write.attempts} tries)")
    # The client's policy (connectors.http.Client._wait): what upstream asked, else exponential with jitter.
    wait = asked + random.uniform(0, 0.25) if asked is not None else 0.5 * 2 ** (write.attempts - 1)
    wait = min(wait + (0 if asked is not None else random.uniform(0, 0.5)), settings.SYNC_HTTP_MAX_WAIT)
    error = f"try {write.attempts} of {settings.WRITEBACK_ATTEMPTS}: {words}"
    settle(write, next_try_at=timezone.now() + timedelta(seconds=wait), error=error)


def written(write: UpstreamWrite, connector, issue: dict) -> None:
    """Upstream's answer, written here as a sync writes it, and the write sent: one transaction."""
    product = write.product
    tally = Tally()
    number = connector.upstream_id(issue)
    upstream_key = name(write.source, number, issue.get("key"))
    with transaction.atomic(), _writing(write, upstream_key):
        if not _still_held(write):
            return
        info = ProductInfo(product.key, product.name, product.description)
        Writer(write.source, info, tally, product_is_ours=False, hook=True).write(
            mapped(connector, [issue], tally), None
        )
        record = SyncedRecord.objects.filter(source=write.source, kind=connector.item_kind, upstream_id=number)
        settle(
            write,
            status=Status.SENT,
            upstream_key=upstream_key[:200],
            upstream_url=str(issue.get("html_url") or "")[:500],
            record_key=record.values_list("key", flat=True).first() or "",
            error="; ".join(tally.errors),  # a record not written here says why, the write is still sent
            note=connector.note or write.note,  # a retry says who retried it
            sent_at=timezone.now(),
        )
        if write.draft.get("duplicate_of") and write.record_key:
            then_mark_duplicate(write, number)


def then_mark_duplicate(write: UpstreamWrite, number) -> UpstreamWrite | None:
    """A bug filed as a duplicate of another (service.file's duplicate_of): its marking, the
    next write, made once (`once`) in the transaction that settles the filing."""
    asked = write.draft["duplicate_of"]
    draft = {"key": write.record_key, "number": number, "filed_by": write.draft["filed_by"], **asked}
    made, _ = UpstreamWrite.objects.get_or_create(
        source=write.source,
        once=f"duplicate-after:{write.pk}",
        defaults={
            "product": write.product,
            "operation": Operation.DUPLICATE,
            "draft": draft,
            "requested_by_id": write.requested_by_id,
            "surface": write.surface,
        },
    )
    return made


def name(source, number, key: str | None = None) -> str:
    """How the tracker names an issue: its own key where it has one (Jira's HADOOP-12), else
    the project's number (GitHub's mozilla/seamonkey#12)."""
    return str(key or f"{source.project}#{number}")


def commented(write: UpstreamWrite, comment: dict) -> None:
    """A comment made (or found by its marker): the write sent, pointing at it."""
    with transaction.atomic(), _writing(write, write.draft["upstream"]):
        if _still_held(write):
            settle(
                write,
                status=Status.SENT,
                upstream_key=write.draft["upstream"][:200],
                upstream_url=str(comment.get("url") or comment.get("html_url") or "")[:500],
                record_key=write.draft["key"],
                sent_at=timezone.now(),
            )


@contextmanager
def _writing(write: UpstreamWrite, upstream: str):
    """The audit trail's context of what a send writes: the write, its source and upstream's
    key, and as its user the person who asked, unless a person's request sends it (the one
    who retried it is that request's user; pghistory keeps one context a request)."""
    context = {"source": write.source.name, "via": write.surface}
    with surface("writeback", upstream=upstream, write=write.pk, **context) as current:
        current.metadata.setdefault("user", write.requested_by_id)
        yield


def _deadline() -> timedelta:
    return timedelta(seconds=settings.WRITEBACK_DEADLINE)


def _still_held(write: UpstreamWrite) -> bool:
    """Whether this attempt is still the write's (not taken over by another sender after its lease)."""
    return (
        UpstreamWrite.objects.select_for_update()
        .filter(pk=write.pk, status=Status.PENDING, attempts=write.attempts)
        .exists()
    )


def settle(write: UpstreamWrite, **fields) -> None:
    """Store what the attempt came to, unless another sender's attempt has taken the write since."""
    fields["error"] = fields.get("error", "")[:1000]
    if "note" in fields:
        fields["note"] = fields["note"][:1000]
    fields["updated_at"] = timezone.now()
    UpstreamWrite.objects.filter(pk=write.pk, status=Status.PENDING, attempts=write.attempts).update(**fields)
    for name, value in fields.items():
        setattr(write, name, value)
