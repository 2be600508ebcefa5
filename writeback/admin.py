"""The outbox in the admin: every write to a tracker, its state, and Retry / Drop.

Read only: nobody edits a draft or a marker by hand. A curator sees the writes
of the products they see; the actions are writeback.outbox's, so the admin
is one more thin door over the same rules (who may, what may change).
"""

from django.contrib import admin, messages
from django.db import models
from django.utils.html import format_html, format_html_join

from backlog import access
from search.contract import SearchError

from . import outbox
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
