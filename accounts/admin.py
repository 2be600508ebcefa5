"""API tokens in the admin: everyone's, to see and revoke (a key is never shown
again; a person makes their own on the Tokens page). Identities, read-only."""

from django.contrib import admin, messages
from rest_framework.authtoken.admin import TokenProxy

from . import tokens
from .models import ApiToken, Identity

# DRF's plain-text tokens are gone (accounts.0003): its admin page would only confuse.
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "scope", "state", "created_at", "expires_at", "last_used_at"]
    list_filter = ["scope", "revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["user", "name", "prefix", "scope", "created_at", "expires_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset:
            tokens.revoke(token)
        messages.success(request, f"{queryset.count()} token(s) revoked: they open nothing from now on.")


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    list_display = ["user", "issuer", "subject", "signed_in_at"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["user", "issuer", "subject", "groups", "signed_in_at"]

    def has_add_permission(self, request):
        return False
