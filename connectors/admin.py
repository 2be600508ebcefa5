"""Sources in the admin: set one up (kind, URL, project, mapping, schedule,
teams, the names of the variables that hold its secrets) and read its
history. Only those who see every product manage sources: a source decides
who sees a product."""

from django import forms
from django.contrib import admin
from django.db import models
from django.utils.html import format_html

from backlog import access

from .models import Delivery, Source, SyncRun


class SyncRunInline(admin.TabularInline):
    model = SyncRun
    extra = 0
    max_num = 0
    can_delete = False
    ordering = ["-started_at"]
    fields = readonly_fields = [
        "started_at",
        "finished_at",
        "status",
        "fetched",
        "created",
        "updated",
        "deleted",
        "unchanged",
        "skipped",
        "requests",
        "missed",
        "cause",
        "errors",
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).order_by("-started_at")


@admin.register(Source)
class SourceAdmin(access.SeesAllProductsOnly, admin.ModelAdmin):
    list_display = ["name", "kind", "project", "product_key", "schedule", "last_sync", "enabled"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "project", "product_key"]
    filter_horizontal = ["teams"]
    readonly_fields = [
        "checkpoint",
        "swept_at",
        "pending_links",
        "state",
        "hook_received_at",
        "hook_refused",
        "hook_refused_at",
        "hook_ignored",
    ]
    inlines = [SyncRunInline]
    formfield_overrides = {models.URLField: {"form_class": forms.URLField, "assume_scheme": "https"}}
    fieldsets = [
        (None, {"fields": ["name", "kind", "url", "project", "product_key", "query", "enabled", "write_back"]}),
        (
            "Credentials (environment variables, never the secrets)",
            {"fields": ["user_env", "token_env", "hook_secret_env"]},
        ),
        (
            "Webhooks",
            {
                "fields": ["hook_received_at", "hook_refused", "hook_refused_at", "hook_ignored"],
                "description": "Deliveries to /hooks/&lt;kind&gt; (docs/connectors.md, Webhooks).",
                "classes": ["collapse"],
            },
        ),
        ("Who sees it", {"fields": ["teams"]}),
        ("Schedule", {"fields": ["schedule_minutes", "sweep_minutes"]}),
        (
            "Mapping",
            {
                "fields": ["mapping"],
                "description": "Overrides of the default field mapping, as JSON "
                '(docs/connectors.md), e.g. {"severity": {"blocker": "critical"}}.',
            },
        ),
        ("State", {"fields": ["checkpoint", "swept_at", "pending_links", "state"], "classes": ["collapse"]}),
    ]

    @admin.display(description="every")
    def schedule(self, source):
        return f"{source.schedule_minutes} min" if source.schedule_minutes else "by hand"

    @admin.display(description="last sync")
    def last_sync(self, source):
        run = source.runs.order_by("-started_at").first()
        if run is None:
            return "never"
        colour = {"ok": "#1a7f37", "failed": "#cf222e"}.get(run.status, "#6e7781")
        return format_html('<span style="color:{}">{}</span> {}', colour, run.status, run.summary())


@admin.register(Delivery)
class DeliveryAdmin(access.SeesAllProductsOnly, admin.ModelAdmin):
    """The webhook deliveries taken, read-only: what came, and what was done with it."""

    list_display = ["received_at", "source", "event", "upstream_id", "status", "attempts", "outcome"]
    list_filter = ["status", "source"]
    search_fields = ["delivery_id", "upstream_id", "event"]
    date_hierarchy = "received_at"
    readonly_fields = [field.name for field in Delivery._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
