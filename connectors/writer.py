"""The page writer: a page of mapped items, written whole or not at all.

- A page's records, the bookkeeping of which upstream item each became, the
  duplicate links still waiting, and the checkpoint go in one transaction.
  The checkpoint never passes what was written, so a sync that dies
  (network, 5xx storm, SIGTERM) resumes from the last page it wrote, and
  upserts by key make reading a page twice harmless (`unchanged`).
- Records are written by `backlog.imports.import_records`, the importer
  of JSON Lines files, so a synced record is validated, upserted and
  indexed exactly like an imported one.
- It writes only what the source owns (connectors.ownership).
- In order of truth: an item is never written over a newer state of itself
  (SyncedRecord.upstream_updated), whoever wrote that (a sync or a webhook).
  Upstream times have a precision (GitHub's and TestRail's, the second): a
  state of the same time but other content (SyncedRecord.content_hash) is
  not newer, it is in doubt. Upstream's own answer (a sync's page, an item
  read again by id) is written; a webhook's payload is handed back, to be
  read again (`write(..., hinted=True)`).
- An item written is no longer known as deleted (its Tombstone goes).
- An item that cannot be read is skipped and reported by key; the page goes on.

A sync (connectors.sync) and a webhook delivery (connectors.hooks) write
through this one writer.
"""

import hashlib
import json
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from backlog.exports import export_selected
from backlog.imports import DATABASE_REFUSED, import_records
from backlog.interchange import dumps
from backlog.keys import stored_by_key
from backlog.models import Bug, Product

from .base import Connector, FeatureRef, Mapped, ProductInfo, SyncError, slug
from .models import Source, SyncedRecord, Tombstone
from .ownership import ITEM_MODELS, KEY_MAX, refusals
from .sweep import delete_records
from .tally import Tally, one_line

#: What mapping an item that is not what its vendor documents can raise.
UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError)


def mapped(connector: Connector, items: list, tally: Tally) -> list[Mapped]:
    """The page's items mapped; one that cannot be read is skipped and reported by key."""
    kept = []
    for item in items:
        try:
            m = connector.map(item)
        except UNREADABLE as exc:
            tally.skipped += 1
            why = exc if isinstance(exc, ValueError) else one_line(exc)  # ValueErrors here are in words already
            tally.error(f"{connector.label(item)} was skipped: {why}")
            continue
        if m is not None:
            kept.append(m)
    return kept


#: A change upstream this much older than a sync, of a source that takes webhooks,
#: should have come by webhook: the sync counts it as missed.
HOOK_GRACE = timedelta(minutes=2)
#: How far ahead of this server's clock an upstream's may run before its times are not believed.
CLOCK_SKEW = timedelta(minutes=5)


class Writer:
    """Writes pages of mapped items for one source and product (`hook`: for a
    webhook delivery, which never moves the checkpoint)."""

    def __init__(
        self, source: Source, product: ProductInfo, tally: Tally, product_is_ours: bool = True, hook: bool = False
    ):
        self.source = source
        self.product = product
        self.tally = tally
        self.started = timezone.now()
        self.hook = hook
        # What a sync writes that changed upstream before this, a webhook should have brought.
        self.missed_before = None if hook or source.hook_received_at is None else self.started - HOOK_GRACE
        self.features = dict(
            SyncedRecord.objects.filter(source=source, kind="feature").values_list("upstream_id", "key")
        )
        self.product_is_ours = product_is_ours
        self.teams_set = False  # the product's teams are set once a sync, with its first page

    def feature_key(self, ref: FeatureRef, taken: set[str]) -> str:
        """A feature's key: the one it was given before (a renamed component keeps
        it), else the product key and the name's slug, else with its id too."""
        if ref.upstream_id in self.features:
            return self.features[ref.upstream_id]
        base = f"{self.product.key}.{slug(ref.name) or 'feature'}"[:64]
        key = base
        if key.upper() in taken or stored_by_key([key]):
            key = f"{base[:40]}-{slug(ref.upstream_id, 20)}"
        self.features[ref.upstream_id] = key
        taken.add(key.upper())
        return key

    def write(self, mapped: list[Mapped], checkpoint, hinted: bool = False) -> list[str]:
        """Write a page; the upstream ids of those left in doubt (only when `hinted`:
        the items are a webhook's payload, not upstream's answer), to be read again."""
        with transaction.atomic():
            items, doubted = self._newest(self._owned([extra for m in mapped for extra in m.extra] + mapped), hinted)
            if not items:
                self._advance(checkpoint)
                return doubted
            taken = {key.upper() for key in self.features.values()}
            features: dict[str, dict] = {}
            for m in items:
                if m.feature is not None:
                    key = self.feature_key(m.feature, taken)
                    m.record["feature"] = key
                    features[key] = {
                        "kind": "feature",
                        "key": key,
                        "product": self.product.key,
                        "name": m.feature.name[:500],
                        "description": m.feature.description,
                    }
            links = self._links(items)
            product = [self._product_record()] if self.product_is_ours else []
            records = [*product, *features.values(), *(m.record for m in items)]
            for m in items:
                if m.record["key"] in links:
                    m.record["duplicate_of"] = links[m.record["key"]]
            written = self._import(records)
            renamed = self._remember(items, features, written)
            self.tally.deleted += delete_records(self.product.key, renamed)
            self._own_product()
            self._advance(checkpoint)
        return doubted

    def _owned(self, items: list[Mapped]) -> list[Mapped]:
        """The items this source may write (connectors.ownership.refusals); the
        others are skipped and reported, the page goes on."""
        problems = refusals(self.source, self.product.key, items)
        for index, why in problems.items():
            self.tally.skipped += 1
            self.tally.error(f"{str(items[index].record.get('key'))[:KEY_MAX]} was not written: {why}")
            self.source.pending_links.pop(items[index].record.get("key"), None)
        return [m for index, m in enumerate(items) if index not in problems]

    def _newest(self, items: list[Mapped], hinted: bool) -> tuple[list[Mapped], list[str]]:
        """The items to write: not older than the state already written of them (by
        a sync or a webhook: their rows locked to the end of the page, so two
        writers of one item take turns); the older are left, as unchanged. Of
        the `hinted` (a webhook's payload), those of the stored state's time
        but other content are left too: their upstream ids, the second list."""
        if not items:
            return items, []
        stored = {
            (kind, upstream): (updated, content)
            for kind, upstream, updated, content in SyncedRecord.objects.select_for_update()
            .filter(source=self.source, upstream_id__in=[m.upstream_id for m in items])
            .values_list("kind", "upstream_id", "upstream_updated", "content_hash")
        }
        newest, doubted = [], []
        for m in items:
            if m.updated is not None and m.updated > self.started + CLOCK_SKEW:
                # A time to come is upstream's clock or a lie (year 9999): kept, it would
                # make every later true state of the item look older, and none be written.
                m.updated = None
            before, content = stored.get((m.kind, m.upstream_id), (None, ""))
            order = order_of(m.updated, before)
            if order == OLDER:
                self.tally.unchanged += 1
                continue
            if order == SAME_TIME and hinted and content != content_hash(m):
                doubted.append(m.upstream_id)
                continue
            if self.missed_before and m.updated and order == NEWER and m.updated < self.missed_before:
                self.tally.missed += 1
            newest.append(m)
        return newest, doubted

    def _advance(self, checkpoint) -> None:
        if self.hook:  # only pending links: a sync may be moving the checkpoint meanwhile
            self.source.save(update_fields=["pending_links"])
            return
        # A time later than this sync's start is upstream's clock or a lie (year 9999):
        # kept as the checkpoint, it would hide every later change from every later sync.
        if checkpoint is not None:
            checkpoint = min(checkpoint, self.started)
        if checkpoint is not None and (self.source.checkpoint is None or checkpoint > self.source.checkpoint):
            self.source.checkpoint = checkpoint
        self.source.save(update_fields=["checkpoint", "pending_links"])

    def _product_record(self) -> dict:
        record = {"kind": "product", "key": self.product.key, "name": self.product.name[:500]}
        if self.product.description:
            record["description"] = self.product.description
        return record

    def _links(self, items: list[Mapped]) -> dict[str, str]:
        """The duplicate links that can be written with this page: those whose
        original is in the page or stored in the product. The rest wait in
        the source's pending_links."""
        pending = self.source.pending_links
        in_page = {m.record["key"].upper() for m in items}
        for m in items:
            pending.pop(m.record["key"], None)
        wanted = {m.record["key"]: m.duplicate_of for m in items if m.duplicate_of}
        stored = {
            key.upper()
            for key in Bug.objects.filter(
                product__key__iexact=self.product.key, key__in=list(wanted.values())
            ).values_list("key", flat=True)
        }
        links = {}
        for key, target in wanted.items():
            if target.upper() in in_page or target.upper() in stored:
                links[key] = target
            else:
                pending[key] = target
        return links

    def _import(self, records: list[dict]) -> set[str]:
        """Import the page's records; the keys written. A record the importer
        refuses because of its duplicate link is written without it; one
        refused for anything else is skipped and reported."""
        report = import_records([dumps(record) for record in records])
        if report.problems:
            refused = {problem.key.upper() for problem in report.problems if problem.key}
            for record in records:
                if record.get("duplicate_of") and record["key"].upper() in refused:
                    self.tally.error(
                        f"{record['key']}: the link to {record.pop('duplicate_of')} was left out "
                        f"({_problem_of(report, record['key'])})"
                    )
            report = import_records([dumps(record) for record in records], skip_invalid=True)
        if any(problem.message == DATABASE_REFUSED for problem in report.problems):
            raise SyncError("the database refused a page; nothing of it was written (the server's log says why)")
        refused = {problem.key.upper() for problem in report.problems if problem.key}
        for problem in report.problems:
            self.tally.error(f"{problem.key or 'a record'} was not written: {problem.message}")
        kinds = ("feature", "test", "bug")
        self.tally.created += sum(report.created[kind] for kind in kinds)
        self.tally.updated += sum(report.updated[kind] for kind in kinds)
        self.tally.unchanged += sum(report.unchanged[kind] for kind in kinds)
        self.tally.skipped += len({key for key in refused if key != self.product.key.upper()})
        if self.product.key.upper() in refused:
            raise SyncError(
                f"product {self.product.key} could not be written ({_problem_of(report, self.product.key)}); "
                "give the source another product key"
            )
        return {record["key"].upper() for record in records} - refused

    def _remember(self, items: list[Mapped], features: dict, written: set[str]) -> list[tuple[str, str]]:
        """Record which upstream item each written record is; the (kind, key) of
        records whose item now has another key (a moved issue), to delete."""
        rows = [
            (m.kind, m.upstream_id, m.record["key"], m.updated, content_hash(m))
            for m in items
            if m.record["key"].upper() in written
        ]
        rows += [("feature", upstream, key, None, "") for upstream, key in self.features.items() if key in features]
        if self.product_is_ours:
            rows.append(("product", self.product.key, self.product.key, None, ""))
        before = {
            (kind, upstream): key
            for kind, upstream, key in SyncedRecord.objects.filter(
                source=self.source, upstream_id__in=[row[1] for row in rows]
            ).values_list("kind", "upstream_id", "key")
        }
        renamed = [
            (kind, before[kind, upstream])
            for kind, upstream, key, *_ in rows
            if kind in ITEM_MODELS and (kind, upstream) in before and before[kind, upstream].upper() != key.upper()
        ]
        SyncedRecord.objects.bulk_create(
            [
                SyncedRecord(
                    source=self.source, kind=kind, upstream_id=upstream, key=key, upstream_updated=at, content_hash=h
                )
                for kind, upstream, key, at, h in rows
            ],
            update_conflicts=True,
            unique_fields=["source", "kind", "upstream_id"],
            update_fields=["key", "upstream_updated", "content_hash"],
        )
        for kind in ITEM_MODELS:  # written again: no longer known as deleted
            if upstream_ids := [upstream for k, upstream, *_ in rows if k == kind]:
                Tombstone.objects.filter(source=self.source, kind=kind, upstream_id__in=upstream_ids).delete()
        return renamed

    def _own_product(self) -> None:
        """A product this source created belongs to the source's teams, and to no one else."""
        if self.product_is_ours and self.source.pk and not self.teams_set:
            Product.objects.get(key__iexact=self.product.key).teams.set(self.source.teams.all())
            self.teams_set = True

    def link_pending(self) -> None:
        """Write the waiting duplicate links whose original has arrived since."""
        pending = self.source.pending_links
        if not pending:
            return
        stored = dict(
            Bug.objects.filter(
                product__key__iexact=self.product.key, key__in=[*pending, *pending.values()]
            ).values_list("key", "id")
        )
        mine = set(
            SyncedRecord.objects.filter(source=self.source, kind="bug", key__in=list(pending)).values_list(
                "key", flat=True
            )
        )
        ready = {key: target for key, target in pending.items() if key in mine and key in stored and target in stored}
        if not ready:
            return
        with transaction.atomic():
            records = list(export_selected([("bug", stored[key]) for key in ready]))
            for record in records:
                record["duplicate_of"] = ready[record["key"]]
            report = import_records([dumps(record) for record in records], skip_invalid=True)
            for problem in report.problems:
                self.tally.error(f"{problem.key}: the duplicate link was left out ({problem.message})")
            for key in ready:
                pending.pop(key, None)
            self.source.save(update_fields=["pending_links"])


OLDER, SAME_TIME, NEWER = "older", "same time", "newer"


def order_of(updated, before) -> str:
    """How an item's upstream time stands to the stored state's: OLDER, SAME_TIME
    (at upstream's precision, not newer: which came last is not known), or
    NEWER (also when either time is unknown, as a state of no time is)."""
    if updated is None or before is None or updated > before:
        return NEWER
    return OLDER if updated < before else SAME_TIME


def content_hash(m: Mapped) -> str:
    """A hash of what an item writes, to tell two states of one upstream time
    apart. The record's feature key and duplicate link are left out as the
    writer fills them in; their upstream sources (m.feature, m.duplicate_of) count."""
    record = {name: value for name, value in m.record.items() if name not in ("feature", "duplicate_of")}
    feature = None if m.feature is None else [m.feature.upstream_id, m.feature.name, m.feature.description]
    text = json.dumps([record, feature, m.duplicate_of], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _problem_of(report, key: str) -> str:
    return next((p.message for p in report.problems if p.key and p.key.upper() == key.upper()), "refused")
