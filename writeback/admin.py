"""The outbox in the admin: every write to a tracker, its state, and Retry / Drop.

Read only: nobody edits a draft or a marker by hand. A curator sees the writes
of the products they see; the actions are writeback.outbox's, so the admin
is one more thin door over the same rules (who may, what may change).
"""

from django.contrib import admin, messages
from django.db import models
from django.utils.html import format_html, format_html_join

from backlog import access
from backlog.admin import BugAdmin
from backlog.models import Bug
from search.contract import SearchError

from . import outbox, service
from .contract import CannotMark, WriteBackOff
from .models import Surface, UpstreamWrite


@admin.register(UpstreamWrite)
class UpstreamWriteAdmin(admin.ModelAdmin):
    list_display = ("id", "status", "operation", "product", "source", "upstream", "requested_by", "surface")
    list_display += ("attempts", "created_at", "said")
    list_filter = ("status", "operation", "source")
    search_fields = ("upstream_key", "record_key", "draft__title")
    list_select_related = ("product", "source", "requested_by")
    actions = ("retry", "drop")

    def get_queryset(self, request):
        return access.visible(super().get_queryset(request), request.user)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    readonly_fields = ("trail",)
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}  # shown, never edited: Django 6's default

    @admin.display(description="its trail")
    def trail(self, write):
        """Each change of the write from the audit trail: when, what it came to, who asked and where."""
        rows = [
            (
                event.pgh_created_at.strftime("%Y-%m-%d %H:%M:%S"),
                event.status,
                event.attempts,
                event.error or event.note or "",
                (event.pgh_context.metadata.get("url") if event.pgh_context else None) or "the sender",
            )
            for event in write.events.select_related("pgh_context").order_by("pgh_id")
        ]
        return format_html_join("", "<div>{}: {}, {} sends begun. {} ({})</div>", rows) or "—"

    @admin.display(description="upstream")
    def upstream(self, write):
        if write.upstream_url:
            return format_html('<a href="{}" rel="noopener noreferrer">{}</a>', write.upstream_url, write.upstream_key)
        return write.upstream_key or "—"

    @admin.display(description="error or note")
    def said(self, write):
        words = write.error or write.note
        return words[:120] + ("…" if len(words) > 120 else "")

    @admin.action(description="Retry the selected failed writes")
    def retry(self, request, queryset):
        self._each(request, queryset, outbox.retry, "retried")

    @admin.action(description="Drop the selected writes (never sent)")
    def drop(self, request, queryset):
        self._each(request, queryset, outbox.drop, "dropped")

    def _each(self, request, queryset, change, done: str) -> None:
        for pk in queryset.values_list("pk", flat=True):
            try:
                write = change(pk, request.user, Surface.ADMIN)
            except SearchError as exc:
                self.message_user(request, f"Write {pk}: {exc}", messages.WARNING)
            else:
                self.message_user(request, f"Write {pk} {done}: now {write['status']}.", messages.SUCCESS)


class WritingBugAdmin(BugAdmin):
    """The bug admin, with "Duplicate of" on a synced bug sent to its tracker (writeback.service,
    as REST, MCP and the record page send it); linked here only where the tracker cannot take it."""

    def save_model(self, request, obj, form, change):
        if change and obj.duplicate_of_id and "duplicate_of" in form.changed_data and self._marked(request, obj):
            # Sent to the tracker: the link here is what its answer brings (written already, or
            # by the sender), not the form's; nothing else changed, nothing else is saved over it.
            if form.changed_data == ["duplicate_of"]:
                return
            obj.duplicate_of_id, obj.status = Bug.objects.values_list("duplicate_of", "status").get(pk=obj.pk)
        super().save_model(request, obj, form, change)

    def _marked(self, request, bug) -> bool:
        """Whether the link went to the bug's tracker (said in a message); False where it cannot
        (made here, its source writes nothing back or marks nothing): then it is linked here."""
        try:
            write = service.mark_duplicate(bug.key, bug.duplicate_of.key, request.user, Surface.ADMIN).write
        except (CannotMark, WriteBackOff):
            return False
        except SearchError as exc:
            self.message_user(request, f"{bug.key} was not marked a duplicate: {exc}", messages.WARNING)
            return True
        where = write["upstream_key"] or write["source"]
        said = {"sent": f"marked in {where}", "pending": f"being marked in {where}", "failed": "refused upstream"}
        self.message_user(
            request,
            f"{bug.key} as a duplicate of {bug.duplicate_of.key}: {said.get(write['status'], write['status'])}"
            f"{': ' + write['error'] if write['error'] else ''} (write {write['id']}, admin › Writeback).",
            messages.WARNING if write["status"] == "failed" else messages.SUCCESS,
        )
        return True


admin.site.unregister(Bug)
admin.site.register(Bug, WritingBugAdmin)
