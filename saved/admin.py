from django.contrib import admin
from django.db import models

from .models import SavedSearch


@admin.register(SavedSearch)
class SavedSearchAdmin(admin.ModelAdmin):
    """Every user's saved searches, for an operator: whose, what, and how their webhooks fare."""

    list_display = ["name", "owner", "query", "webhook_url", "last_delivery_at", "failures", "last_error_at"]
    list_filter = ["owner"]
    search_fields = ["name", "query", "owner__username"]
    readonly_fields = ["created_at", "last_delivery_at", "failures", "last_error", "last_error_at"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
