"""One sync of one source: read what changed, write it page by page, sweep deletions.

The invariants, in the order they matter:

- A page is written whole or not at all: its records, the bookkeeping of
  which upstream item each became, the duplicate links still waiting, and
  the checkpoint, in one transaction. The checkpoint never passes what was
  written, so a sync that dies (network, 5xx storm, SIGTERM) resumes from
  the last page it wrote, and upserts by key make reading a page twice
  harmless (`unchanged`).
- The next sync asks from the checkpoint minus OVERLAP: trackers store
  times at a precision (and in a zone) of their own, and an item updated
  while a page was read must not fall between two syncs.
- Records are written by `backlog.services.import_records`, the importer
  of JSON Lines files, so a synced record is validated, upserted and
  indexed exactly like an imported one.
- A sync never widens who sees what: a product it creates belongs to the
  teams set on the source, and a product that existed before keeps its teams.
- A source writes only what it owns: records it created (its SyncedRecord
  rows) or keys nothing holds yet, in its own product. A key held by
  anything else is refused for that item and reported; the page goes on.
  A product it did not create it feeds only when the operator named it
  (`--product`), and then never renames or edits it.
- In order of truth: an item is never written over a newer state of itself
  (SyncedRecord.upstream_updated), whoever wrote that (a sync or a webhook).
- Deletions come only from a complete listing of upstream ids (`all_ids`),
  never from an empty one while records are held, and never more than
  SYNC_SWEEP_MAX_SHARE of the source's records unless the operator says so.
- Upstream is untrusted input: an item that cannot be read is skipped and
  reported by key; a response that cannot be read ends the run with one line;
  every run is stored with its cause, and every run ends (SYNC_RUN_DEADLINE).
"""

import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models.functions import Upper
from django.utils import timezone

from backlog.audit import surface
from backlog.interchange import dumps
from backlog.models import Bug, Product, QATest
from backlog.services import DATABASE_REFUSED, export_selected, import_records, no_progress, stored_by_key

from .base import OVERLAP, Connector, FeatureRef, Mapped, ProductInfo, SyncError, product_key, slug
from .http import UpstreamError, without_credentials
from .models import RunStatus, Source, SyncedRecord, SyncRun
from .sources import connector_class

logger = logging.getLogger(__name__)

ERRORS_KEPT = 20
ITEM_MODELS = {"bug": Bug, "test": QATest}
KEY_MAX = Bug._meta.get_field("key").max_length
UPSTREAM_ID_MAX = SyncedRecord._meta.get_field("upstream_id").max_length


def credentials(source: Source) -> tuple[str | None, str]:
    """The user (or e-mail) and token the source names, read from the environment now."""
    if source.url != without_credentials(source.url):
        raise SyncError(
            f"the URL of {without_credentials(source.url)} holds a user or password: take them out of it and "
            f"put them in {source.user_env or 'the user variable'} and {source.token_env or 'the token variable'}"
        )
    token = os.environ.get(source.token_env, "") if source.token_env else ""
    user = os.environ.get(source.user_env, "") if source.user_env else None
    cls = connector_class(source.kind)
    if not token and cls.token_required:
        raise SyncError(
            f"{source.token_env or cls.token_env} is not set: put the {source.get_kind_display()} API token "
            "in that environment variable (docs/connectors.md says which token and scopes)"
        )
    return user or None, token


def connect(source: Source) -> Connector:
    user, token = credentials(source)
    return connector_class(source.kind)(source, user, token)


Progress = Callable[[str, int | None], object]


@dataclass
class _Tally:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    deleted: int = 0
    fetched: int = 0
    missed: int = 0
    errors: list[str] = field(default_factory=list)

    def error(self, message: str) -> str:
        """Log and keep `message` (the first ERRORS_KEPT); it as kept."""
        message = _storable_text(message)
        logger.warning("sync: %s", message)
        if len(self.errors) < ERRORS_KEPT:
            self.errors.append(message)
        return message


def run(
    source: Source,
    *,
    connector: Connector | None = None,
    product: ProductInfo | None = None,
    sweep: bool | None = None,
    full: bool = False,
    allow_mass_delete: bool = False,
    progress: Progress = no_progress,
) -> SyncRun:
    """Sync `source` (saved) once; its SyncRun, finished. Raises SyncError when
    the sync failed (the run is stored as failed, with its cause, and what
    was written is kept).

    `connector` and `product`: from a `check()` already made (the command
    checks before it saves a new source). `sweep`: look for deletions (None:
    when the source's sweep interval has passed). `full`: read everything,
    not only what changed since the checkpoint. `allow_mass_delete`: let a
    sweep delete more than SYNC_SWEEP_MAX_SHARE of the source's records.
    """
    with _exclusive(source), surface("sync", source=source.name):
        started = time.monotonic()
        sync_run = SyncRun.objects.create(source=source)
        tally = _Tally()
        try:
            connector = connector or connect(source)
            product = product or connector.check()
            ours = claim_product(source, product)
            if not source.product_key:  # kept: a renamed project still feeds the same product
                source.product_key = product.key
                source.save(update_fields=["product_key"])
            writer = _Writer(source, product, tally, ours)
            since = None if full or source.checkpoint is None else source.checkpoint - OVERLAP
            bar = progress("issues" if source.kind in ("jira", "github") else "items", None)
            for page in connector.changed(since):
                tally.fetched += len(page.items)
                writer.write(_mapped(connector, page.items, tally), page.checkpoint)
                bar.update(len(page.items))
                _save_progress(sync_run, tally, connector)
            bar.close()
            writer.link_pending()
            if sweep or (sweep is None and _sweep_due(source)):
                sync_run.swept = True
                _sweep(source, connector, product, tally, allow_mass_delete)
        except (UpstreamError, SyncError) as exc:
            _fail(sync_run, tally, connector, started, str(exc))
        except DatabaseError:
            # A value the database refused (its words go to the log, not to the run), or the
            # database gone: then storing the run fails too, and the caller (a watch round) waits.
            logger.exception("sync of %s failed in the database", source)
            _fail(sync_run, tally, connector, started, "the database refused a page; nothing of it was written")
        except Exception as exc:  # an answer no check foresaw: said in one line, never a traceback
            logger.exception("sync of %s failed", source)
            _fail(sync_run, tally, connector, started, f"upstream sent what could not be read ({_what(exc)})")
        except BaseException:
            tally.error("the sync was interrupted; the next one resumes from the last page written")
            sync_run.cause = "the sync was interrupted"
            _finish(sync_run, tally, connector, RunStatus.FAILED, started)
            raise
        _finish(sync_run, tally, connector, RunStatus.OK, started)
        return sync_run


def _fail(sync_run, tally, connector, started, message: str):
    if tally.fetched:
        message += "; the pages written before are kept, and the next sync resumes after them"
    sync_run.cause = tally.error(message)[:500]
    _finish(sync_run, tally, connector, RunStatus.FAILED, started)
    raise SyncError(message) from None


def _what(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: What mapping an item that is not what its vendor documents can raise.
UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError)


def _mapped(connector: Connector, items: list, tally: "_Tally") -> list[Mapped]:
    """The page's items mapped; one that cannot be read is skipped and reported by key."""
    mapped = []
    for item in items:
        try:
            m = connector.map(item)
        except UNREADABLE as exc:
            tally.skipped += 1
            why = exc if isinstance(exc, ValueError) else _what(exc)  # ValueErrors here are in words already
            tally.error(f"{connector.label(item)} was skipped: {why}")
            continue
        if m is not None:
            mapped.append(m)
    return mapped


def claim_product(source: Source, product: ProductInfo) -> bool:
    """Whether `source` owns its product (made it, or makes it now); False for
    a product it feeds only because the operator named it (`--product`, or
    the source's product key in the admin). SyncError for a product it
    neither made nor was given: a source never adopts a product by a key it
    derived from the upstream's name."""
    if source.pk is not None and (
        SyncedRecord.objects.filter(source=source, kind="product", key__iexact=product.key).exists()
    ):
        return True
    existing = Product.objects.filter(key__iexact=product.key).values_list("key", flat=True).first()
    if existing is None:
        return True
    if source.product_key and product_key(source.product_key) == product.key:
        return False
    raise SyncError(
        f"product {existing} exists and was not made by this source; to feed it, name it with --product "
        f"{existing} (its name, description and teams stay as they are), or give the source another product key"
    )


class _exclusive:
    """One sync of a source at a time, across processes: a PostgreSQL advisory
    lock held by this session (released when it ends, even by a crash). Runs
    left `running` by a sync that died are marked failed."""

    def __init__(self, source: Source):
        self.source = source
        self.locked = False

    def __enter__(self):
        if settings.DATABASE_POOLER:  # a session lock would stay on a pooled server connection
            return self
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_CLASS, self.source.pk])
            self.locked = cursor.fetchone()[0]
        if not self.locked:
            raise SyncError(f"{self.source} is being synced by another process; wait for it to finish")
        SyncRun.objects.filter(source=self.source, status=RunStatus.RUNNING).update(
            status=RunStatus.FAILED,
            finished_at=timezone.now(),
            errors=["stopped before it finished"],
            cause="stopped before it finished",
        )
        return self

    def __exit__(self, *exc):
        if self.locked:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, self.source.pk])


_LOCK_CLASS = 0x5359  # "SY": advisory locks of syncs, by source id


def _save_progress(sync_run: SyncRun, tally: _Tally, connector: Connector | None) -> None:
    for name in ("fetched", "created", "updated", "unchanged", "skipped", "deleted", "missed"):
        setattr(sync_run, name, getattr(tally, name))
    sync_run.requests = connector.client.requests_made if connector else 0
    sync_run.errors = tally.errors
    sync_run.save()


def _finish(sync_run, tally, connector, status, started) -> None:
    _save_progress(sync_run, tally, connector)
    sync_run.status = status
    sync_run.finished_at = sync_run.started_at + timedelta(seconds=time.monotonic() - started)
    sync_run.save(update_fields=["status", "finished_at", "cause"])


def _sweep_due(source: Source) -> bool:
    return source.swept_at is None or timezone.now() - source.swept_at >= timedelta(minutes=source.sweep_minutes)


#: A change upstream this much older than a sync, of a source that takes webhooks,
#: should have come by webhook: the sync counts it as missed.
HOOK_GRACE = timedelta(minutes=2)
#: How far ahead of this server's clock an upstream's may run before its times are not believed.
CLOCK_SKEW = timedelta(minutes=5)


class _Writer:
    """Writes pages of mapped items for one source and product (`hook`: for a
    webhook delivery, which never moves the checkpoint)."""

    def __init__(
        self, source: Source, product: ProductInfo, tally: _Tally, product_is_ours: bool = True, hook: bool = False
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

    def write(self, mapped: list[Mapped], checkpoint) -> None:
        with transaction.atomic():
            items = self._newest(self._owned([extra for m in mapped for extra in m.extra] + mapped))
            if not items:
                self._advance(checkpoint)
                return
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
            self.tally.deleted += _delete_records(self.product.key, renamed)
            self._own_product()
            self._advance(checkpoint)

    def _owned(self, items: list[Mapped]) -> list[Mapped]:
        """The items this source may write: keys within the database's limits,
        in this product, and either held by nothing or by a record this source
        wrote. The others are skipped and reported, the page goes on."""
        problems: dict[int, str] = {}
        for index, m in enumerate(items):
            key, upstream = m.record.get("key"), m.upstream_id
            if not _storable(key, KEY_MAX):
                problems[index] = f"its key is longer than {KEY_MAX} characters, or not text"
            elif not _storable(upstream):
                problems[index] = f"its upstream id is longer than {UPSTREAM_ID_MAX} characters, or not text"
            elif m.feature is not None and not _storable(m.feature.upstream_id):
                problems[index] = f"its feature's id is longer than {UPSTREAM_ID_MAX} characters, or not text"
            elif m.record.get("product") != self.product.key:
                problems[index] = f"it names product {str(m.record.get('product'))[:64]}, not {self.product.key}"
        keys = [m.record["key"] for index, m in enumerate(items) if index not in problems]
        held = stored_by_key(keys)
        product_id = Product.objects.filter(key__iexact=self.product.key).values_list("id", flat=True).first()
        mine = {
            (kind, key.upper())
            for kind, key in SyncedRecord.objects.filter(source=self.source, kind__in=ITEM_MODELS)
            .annotate(folded=Upper("key"))
            .filter(folded__in=list(held))
            .values_list("kind", "key")
        }
        for index, m in enumerate(items):
            folded = m.record["key"].upper() if index not in problems else None
            if folded in held:
                holder = held[folded]
                if (holder.kind, folded) not in mine or holder.kind != m.kind or holder.product_id != product_id:
                    problems[index] = "the key is taken by a record this source did not write"
        for index, why in problems.items():
            self.tally.skipped += 1
            self.tally.error(f"{str(items[index].record.get('key'))[:KEY_MAX]} was not written: {why}")
            self.source.pending_links.pop(items[index].record.get("key"), None)
        return [m for index, m in enumerate(items) if index not in problems]

    def _newest(self, items: list[Mapped]) -> list[Mapped]:
        """The items not older than the state already written of them (by a
        sync or a webhook: their rows locked to the end of the page, so two
        writers of one item take turns); the older are left, as unchanged."""
        if not items:
            return items
        stored = {
            (kind, upstream): updated
            for kind, upstream, updated in SyncedRecord.objects.select_for_update()
            .filter(source=self.source, upstream_id__in=[m.upstream_id for m in items])
            .values_list("kind", "upstream_id", "upstream_updated")
        }
        newest = []
        for m in items:
            if m.updated is not None and m.updated > self.started + CLOCK_SKEW:
                # A time to come is upstream's clock or a lie (year 9999): kept, it would
                # make every later true state of the item look older, and none be written.
                m.updated = None
            before = stored.get((m.kind, m.upstream_id))
            if before is not None and m.updated is not None and m.updated < before:
                self.tally.unchanged += 1
                continue
            behind = before is None or (m.updated and m.updated > before)
            if self.missed_before and m.updated and behind and m.updated < self.missed_before:
                self.tally.missed += 1
            newest.append(m)
        return newest

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
            (m.kind, m.upstream_id, m.record["key"], m.updated) for m in items if m.record["key"].upper() in written
        ]
        rows += [("feature", upstream, key, None) for upstream, key in self.features.items() if key in features]
        if self.product_is_ours:
            rows.append(("product", self.product.key, self.product.key, None))
        before = {
            (kind, upstream): key
            for kind, upstream, key in SyncedRecord.objects.filter(
                source=self.source, upstream_id__in=[upstream for _, upstream, _, _ in rows]
            ).values_list("kind", "upstream_id", "key")
        }
        renamed = [
            (kind, before[kind, upstream])
            for kind, upstream, key, _ in rows
            if kind in ITEM_MODELS and (kind, upstream) in before and before[kind, upstream].upper() != key.upper()
        ]
        SyncedRecord.objects.bulk_create(
            [
                SyncedRecord(source=self.source, kind=kind, upstream_id=upstream, key=key, upstream_updated=updated)
                for kind, upstream, key, updated in rows
            ],
            update_conflicts=True,
            unique_fields=["source", "kind", "upstream_id"],
            update_fields=["key", "upstream_updated"],
        )
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


def _storable_text(text: str) -> str:
    """Upstream's words as PostgreSQL stores them in JSON: no NUL, no lone surrogate."""
    return text.replace("\x00", "").encode(errors="replace").decode()


def _storable(value, limit: int = UPSTREAM_ID_MAX) -> bool:
    """A key or upstream id PostgreSQL can keep: text within `limit`, no NUL, valid UTF-8."""
    if not isinstance(value, str) or not 0 < len(value) <= limit or "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _problem_of(report, key: str) -> str:
    return next((p.message for p in report.problems if p.key and p.key.upper() == key.upper()), "refused")


def _sweep(
    source: Source, connector: Connector, product: ProductInfo, tally: _Tally, allow_mass_delete: bool = False
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
        removed = _delete_records(product.key, [(kind, key) for kind, _, key in gone])
        tally.deleted += removed
        if source.hook_received_at is not None:  # a webhook should have said so
            tally.missed += removed
        for kind in ITEM_MODELS:
            upstream_ids = [upstream for k, upstream, _ in gone if k == kind]
            SyncedRecord.objects.filter(source=source, kind=kind, upstream_id__in=upstream_ids).delete()
        source.swept_at = timezone.now()
        source.save(update_fields=["swept_at"])


def _delete_records(product_key: str, records: list[tuple[str, str]]) -> int:
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
