"""The deletion sweep: records whose upstream item is gone are deleted.

Deletions come only from a complete listing of upstream ids (`all_ids`),
never from an empty one while records are held, and never more than
SYNC_SWEEP_MAX_SHARE of the source's records unless the operator says so.

What is deleted stays known as deleted: deleting a record moves its
SyncedRecord row to a Tombstone (a trigger on the record tables, migration
0006, whoever deletes it), and `bury` keeps the items whose record was gone
already. A webhook that later brings one back is read from upstream first.
"""

from collections import Counter

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .base import Connector, ProductInfo, SyncError
from .models import Source, SyncedRecord, Tombstone
from .ownership import ITEM_MODELS
from .tally import Tally


def delete_gone(
    source: Source, connector: Connector, product: ProductInfo, tally: Tally, allow_mass_delete: bool = False
) -> None:
    """Delete the records whose upstream item is gone (deleted, moved out of the
    project, transferred, or no longer matched by the source's query): only
    records this source wrote, and, unless allowed, never more than
    SYNC_SWEEP_MAX_SHARE of them at once (a listing cut short looks like that)."""
    listed = connector.all_ids()
    held = Counter()
    gone: list[tuple[str, str, str]] = []
    for kind, upstream, key in SyncedRecord.objects.filter(source=source, kind__in=ITEM_MODELS).values_list(
        "kind", "upstream_id", "key"
    ):
        held[kind] += 1
        if (kind, upstream) not in listed:
            gone.append((kind, upstream, key))
    if not listed and sum(held.values()):
        raise SyncError(
            f"upstream listed no items while {sum(held.values())} are held; nothing was deleted. "
            "Check that the token still sees the project"
        )
    if gone:
        confirmed = connector.confirm_gone({upstream for _, upstream, _ in gone})
        gone = [(kind, upstream, key) for kind, upstream, key in gone if upstream in confirmed]
    total = sum(held.values())
    share = settings.SYNC_SWEEP_MAX_SHARE
    if not allow_mass_delete and len(gone) > settings.SYNC_SWEEP_MIN_RECORDS and len(gone) > share * total:
        raise SyncError(
            f"the deletion sweep would delete {len(gone)} of the {total} records this source holds, more than "
            f"{share:.0%} (SYNC_SWEEP_MAX_SHARE); nothing was deleted. If they are gone upstream, sync again "
            f"with --allow-mass-delete: manage.py sync {source.name!r} --sweep --allow-mass-delete"
        )
    with transaction.atomic():
        removed = delete_records(product.key, [(kind, key) for kind, _, key in gone])
        tally.deleted += removed
        if source.hook_received_at is not None:  # a webhook should have said so
            tally.missed += removed
        for kind in ITEM_MODELS:
            upstream_ids = [upstream for k, upstream, _ in gone if k == kind]
            left = SyncedRecord.objects.filter(source=source, kind=kind, upstream_id__in=upstream_ids)
            bury(source, kind, list(left.values_list("upstream_id", flat=True)))  # their records were gone already
            left.delete()
        source.swept_at = timezone.now()
        source.save(update_fields=["swept_at"])


def delete_records(product_key: str, records: list[tuple[str, str]]) -> int:
    """Delete the (kind, key) records of the product; how many were there."""
    deleted = 0
    for kind, model in ITEM_MODELS.items():
        if keys := [key for k, key in records if k == kind]:
            deleted += (
                model.objects.filter(product__key__iexact=product_key, key__in=keys)
                .delete()[1]
                .get(model._meta.label, 0)
            )
    return deleted


def bury(source: Source, kind: str, upstream_ids: list[str]) -> None:
    """Tombstones for the items upstream no longer has whose record is not here to delete
    (never written, or deleted before): the trigger writes the others'."""
    Tombstone.objects.bulk_create(
        [Tombstone(source=source, kind=kind, upstream_id=upstream) for upstream in upstream_ids], ignore_conflicts=True
    )
