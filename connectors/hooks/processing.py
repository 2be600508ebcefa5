"""Webhook processing: the deliveries taken, applied after they were answered.

- **processed after** by `manage.py hooks --watch` (serve runs it), in the
  order received, through the sync's own writer (connectors.writer): the
  same validation, ownership rules, duplicate links and index triggers, the
  delivery's whole effect and its status in one transaction;
- **in order of truth**: an item is never written over a newer state of
  itself (SyncedRecord.upstream_updated); where the payload is partial
  (Jira's, TestRail's) or its order in doubt (an edit of an issue never
  seen), the item is read again from upstream, which is the truth whatever
  order deliveries came in.
"""

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from backlog.audit import surface
from backlog.models import Product

from ..base import Connector, ProductInfo, SyncError
from ..http import UpstreamError
from ..models import Delivery, DeliveryStatus, Source, SyncedRecord
from ..ownership import ITEM_MODELS
from ..sweep import delete_records
from ..sync import connect
from ..tally import Tally
from ..writer import UNREADABLE, Writer, mapped

logger = logging.getLogger("connectors.hooks")  # the name its warnings have always had in the logs

#: How often a delivery that failed (upstream or database down) is tried, and how long between tries.
ATTEMPTS = 5
RETRY_AFTER = timedelta(seconds=30)
#: Deliveries whose item is gone for good: a later "opened" of the same item is not written.
GONE_EVENTS = ("issues.deleted", "issues.transferred", "jira:issue_deleted", "case_deleted")


class Connectors:
    """One connector a source, kept a few minutes: a burst of deliveries does not check the project each time."""

    KEPT = 300.0

    def __init__(self):
        self.kept: dict[tuple, tuple[float, Connector]] = {}

    def __call__(self, source: Source) -> Connector:
        # Kept by what it reads with: a source edited in the admin (another URL, project or token) gets a new one.
        kept_for = (source.pk, source.url, source.project, source.query, source.token_env, source.user_env)
        at, connector = self.kept.get(kept_for, (0.0, None))
        if connector is None or time.monotonic() - at > self.KEPT:
            connector = connect(source)
            self.kept[kept_for] = (time.monotonic(), connector)
        connector.source = source
        connector.client.deadline = time.monotonic() + settings.SYNC_HTTP_DEADLINE * 3
        return connector


def process_pending(limit: int | None = None, connectors: Connectors | None = None) -> int:
    """Process waiting deliveries, oldest first, one transaction each; how many were processed."""
    connectors = connectors or Connectors()
    done = 0
    while limit is None or done < limit:
        if not process_next(connectors):
            break
        done += 1
    return done


def process_next(connectors: Connectors) -> bool:
    """Process the oldest waiting delivery (False: none waits). Another
    processor skips the one this holds; what a failed try wrote is undone,
    and it is tried again (ATTEMPTS, RETRY_AFTER apart)."""
    now = timezone.now()
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("source")
            .filter(status=DeliveryStatus.PENDING)
            .filter(Q(attempts=0) | Q(processed_at__lte=now - RETRY_AFTER))
            .order_by("received_at", "id")
            .first()
        )
        if delivery is None:
            return False
        delivery.attempts += 1
        try:
            with transaction.atomic(), surface("webhook", source=delivery.source.name, delivery=delivery.delivery_id):
                status, outcome = _apply(delivery, connectors)
        except (UpstreamError, SyncError, DatabaseError, *UNREADABLE) as exc:
            logger.warning("webhook delivery %s of %s: %s", delivery.delivery_id, delivery.source, exc)
            status = DeliveryStatus.FAILED if delivery.attempts >= ATTEMPTS else DeliveryStatus.PENDING
            outcome = f"try {delivery.attempts} of {ATTEMPTS} failed: {' '.join(str(exc).split())}"
        delivery.status, delivery.outcome, delivery.processed_at = status, outcome[:500], timezone.now()
        delivery.save(update_fields=["status", "outcome", "processed_at", "attempts"])
    return True


def _apply(delivery: Delivery, connectors: Connectors) -> tuple[str, str]:
    """The delivery's writes and deletions; (status, what was done)."""
    # Its pending links, ours to the end. NO KEY: a new Delivery's foreign key check (FOR KEY
    # SHARE) does not wait for it, nor does the POST that brings it.
    source = Source.objects.select_for_update(no_key=True).get(pk=delivery.source_id)
    if source.hook_received_at is None or source.hook_received_at < delivery.received_at:  # skipped by receive
        Source.objects.filter(pk=source.pk).update(hook_received_at=delivery.received_at)
    product = Product.objects.filter(key__iexact=source.product_key).first() if source.product_key else None
    if product is None:
        return DeliveryStatus.IGNORED, "the source has not synced yet; its first sync reads everything"
    if not source.enabled:
        return DeliveryStatus.IGNORED, "the source is disabled"
    connector = connectors(source)
    event = connector.hook_event(delivery.event, delivery.payload)
    ids = [connector.upstream_id(item) for item in event.items]
    held = set(
        SyncedRecord.objects.filter(
            source=source, kind__in=ITEM_MODELS, upstream_id__in=[*ids, *event.fetch, *event.gone]
        ).values_list("upstream_id", flat=True)
    )
    items, fetch = [], list(event.fetch)
    for item, upstream in zip(event.items, ids, strict=True):
        if upstream in held:
            items.append(item)  # the writer keeps the newer of it and what is stored
        elif event.new and not _gone_before(source, upstream):
            items.append(item)
        else:  # an edit of an item never seen, or one gone before: upstream says what it is now
            fetch.append(upstream)
    # A deletion is believed when upstream no longer has the item (or it left the source's
    # query): a forged, replayed or late one finds it there and writes what it is now. One
    # of an item not held deletes nothing; it is done, so a late "opened" of it is read
    # again from upstream instead of written (_gone_before).
    fetch += [upstream for upstream in event.gone if upstream in held]
    gone = [upstream for upstream in event.gone if upstream not in held]
    for upstream, item in connector.fetch(fetch).items() if fetch else ():
        if item is None:
            gone.append(upstream)
        else:
            items.append(item)
    tally = Tally()
    info = ProductInfo(product.key, product.name, product.description)
    writer = Writer(source, info, tally, product_is_ours=False, hook=True)
    if items:
        writer.write(mapped(connector, items, tally), None)
        writer.link_pending()
    if gone:
        records = SyncedRecord.objects.filter(source=source, kind__in=ITEM_MODELS, upstream_id__in=gone)
        tally.deleted += delete_records(product.key, list(records.values_list("kind", "key")))
        records.delete()
    if not (items or gone):
        return DeliveryStatus.IGNORED, "nothing in it for this source (another event, or a pull request)"
    said = f"created {tally.created}, updated {tally.updated}, deleted {tally.deleted}, unchanged {tally.unchanged}"
    if tally.skipped:
        said += f", skipped {tally.skipped}: " + "; ".join(tally.errors)
    return DeliveryStatus.DONE, said


def prune() -> int:
    """Delete the deliveries processed (or given up) more than WEBHOOK_KEEP_DAYS ago; how many."""
    before = timezone.now() - timedelta(days=settings.WEBHOOK_KEEP_DAYS)
    return Delivery.objects.exclude(status=DeliveryStatus.PENDING).filter(received_at__lt=before).delete()[0]


def _gone_before(source: Source, upstream_id: str) -> bool:
    return Delivery.objects.filter(
        source=source, upstream_id=upstream_id, status=DeliveryStatus.DONE, event__in=GONE_EVENTS
    ).exists()
