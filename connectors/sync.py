"""One sync of one source: read what changed, write it page by page, sweep deletions.

The invariants, in the order they matter (each kept where it is said):

- A page is written whole or not at all, and the checkpoint never passes
  what was written (connectors.writer): a sync that dies resumes from the
  last page it wrote.
- The next sync asks from the checkpoint minus OVERLAP: trackers store
  times at a precision (and in a zone) of their own, and an item updated
  while a page was read must not fall between two syncs.
- A source writes only what it owns, and never widens who sees what
  (connectors.ownership).
- In order of truth: an item is never written over a newer state of itself,
  whoever wrote that, a sync or a webhook (connectors.writer).
- Deletions come only from a complete listing of upstream ids, and never
  too many at once unless the operator says so (connectors.sweep).
- Upstream is untrusted input: an item that cannot be read is skipped and
  reported by key; a response that cannot be read ends the run with one line;
  every run is stored with its cause, and every run ends (SYNC_RUN_DEADLINE).
"""

import logging
import os
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from backlog.audit import surface
from backlog.imports import no_progress

from .base import OVERLAP, Connector, ProductInfo, SyncError
from .http import UpstreamError, without_credentials
from .models import RunStatus, Source, SyncRun
from .ownership import claim_product
from .sources import connector_class
from .sweep import delete_gone
from .tally import Tally, one_line
from .writer import Writer, mapped

logger = logging.getLogger(__name__)


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
        tally = Tally()
        try:
            connector = connector or connect(source)
            product = product or connector.check()
            ours = claim_product(source, product)
            if not source.product_key:  # kept: a renamed project still feeds the same product
                source.product_key = product.key
                source.save(update_fields=["product_key"])
            writer = Writer(source, product, tally, ours)
            _write_changed(sync_run, connector, writer, full, progress)
            writer.link_pending()
            if sweep or (sweep is None and _sweep_due(source)):
                sync_run.swept = True
                delete_gone(source, connector, product, tally, allow_mass_delete)
        except (UpstreamError, SyncError) as exc:
            _fail(sync_run, tally, connector, started, str(exc))
        except DatabaseError:
            # A value the database refused (its words go to the log, not to the run), or the
            # database gone: then storing the run fails too, and the caller (a watch round) waits.
            logger.exception("sync of %s failed in the database", source)
            _fail(sync_run, tally, connector, started, "the database refused a page; nothing of it was written")
        except Exception as exc:  # an answer no check foresaw: said in one line, never a traceback
            logger.exception("sync of %s failed", source)
            _fail(sync_run, tally, connector, started, f"upstream sent what could not be read ({one_line(exc)})")
        except BaseException:
            tally.error("the sync was interrupted; the next one resumes from the last page written")
            sync_run.cause = "the sync was interrupted"
            _finish(sync_run, tally, connector, RunStatus.FAILED, started)
            raise
        _finish(sync_run, tally, connector, RunStatus.OK, started)
        return sync_run


def _write_changed(sync_run: SyncRun, connector: Connector, writer: Writer, full: bool, progress: Progress) -> None:
    """Write what changed since the checkpoint (less OVERLAP; everything when `full`), page by page."""
    source, tally = writer.source, writer.tally
    since = None if full or source.checkpoint is None else source.checkpoint - OVERLAP
    bar = progress("issues" if source.kind in ("jira", "github") else "items", None)
    for page in connector.changed(since):
        tally.fetched += len(page.items)
        writer.write(mapped(connector, page.items, tally), page.checkpoint)
        bar.update(len(page.items))
        _save_progress(sync_run, tally, connector)
    bar.close()


def _fail(sync_run, tally, connector, started, message: str):
    if tally.fetched:
        message += "; the pages written before are kept, and the next sync resumes after them"
    sync_run.cause = tally.error(message)[:500]
    _finish(sync_run, tally, connector, RunStatus.FAILED, started)
    raise SyncError(message) from None


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


def _save_progress(sync_run: SyncRun, tally: Tally, connector: Connector | None) -> None:
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
