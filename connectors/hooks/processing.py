"""Webhook processing: the deliveries taken, applied after they were answered.

- **processed after** by `manage.py hooks --watch` (serve runs it), in the
  order received, through the sync's own writer (connectors.writer): the
  same validation, ownership rules, duplicate links and index triggers, the
  delivery's whole effect and its status in one transaction;
- **in order of truth**: an item is never written over a newer state of
  itself (SyncedRecord.upstream_updated); where the payload is partial
  (Jira's, TestRail's: every item is read again) or its order in doubt (an
  edit of an issue never seen, another state of the second already
  written), the item is read again from upstream, which is the truth
  whatever order deliveries came in;
- **what is known deleted stays deleted**: an item not held whose record
  was deleted here (a Tombstone: by a sweep, a webhook or a curator) is
  read again from upstream before it is written, however late or often a
  delivery brings it back.
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

from ..base import Connector, HookEvent, ProductInfo, SyncError
from ..http import UpstreamError
from ..models import Delivery, DeliveryStatus, Source, SyncedRecord, Tombstone
from ..ownership import ITEM_MODELS
from ..sweep import bury, delete_records
from ..sync import connect
from ..tally import Tally
from ..writer import UNREADABLE, Writer, mapped

logger = logging.getLogger("connectors.hooks")  # the name its warnings have always had in the logs

#: How often a delivery that failed (upstream or database down) is tried, and how long between tries.
ATTEMPTS = 5
RETRY_AFTER = timedelta(seconds=30)


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
    asks = _Asks(source, connector, connector.hook_event(delivery.event, delivery.payload))
    tally = Tally()
    info = ProductInfo(product.key, product.name, product.description)
    writer = Writer(source, info, tally, product_is_ours=False, hook=True)
    # The payload's items first: those whose order is in doubt come back, to be read with the rest.
    doubted = writer.write(mapped(connector, asks.hinted, tally), None, hinted=True) if asks.hinted else []
    read = connector.fetch(asks.fetch + doubted) if asks.fetch or doubted else {}
    fetched = [item for item in read.values() if item is not None]
    if fetched:
        writer.write(mapped(connector, fetched, tally), None)
    if asks.hinted or fetched:
        writer.link_pending()
    gone = asks.gone + [upstream for upstream, item in read.items() if item is None]
    if gone:
        tally.deleted += _delete(source, connector, product.key, gone, asks.held)
    if not (asks.hinted or fetched or gone):
        return DeliveryStatus.IGNORED, "nothing in it for this source (another event, or a pull request)"
    said = f"created {tally.created}, updated {tally.updated}, deleted {tally.deleted}, unchanged {tally.unchanged}"
    if absent := [upstream for upstream, item in read.items() if item is None and upstream not in asks.held]:
        said += f"; not written: {', '.join(absent[:10])} {'is' if len(absent) == 1 else 'are'} no longer upstream"
    if tally.skipped:
        said += f", skipped {tally.skipped}: " + "; ".join(tally.errors)
    return DeliveryStatus.DONE, said


def _delete(source: Source, connector: Connector, product_key: str, gone: list[str], held: set[str]) -> int:
    """Delete the records of the items upstream no longer has; how many there were.
    Deleting a record moves its row to a tombstone (a trigger, migration 0006); an
    item never held, or whose record was gone already, is buried here: a late
    "opened" of any of them is read again from upstream too."""
    records = SyncedRecord.objects.filter(source=source, kind__in=ITEM_MODELS, upstream_id__in=gone)
    deleted = delete_records(product_key, list(records.values_list("kind", "key")))
    left = set(records.values_list("upstream_id", flat=True))
    records.delete()
    bury(source, connector.item_kind, [upstream for upstream in gone if upstream not in held or upstream in left])
    return deleted


class _Asks:
    """What a delivery's event asks of this source: `hinted`, the payload's items to
    write as they are (the writer keeps the newer of each and what is stored),
    `fetch`, the ids to read from upstream first, `gone`, those upstream no
    longer has (nothing to read), and `held`, the ids the source holds."""

    def __init__(self, source: Source, connector: Connector, event: HookEvent):
        ids = [connector.upstream_id(item) for item in event.items]
        self.held = set(
            SyncedRecord.objects.filter(
                source=source, kind__in=ITEM_MODELS, upstream_id__in=[*ids, *event.fetch, *event.gone]
            ).values_list("upstream_id", flat=True)
        )
        buried = set(
            Tombstone.objects.filter(
                source=source, kind__in=ITEM_MODELS, upstream_id__in=[i for i in ids if i not in self.held]
            ).values_list("upstream_id", flat=True)
        )
        self.hinted, self.fetch = [], list(event.fetch)
        for item, upstream in zip(event.items, ids, strict=True):
            if upstream in self.held or (event.new and upstream not in buried):
                self.hinted.append(item)
            else:  # an edit of an item never seen, or one deleted here: upstream says what it is now
                self.fetch.append(upstream)
        # A deletion is believed when upstream no longer has the item (or it left the source's
        # query): a forged, replayed or late one finds it there and writes what it is now. One
        # of an item not held deletes nothing, and is buried (sweep.bury).
        self.fetch += [upstream for upstream in event.gone if upstream in self.held]
        self.gone = [upstream for upstream in event.gone if upstream not in self.held]


def prune() -> int:
    """Delete the deliveries processed (or given up) more than WEBHOOK_KEEP_DAYS ago; how many."""
    before = timezone.now() - timedelta(days=settings.WEBHOOK_KEEP_DAYS)
    return Delivery.objects.exclude(status=DeliveryStatus.PENDING).filter(received_at__lt=before).delete()[0]
