"""The audit trail in the admin (PGHISTORY_ADMIN_CLASS): pghistory's events,
filtered by surface too, shown only to those who see every product (the trail
holds every product's changes)."""

from django.contrib import admin
from pghistory.admin import EventsAdmin

from .access import SeesAllProductsOnly
from .audit import SURFACE_NAMES


class SurfaceFilter(admin.SimpleListFilter):
    title = "surface"
    parameter_name = "surface"

    def lookups(self, request, model_admin):
        return [(name, name) for name in SURFACE_NAMES]

    def queryset(self, request, queryset):
        return queryset.filter(pgh_context__surface=self.value()) if self.value() else queryset


class AuditAdmin(SeesAllProductsOnly, EventsAdmin):
    def get_list_filter(self, request):
        return [*super().get_list_filter(request), SurfaceFilter]
