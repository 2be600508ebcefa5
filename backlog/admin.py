"""The curators' admin: find a record fast, read it comfortably, fix it safely.

Every page is cut to the products the curator may see (backlog.access):
changelists, change pages, filters, autocompletes, inlines and the choices
of every relation. Products and their teams are changed only by those who
see every product.
"""

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from . import access
from .models import Bug, BugStatus, Feature, Product, QATest


class PrettyJSONField(forms.JSONField):
    """raw_data edited as indented JSON rather than one long line."""

    def prepare_value(self, value):
        if isinstance(value, str):
            return value  # the user's invalid input, shown back as typed
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


class StepsField(forms.CharField):
    """A test's steps, one per line (the list the format carries)."""

    widget = forms.Textarea(attrs={"rows": 6, "cols": 80})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class QATestForm(forms.ModelForm):
    steps = StepsField(required=False, help_text="One step per line.")

    class Meta:
        model = QATest
        fields = "__all__"


class BugForm(forms.ModelForm):
    raw_data = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 14, "cols": 90, "class": "raw-data-editor"}),
        help_text=(
            "The bug as the tracker sent it. actual_result, expected_result, steps and "
            "environment are copied from here into the searchable fields on save."
        ),
    )

    class Meta:
        model = Bug
        fields = "__all__"
        help_texts = {
            "duplicate_of": "The earlier report of the same problem, in the same product. Saving a new link "
            "sets the status to duplicate, unless you change the status too.",
        }

    def clean_raw_data(self):
        value = self.cleaned_data["raw_data"]
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise forms.ValidationError('raw_data must be a JSON object, like {"actual_result": "..."}.')
        return value


def status_action(name: str, status: str, description: str):
    """An admin action `name` that sets the selected records' status (and updated_at)."""

    @admin.action(description=description)
    def action(model_admin, request, queryset):
        count = queryset.update(status=status, updated_at=timezone.now())
        model_admin.message_user(request, f"{count} record(s) set to {status}.", messages.SUCCESS)

    action.__name__ = name
    return action


class Scoped:
    """An admin (or inline) that shows and offers only what the user may see:
    its rows, and the choices of its relations to products, features and
    tests (a hand-made POST naming another product's record is refused as an
    invalid choice)."""

    def get_queryset(self, request):
        return access.visible(super().get_queryset(request), request.user)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.related_model in (Product, Feature, QATest, Bug):
            kwargs["queryset"] = access.visible(db_field.related_model._default_manager.all(), request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ProductListFilter(admin.RelatedFieldListFilter):
    """The product filter, listing only the products the user may see."""

    def field_choices(self, field, request, model_admin):
        return [(product.pk, str(product)) for product in access.visible(Product.objects.all(), request.user)]


class DuplicateListFilter(admin.SimpleListFilter):
    """Bugs linked to an original (duplicate_of set), or not; the status
    `duplicate` is a filter of its own, as it may be set without a link."""

    title = "is a duplicate"
    parameter_name = "is_duplicate"

    def lookups(self, request, model_admin):
        return [("yes", "Yes, linked to an original"), ("no", "No link")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(duplicate_of__isnull=self.value() == "no")
        return queryset


class RecordAdmin(Scoped, admin.ModelAdmin):
    # Cross-model checks (keys unique across kinds, relations inside one
    # product) run in Record.clean(), which every ModelForm calls.
    search_help_text = "Search by key or title."
    list_per_page = 50
    show_full_result_count = False  # an exact COUNT(*) on every page is slow on big tables
    readonly_fields = ("created_at", "updated_at")
    save_on_top = True


def changelist_link(model, label: str, **filters) -> str:
    url = reverse(f"admin:backlog_{model._meta.model_name}_changelist") + "?" + urlencode(filters)
    return format_html('<a href="{}">{}</a>', url, label)


class ParentAdmin(RecordAdmin):
    """A product or feature: its changelist counts its `counted` children and
    its open bugs, each count a link to those records."""

    counted = ""  # the related name of the children counted, like "features"

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                **{f"_{self.counted}": Count(self.counted, distinct=True)},
                _open_bugs=Count("bugs", filter=Q(bugs__status=BugStatus.OPEN), distinct=True),
            )
        )

    @admin.display(description="open bugs", ordering="_open_bugs")
    def open_bug_count(self, record):
        parent = f"{self.model._meta.model_name}__id__exact"
        return changelist_link(Bug, record._open_bugs, **{parent: record.pk}, status__exact="open")


class FeatureInline(Scoped, admin.TabularInline):
    model = Feature
    fields = ("key", "name")
    extra = 0
    show_change_link = True
    classes = ("collapse",)


@admin.register(Product)
class ProductAdmin(ParentAdmin):
    list_display = ("key", "name", "feature_count", "open_bug_count", "updated_at")
    ordering = ("key",)  # Meta.ordering is not applied to GROUP BY queries
    search_fields = ("key", "name")
    fieldsets = (
        (None, {"fields": ("key", "name", "description")}),
        ("Access", {"fields": ("teams",)}),
        ("Times", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )
    filter_horizontal = ("teams",)
    inlines = [FeatureInline]
    counted = "features"

    # Adding a product, or changing who may see one, is for those who see
    # every product: anyone else would grant access they do not hold.
    def has_add_permission(self, request):
        return access.sees_all_products(request.user) and super().has_add_permission(request)

    def get_readonly_fields(self, request, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        return readonly if access.sees_all_products(request.user) else (*readonly, "teams")

    @admin.display(description="features", ordering="_features")
    def feature_count(self, product):
        return changelist_link(Feature, product._features, product__id__exact=product.pk)


class TestInline(Scoped, admin.TabularInline):
    model = QATest
    fields = ("key", "title", "status")
    extra = 0
    show_change_link = True
    verbose_name_plural = "tests of this feature"


class BugInline(Scoped, admin.TabularInline):
    model = Bug
    form = BugForm
    fields = ("key", "title", "severity", "status")
    extra = 0
    show_change_link = True
    verbose_name_plural = "bugs in this feature"


@admin.register(Feature)
class FeatureAdmin(ParentAdmin):
    list_display = ("key", "name", "product", "test_count", "open_bug_count", "updated_at")
    ordering = ("key",)
    list_filter = (("product", ProductListFilter), "created_at", "updated_at")
    list_select_related = ("product",)
    search_fields = ("key", "name")
    autocomplete_fields = ("product",)
    fieldsets = (
        (None, {"fields": ("key", "name", "product")}),
        ("Details", {"fields": ("description", "acceptance_criteria")}),
        ("Times", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )
    inlines = [TestInline, BugInline]
    counted = "tests"

    @admin.display(description="tests", ordering="_tests")
    def test_count(self, feature):
        return changelist_link(QATest, feature._tests, feature__id__exact=feature.pk)


@admin.register(QATest)
class QATestAdmin(RecordAdmin):
    form = QATestForm
    list_display = ("key", "title", "product", "feature", "status", "updated_at")
    list_filter = (("product", ProductListFilter), "status", "created_at", "updated_at")
    list_select_related = ("product", "feature")
    search_fields = ("key", "title")
    autocomplete_fields = ("product", "feature")
    date_hierarchy = "created_at"
    fieldsets = (
        (None, {"fields": ("key", "title", "status", "product", "feature")}),
        ("Case", {"fields": ("description", "steps")}),
        ("Times", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )
    actions = [
        status_action("mark_active", "active", "Mark selected tests active"),
        status_action("mark_archived", "archived", "Archive selected tests"),
    ]


DUPLICATES_SHOWN = 20  # on a bug's page; the rest are a link to the list


@admin.register(Bug)
class BugAdmin(RecordAdmin):
    form = BugForm
    list_display = ("key", "title", "product_key", "feature_key", "severity_badge", "status", "created")
    list_display_links = ("key", "title")
    list_filter = (
        ("product", ProductListFilter),
        "severity",
        "status",
        DuplicateListFilter,
        "created_at",
        "updated_at",
    )
    list_select_related = ("product", "feature")
    search_fields = ("key", "title")
    autocomplete_fields = ("product", "feature", "test", "duplicate_of")
    date_hierarchy = "created_at"
    readonly_fields = (
        "actual_result",
        "expected_result",
        "steps_text",
        "environment",
        "duplicate_list",
        "created_at",
        "updated_at",
    )
    fieldsets = (
        (None, {"fields": ("key", "title", ("severity", "status"), "product", "feature", "test")}),
        ("Duplicates", {"fields": ("duplicate_of", "duplicate_list")}),
        ("Report", {"fields": ("description",)}),
        (
            "Searchable fields, from raw data",
            {
                "fields": ("actual_result", "expected_result", "steps_text", "environment"),
                "description": "Read-only: edit raw data below and save to change them.",
            },
        ),
        ("Raw data from the tracker", {"fields": ("raw_data",)}),
        ("Times", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )
    actions = [
        status_action("mark_fixed", "fixed", "Mark selected bugs fixed"),
        status_action("mark_rejected", "rejected", "Reject selected bugs"),
        status_action("mark_duplicate", "duplicate", "Mark selected bugs as duplicates"),
        status_action("reopen", "open", "Reopen selected bugs"),
    ]

    class Media:
        # The severity colours, the steps list and the JSON editor are styled
        # here rather than in style="" attributes, which the Content-Security-Policy
        # (style-src 'self', config/settings.py) does not let the browser apply.
        css = {"all": ["backlog/admin.css"]}

    # Keys and a date keep the list to one screen's width; the names are in each key's tooltip.
    @admin.display(description="product", ordering="product__key")
    def product_key(self, bug):
        return format_html('<span title="{}">{}</span>', bug.product.name, bug.product.key)

    @admin.display(description="feature", ordering="feature__key")
    def feature_key(self, bug):
        if bug.feature is None:
            return "—"
        return format_html('<span title="{}">{}</span>', bug.feature.name, bug.feature.key)

    @admin.display(description="created", ordering="created_at")
    def created(self, bug):
        when = timezone.localtime(bug.created_at)
        return format_html('<time datetime="{}">{}</time>', when.isoformat(), dateformat.format(when, "j M Y"))

    @admin.display(description="severity", ordering="severity")
    def severity_badge(self, bug):
        if not bug.severity:
            return "—"
        return format_html('<span class="severity severity-{}">{}</span>', bug.severity, bug.get_severity_display())

    def save_model(self, request, obj, form, change):
        # Linking is how a curator says "duplicate": the status follows,
        # unless it was chosen in the same save. The model forces neither.
        if obj.duplicate_of_id and "duplicate_of" in form.changed_data and "status" not in form.changed_data:
            obj.status = BugStatus.DUPLICATE
        super().save_model(request, obj, form, change)

    @admin.display(description="duplicates of this bug")
    def duplicate_list(self, bug):
        if bug.pk is None:
            return "—"
        # In its product, as every link is, so whoever sees this bug sees them.
        duplicates = list(bug.duplicates.order_by("key").values_list("pk", "key", "title")[: DUPLICATES_SHOWN + 1])
        if not duplicates:
            return "None."
        shown = [(reverse("admin:backlog_bug_change", args=[pk]), title, key) for pk, key, title in duplicates]
        links = format_html_join(", ", '<a href="{}" title="{}">{}</a>', shown[:DUPLICATES_SHOWN])
        if len(duplicates) <= DUPLICATES_SHOWN:
            return links
        return format_html("{} … {}", links, changelist_link(Bug, "all of them", duplicate_of__id__exact=bug.pk))

    @admin.display(description="steps")
    def steps_text(self, bug):
        if not bug.steps:
            return "—"
        return format_html(
            '<ol class="steps">{}</ol>',
            format_html_join("", "<li>{}</li>", ((step,) for step in bug.steps.splitlines())),
        )


class TeamProductInline(Scoped, admin.TabularInline):
    """A team's products, on the group's page (the other side of Product.teams)."""

    model = Product.teams.through
    extra = 0
    autocomplete_fields = ("product",)
    verbose_name = "product of this team"
    verbose_name_plural = "products of this team (its members see and change their records)"

    # As on the product's page: only those who see every product grant access to one.
    def has_add_permission(self, request, obj=None):
        return access.sees_all_products(request.user) and super().has_add_permission(request, obj)

    def has_change_permission(self, request, obj=None):
        return access.sees_all_products(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return access.sees_all_products(request.user) and super().has_delete_permission(request, obj)


admin.site.unregister(Group)


@admin.register(Group)
class TeamAdmin(GroupAdmin):
    inlines = [TeamProductInline]
