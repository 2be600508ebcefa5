"""What a delivery is checked against before it may cost the database anything.

Anyone can POST to /hooks/<kind>, and a flood of unsigned deliveries must
cost far less than a search: the enabled sources a signature is checked
against are kept in this process for SOURCES_SECONDS (and forgotten at once
when a source is saved or deleted here), and the deliveries refused or
ignored are counted in memory and added to their sources' counters
(Source.hook_refused, hook_ignored) by a thread of this process,
FLUSH_SECONDS after the first count it has not added yet. A refusal reads
and writes nothing; a delivery that is signed reads its sources again
before anything is stored for them.
"""

import threading
import time
from collections import Counter

from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from ..models import Source

SOURCES_SECONDS = 5.0
FLUSH_SECONDS = 10.0

_lock = threading.Lock()
_sources: dict[str, tuple[float, list[Source]]] = {}
_counts: Counter = Counter()  # (source id, "hook_refused" or "hook_ignored") -> deliveries not yet added
_refused_at: dict[int, object] = {}
_timer: threading.Timer | None = None


def enabled_sources(kind: str) -> list[Source]:
    """The enabled sources of `kind`, as read at most SOURCES_SECONDS ago in this process."""
    now = time.monotonic()
    with _lock:
        kept = _sources.get(kind)
    if kept is not None and now - kept[0] < SOURCES_SECONDS:
        return kept[1]
    sources = list(Source.objects.filter(kind=kind, enabled=True))
    with _lock:
        _sources[kind] = (now, sources)
    return sources


def forget_sources(**kwargs) -> None:
    with _lock:
        _sources.clear()


post_save.connect(forget_sources, sender=Source, dispatch_uid="hooks-gate-saved")
post_delete.connect(forget_sources, sender=Source, dispatch_uid="hooks-gate-deleted")


def count(source_ids: list[int], counter: str) -> None:
    """One more delivery refused (counter "hook_refused") or ignored ("hook_ignored") for each
    source, added to the sources by a flush FLUSH_SECONDS from the first count not yet added."""
    global _timer
    with _lock:
        for source_id in source_ids:
            _counts[source_id, counter] += 1
            if counter == "hook_refused":
                _refused_at[source_id] = timezone.now()
        if _timer is None and _counts:
            _timer = threading.Timer(FLUSH_SECONDS, _flush_in_thread)
            _timer.daemon = True
            _timer.start()


def _flush_in_thread() -> None:
    global _timer
    with _lock:
        _timer = None
    try:
        flush()
    finally:
        connection.close()  # this thread's own


def discard() -> None:
    """Forget the counts not added yet, and the flush due for them (tests/conftest.py: a
    flush 10 s on would write to whichever test's database is open then)."""
    global _timer
    with _lock:
        if _timer is not None:
            _timer.cancel()
        _timer = None
        _counts.clear()
        _refused_at.clear()
        _sources.clear()


def flush() -> None:
    """Add the counts kept here to their sources: one UPDATE a source, skipping any whose row
    a processor holds (it reads upstream while it does: a request never waits on it); what
    could not be added now (a row held, the database away) is kept for the next flush."""
    with _lock:
        counts, refused_at = dict(_counts), dict(_refused_at)
        _counts.clear()
        _refused_at.clear()
    if not counts:
        return
    try:
        held = _add(counts, refused_at)
    except DatabaseError:
        held = {source_id for source_id, _ in counts}
    kept = {key: n for key, n in counts.items() if key[0] in held}
    if kept:
        _keep_for_later(kept, refused_at)
        count([], "hook_ignored")  # and flush again later


def _add(counts: dict, refused_at: dict) -> set[int]:
    """The counts added to the sources whose rows are free; the ids of those held (a source
    deleted since is neither: its counts are dropped)."""
    ids = {source_id for source_id, _ in counts}
    with transaction.atomic():
        there = Source.objects.filter(pk__in=ids)
        free = set(there.select_for_update(skip_locked=True, no_key=True).values_list("pk", flat=True))
        held = set(there.values_list("pk", flat=True)) - free
        for source_id in free:
            changes = {name: F(name) + n for (pk, name), n in counts.items() if pk == source_id}
            if source_id in refused_at:
                changes["hook_refused_at"] = refused_at[source_id]
            Source.objects.filter(pk=source_id).update(**changes)
    return held


def _keep_for_later(counts: dict, refused_at: dict) -> None:
    with _lock:
        _counts.update(counts)
        for source_id, _ in counts:
            if source_id in refused_at:
                _refused_at.setdefault(source_id, refused_at[source_id])
