"""A write that went wrong, handled by a person: retried, or dropped.

`retry(write_id, user, surface)`: a `failed` write is pending again, due now,
and sent within WRITEBACK_WAIT_SECONDS as a new one is. It keeps its marker
and counts as sent once, so its next send asks upstream for the marker
first (writeback.worker.send asks from the second attempt on): an issue an
earlier try made, its answer lost, is found, not made again. The cap on
sends (WRITEBACK_ATTEMPTS) counts again from the retry; the deadline
(WRITEBACK_DEADLINE) and its place in its source's order stay those of the
first ask (the marker is looked for from then).

`drop(write_id, user, surface)`: a `pending` or `failed` write is `dropped`
and never sent. A send in flight that lands first wins (the same conditional
UPDATE on status and attempts the sender settles with): the answer is the
write as it then is, and a dropped write that was sent says so.

Who may: the person who asked for it, or a staff member who sees its product;
anyone else is told there is no such write (NotFound, as service.get). Each
says who did it and through which surface, in the write's `note`.
"""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backlog import access
from search.contract import NotFound, SearchError

from . import worker
from .contract import WriteResponse
from .models import Status, UpstreamWrite


class CannotChange(SearchError):
    status = 409
    code = "conflict"


def retry(write_id: int, user, surface: str) -> dict:
    """A failed write sent again (its marker asked for first); the write as it then is."""
    with transaction.atomic():
        write = _held(write_id, user)
        if write.status != Status.FAILED:
            raise CannotChange(f"write {write.pk} is {write.status}: only a failed write is retried.")
        now = timezone.now()
        UpstreamWrite.objects.filter(pk=write.pk, status=Status.FAILED).update(
            status=Status.PENDING,
            attempts=1,  # the next send is a second one: it asks for the marker first
            next_try_at=now,
            error="",
            note=f"retried by {_name(user)} through {surface}"[:1000],
            updated_at=now,
        )
    if settings.WRITEBACK_WAIT_SECONDS > 0:
        worker.send_now(write.pk, settings.WRITEBACK_WAIT_SECONDS)
    return _answer(write.pk)


def drop(write_id: int, user, surface: str) -> dict:
    """A pending or failed write never sent; the write as it then is."""
    with transaction.atomic():
        write = _held(write_id, user)
        if write.status not in (Status.PENDING, Status.FAILED):
            raise CannotChange(
                f"write {write.pk} is {write.status}: a sent write is upstream's now (undo it there), "
                "and a dropped one is dropped already."
            )
        UpstreamWrite.objects.filter(pk=write.pk, status=write.status, attempts=write.attempts).update(
            status=Status.DROPPED,
            note=f"dropped by {_name(user)} through {surface}"[:1000],
            updated_at=timezone.now(),
        )
    return _answer(write.pk)


def _held(write_id: int, user) -> UpstreamWrite:
    """The write, locked against another person's retry or drop, if `user` may handle it."""
    write = UpstreamWrite.objects.select_for_update(of=("self",)).select_related("product").filter(pk=write_id)
    write = write.first()
    mine = write is not None and write.requested_by_id == getattr(user, "pk", None)
    staff = write is not None and getattr(user, "is_staff", False) and access.can_see(write.product, user)
    if write is None or not access.can_see(write.product, user) or not (mine or staff):
        raise NotFound(f"no write {write_id} you can handle; a write's id is in the answer that made it.")
    return write


def _answer(write_id: int) -> dict:
    return WriteResponse.of(UpstreamWrite.objects.select_related("source", "product").get(pk=write_id)).model_dump(
        mode="json"
    )


def _name(user) -> str:
    return user.get_full_name() or user.get_username()
