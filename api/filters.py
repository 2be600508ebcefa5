"""Filters, ordering and pages of the record lists (/api/products, ...).

The filters carry the search contract's names, so one vocabulary works on
every endpoint: `products=PRD-1,PRD-2`, `feature=FEAT-7`, `status=open,fixed`,
`severity=high`, `created_after` / `created_before` / `updated_after` /
`updated_before` (ISO 8601, inclusive). As on /api/search, a parameter that
is not understood is refused rather than ignored, and so is an unknown
ordering field or a limit out of range.

The FilterSets are plain django-filter: `BugFilter(data, queryset).qs` works
outside DRF too.
"""

from django import forms
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from rest_framework import pagination, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter

from backlog.models import Bug, BugStatus, Feature, Product, QATest, Severity, TestStatus
from backlog.text import in_utc, one_of
from search.contract import LIMIT_DEFAULT, LIMIT_MAX


class CharInFilter(filters.BaseInFilter, filters.CharFilter):
    pass


class ChoiceInFilter(filters.BaseInFilter, filters.ChoiceFilter):
    """Comma-separated choices; a refused one is named with the ones there are."""

    def __init__(self, *args, choices, **kwargs):
        message = f'"%(value)s" is not one of {one_of(value for value, _ in choices)}.'
        super().__init__(*args, choices=choices, error_messages={"invalid_choice": message}, **kwargs)


class UtcDateTimeField(IsoDateTimeField):
    """An ISO 8601 time, as UTC (backlog.text.in_utc: PostgreSQL takes
    offsets up to ±15:59 only, ISO 8601 up to ±23:59)."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return in_utc(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


class RecordFilter(filters.FilterSet):
    created_after = UtcDateTimeFilter("created_at", "gte", help_text="created at or after this time")
    created_before = UtcDateTimeFilter("created_at", "lte", help_text="created at or before this time")
    updated_after = UtcDateTimeFilter("updated_at", "gte", help_text="updated at or after this time")
    updated_before = UtcDateTimeFilter("updated_at", "lte", help_text="updated at or before this time")

    class Meta:
        model = Product
        fields = []


class FeatureFilter(RecordFilter):
    products = CharInFilter("product__key", help_text="product keys, comma-separated")

    class Meta(RecordFilter.Meta):
        model = Feature


class QATestFilter(FeatureFilter):
    feature = filters.CharFilter("feature__key", help_text="a feature key")
    status = ChoiceInFilter(choices=TestStatus.choices, help_text="test statuses, comma-separated")

    class Meta(RecordFilter.Meta):
        model = QATest


class BugFilter(QATestFilter):
    test = filters.CharFilter("test__key", help_text="a test key")
    duplicate_of = filters.CharFilter("duplicate_of__key", help_text="a bug key: the bugs linked to it as duplicates")
    status = ChoiceInFilter(choices=BugStatus.choices, help_text="bug statuses, comma-separated")
    severity = ChoiceInFilter(choices=Severity.choices, help_text="severities, comma-separated")

    class Meta(RecordFilter.Meta):
        model = Bug


class StrictOrderingFilter(OrderingFilter):
    """Refuses an unknown field instead of ignoring it, and breaks ties by id
    so that pages never overlap."""

    def get_ordering(self, request, queryset, view):
        requested = request.query_params.get(self.ordering_param)
        if requested:
            terms = [term.strip() for term in requested.split(",") if term.strip()]
            valid = self.remove_invalid_fields(queryset, terms, view, request)
            if invalid := [term for term in terms if term not in valid]:
                names = ", ".join(view.ordering_fields)
                raise ValidationError(
                    {self.ordering_param: [f"cannot order by {invalid[0]!r}; use {names}, or -name for descending."]}
                )
        ordering = list(super().get_ordering(request, queryset, view) or [])
        if not {"id", "-id"} & set(ordering):
            ordering.append("id")
        return ordering


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """?limit=&offset=, with the search contract's default and maximum."""

    default_limit = LIMIT_DEFAULT
    max_limit = LIMIT_MAX

    def get_limit(self, request):
        return self._number(request, self.limit_query_param, self.default_limit, 1, self.max_limit)

    def get_offset(self, request):
        return self._number(request, self.offset_query_param, 0, 0, None)

    @staticmethod
    def _number(request, name, default, low, high):
        field = serializers.IntegerField(min_value=low, max_value=high)
        value = request.query_params.get(name)
        if value in (None, ""):
            return default
        try:
            return field.run_validation(value)
        except ValidationError as exc:
            raise ValidationError({name: exc.detail}) from exc
