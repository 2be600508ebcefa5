"""Marking a duplicate from a bug's record page: the staff UI's door over writeback.service.

"Duplicate of <KEY>" calls `writeback.service.mark_duplicate(..., surface=UI)`,
the call REST and MCP make, with the idempotency key the form has carried
since it was rendered, so a double click is one write and one comment
upstream. Nothing changes here on the click: `duplicate_of` comes back with
the tracker's answer (writeback.worker). The page then shows the write at
`?write=<id>`, as the report-a-bug page does (ui/filing.py): pending,
sent, or failed in the tracker's own words. A refusal (a key the user does
not see, bugs of two trackers, write back off) is a message on the page.

The form is offered where the mark can go upstream; elsewhere the section
says why instead, by the service's own rules asked beforehand.
"""

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.decorators import staff_required
from backlog.models import Bug
from search.contract import SearchError
from writeback import service
from writeback.contract import CannotMark, WriteBackOff
from writeback.models import Operation, Surface, UpstreamWrite

from . import filing

PERMISSION = "backlog.change_bug"


@staff_required
@require_POST
@permission_required(PERMISSION, raise_exception=True)
def mark_duplicate(request, key):
    of = request.POST.get("of", "").strip()
    page = reverse("ui:record", args=[key])
    if not of:
        messages.error(request, "Name the bug this one repeats by its key (like SEAMONKEY-12) to mark it a duplicate.")
        return redirect(page)
    try:
        marked = service.mark_duplicate(key, of, request.user, Surface.UI, request.POST.get("idempotency_key") or None)
    except SearchError as exc:  # NotFound, CannotMark, WriteBackOff, KeyReused: each says what to do
        messages.error(request, f"Not marked: {exc}")
        return redirect(page)
    return redirect(f"{page}?write={marked.write['id']}")


def on_record_page(bug: Bug, user, write_id: str | None) -> dict:
    """The record page's part: `marking` (offer()), and with `write_id` the write (`write`,
    or `missing`: why it is not one the user sees)."""
    context = {"marking": offer(bug, user), "refresh": filing.REFRESH_SECONDS}
    if write_id is not None:
        try:
            context["write"] = look_up(write_id, bug.key, user)
        except SearchError as exc:
            context["missing"] = str(exc)
    return context


def offer(bug: Bug, user) -> dict | None:
    """What the record page offers for marking `bug` a duplicate: the form (`upstream`, with
    a fresh idempotency key) or why not (`note`); None when there is nothing to offer
    (not the user's to change, already a duplicate, or made here rather than synced)."""
    if not user.has_perm(PERMISSION) or bug.duplicate_of_id is not None:
        return None
    synced = service.synced_from(bug)
    if synced is None:  # made here: no tracker to mark it in, and nothing to explain
        return None
    source = synced.source
    kind = source.get_kind_display()
    try:
        service.markable(source)  # the rule the mark is held to when it is asked for, said here in the page's words
    except CannotMark:
        return _not(f"QA Search cannot mark duplicates in {kind} yet, so {source} would not see the mark.")
    except WriteBackOff:
        return _not(
            f"{source}, the tracker {bug.key} is synced from, does not take writes from QA Search. "
            f"An administrator can turn on {filing.ADMIN_SETTING}."
        )
    note = (
        f"Marked in {kind} ({source.project}), where the original must be too; "
        "“Duplicate of” here comes from its answer."
    )
    return {"upstream": True, "note": note, "idempotency_key": filing.new_key()}


def _not(why: str) -> dict:
    return {"upstream": False, "note": f"Not offered: {why}"}


def look_up(write_id: str, key: str, user) -> dict | None:
    """The write `user` may see (NotFound otherwise), when it marks `key`; else None."""
    write = filing.look_up(write_id, user)
    if write["operation"] != Operation.DUPLICATE:
        return None
    marked = UpstreamWrite.objects.only("draft").get(pk=write["id"]).draft
    if str(marked.get("key", "")).upper() != key.upper():
        return None
    return {**write, "of": marked["of"]}
