"""The REST surface: search operations, record CRUD, bulk import.

The search operations translate the query string and return what
`search.service.call` returns, unchanged; its `SearchError` becomes the
HTTP error (api/errors.py). The record endpoints are DRF viewsets over the
backlog models; the import endpoint runs the same function as
`manage.py import_records`.
"""

from collections import Counter
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import chain, repeat

from django.db.models import ProtectedError
from django.http import Http404
from django.urls import reverse
from django.utils.text import capfirst
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import permissions, status, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied, UnsupportedMediaType, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from backlog import access
from backlog.imports import import_records
from backlog.models import Bug, Feature, Product, QATest
from search import ratelimit, service
from search.contract import (
    DuplicateCheckRequest,
    DuplicateCheckResponse,
    GetRequest,
    GetResponse,
    SearchResponse,
    SimilarRequest,
    TimelineRequest,
    TimelineResponse,
    error_body,
)

from . import filters, schema, serializers, throttles
from .authentication import TokenMayWrite
from .errors import Conflict, JSONErrors
from .parsers import PARSERS, unsized_body


class OneValueEach:
    """A query parameter given more than once is a 400 naming it, by the search
    operations' own rule (search.service.one_value), never the last value taken
    silently. The search operations apply it themselves, to the parameters that
    are not lists; every other endpoint, to all of its parameters, through this."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        for name, values in request.query_params.lists():
            service.one_value(name, values)


# -- search operations --------------------------------------------------------------------


class OperationView(APIView):
    """GET: one search.service operation; a `key` in the path joins the query
    parameters (given in the query string as well, it is given twice)."""

    operation: str
    throttle_classes = [throttles.SearchRateThrottle]

    def get(self, request, key: str | None = None):
        params = request.query_params
        if key is not None:
            params = params.copy()
            params.setlist("key", [key, *params.getlist("key")])
        return Response(service.call(self.operation, params, request.user))


@extend_schema_view(get=schema.search_operation())
class SearchView(OperationView):
    """`format=csv` or `format=jsonl`: the whole ranked list as a file, streamed (search.operations.export)."""

    operation = "search"

    def get(self, request, key: str | None = None):
        if "format" not in request.query_params:
            return super().get(request)
        link = lambda key: request.build_absolute_uri(reverse("ui:record", args=[key]))  # noqa: E731
        return service.export(request.query_params, request.user, link=link).response()


@extend_schema_view(get=schema.operation(SimilarRequest, SearchResponse, "Records like one record", path=("key",)))
class SimilarView(OperationView):
    operation = "similar"


@extend_schema_view(get=schema.operation(GetRequest, GetResponse, "Whole records by key, with related records"))
class RecordsView(OperationView):
    operation = "get"


@extend_schema_view(
    get=schema.operation(TimelineRequest, TimelineResponse, "What happened around a record", path=("key",))
)
class TimelineView(OperationView):
    operation = "timeline"


@extend_schema_view(
    post=schema.body_operation(DuplicateCheckRequest, DuplicateCheckResponse, "Likely duplicates of a draft bug")
)
class CheckDuplicatesView(OneValueEach, APIView):
    """POST a draft bug as JSON: the bugs it most likely duplicates. Nothing is written."""

    throttle_classes = [throttles.SearchRateThrottle]

    def post(self, request):
        if not isinstance(request.data, dict):
            raise ValidationError(
                {"body": ['must be a JSON object with at least a title, like {"title": "Renew fails"}']}
            )
        return Response(service.call("check_duplicates", request.data, request.user))


# -- records ----------------------------------------------------------------------------


class RecordViewSet(OneValueEach, viewsets.ModelViewSet):
    """Any authenticated user reads; writes need the model's add, change or delete permission."""

    permission_classes = [permissions.DjangoModelPermissions, TokenMayWrite]
    filter_backends = [DjangoFilterBackend, filters.StrictOrderingFilter]
    pagination_class = filters.LimitOffsetPagination
    lookup_field = "key__iexact"  # bug-12 is BUG-12
    lookup_url_kwarg = "key"
    lookup_value_regex = r"[A-Za-z0-9._-]+"
    ordering = ["key"]
    related: tuple[str, ...] = ()

    def get_queryset(self):
        records = self.serializer_class.Meta.model.objects.select_related(*self.related)
        return access.visible(records, self.request.user)

    def list(self, request, *args, **kwargs):
        known = {
            *self.filterset_class.base_filters,
            "ordering",
            self.paginator.limit_query_param,
            self.paginator.offset_query_param,
        }
        if unknown := sorted(set(request.query_params) - known):
            raise ValidationError({unknown[0]: [f"unknown parameter; the parameters are: {', '.join(sorted(known))}."]})
        return super().list(request, *args, **kwargs)

    def get_object(self):
        try:
            return super().get_object()
        except Http404:
            kind = self.serializer_class.Meta.model.KIND
            raise NotFound(f"no {kind} with key {self.kwargs['key']!r}.") from None

    def perform_destroy(self, record):
        try:
            record.delete()
        except ProtectedError as exc:
            # Only what the user may see is counted by kind; what they may not is only said to exist.
            kinds = Counter(
                other.KIND if access.can_see(other, self.request.user) else "other record"
                for other in exc.protected_objects
            )
            names = ", ".join(f"{count} {kind}(s)" for kind, count in sorted(kinds.items()))
            raise Conflict(f"{record.key} is still named by {names}; delete or move them first.") from exc


def summaries(kind: str, plural: str):
    """The OpenAPI summaries of a record kind's list and retrieve operations."""
    return extend_schema_view(
        list=extend_schema(summary=f"List {plural}"), retrieve=extend_schema(summary=f"One {kind} by key")
    )


@summaries("product", "products")
class ProductViewSet(RecordViewSet):
    serializer_class = serializers.ProductSerializer
    filterset_class = filters.RecordFilter
    ordering_fields = ["key", "name", "created_at", "updated_at"]

    def create(self, request, *args, **kwargs):
        # Checked before the body: its key is not even looked at.
        if not access.sees_all_products(request.user):
            raise PermissionDenied(f"{capfirst(access.ADDS_PRODUCTS)}.")
        return super().create(request, *args, **kwargs)


@summaries("feature", "features")
class FeatureViewSet(RecordViewSet):
    serializer_class = serializers.FeatureSerializer
    filterset_class = filters.FeatureFilter
    ordering_fields = ["key", "name", "created_at", "updated_at"]
    related = ("product",)


@summaries("test", "tests")
class QATestViewSet(RecordViewSet):
    serializer_class = serializers.QATestSerializer
    filterset_class = filters.QATestFilter
    ordering_fields = ["key", "title", "status", "created_at", "updated_at"]
    related = ("product", "feature")


@summaries("bug", "bugs")
class BugViewSet(RecordViewSet):
    serializer_class = serializers.BugSerializer
    filterset_class = filters.BugFilter
    ordering_fields = ["key", "title", "severity", "status", "created_at", "updated_at"]
    ordering = ["-created_at", "-id"]
    related = ("product", "feature", "test", "duplicate_of")


# -- import -------------------------------------------------------------------------------

IMPORT_MODELS = (Product, Feature, QATest, Bug)
IMPORT_PERMISSIONS = [
    f"{model._meta.app_label}.{action}_{model._meta.model_name}"
    for model in IMPORT_MODELS
    for action in ("add", "change")
]
MEDIA_TYPES = ", ".join(parser.media_type for parser in PARSERS)
PROBLEMS_IN_MESSAGE = 10


class CanImport(permissions.BasePermission):
    message = "Importing needs the add and change permissions on products, features, tests and bugs."

    def has_permission(self, request, view):
        return request.user.has_perms(IMPORT_PERMISSIONS)


class ImportView(OneValueEach, APIView):
    parser_classes = PARSERS
    permission_classes = [permissions.IsAuthenticated, TokenMayWrite, CanImport]

    def initialize_request(self, request, *args, **kwargs):
        request = super().initialize_request(request, *args, **kwargs)
        if (body := unsized_body(request)) is not None:
            # DRF reads no body without a Content-Length (Request._load_stream): give it this one,
            # which the parsers read line by line as any other, up to IMPORT_MAX_BYTES.
            request._stream = body
        return request

    @extend_schema(
        summary="Import JSON Lines (FORMAT.md)",
        description=(
            "Upserts by key, like `manage.py import_records`: every line is validated first, then all "
            "records are written in one transaction. Any problem: 400 listing every problem with its line "
            "number, and nothing written (unless skip_invalid=true)."
        ),
        parameters=[serializers.ImportOptions],
        request={parser.media_type: {"type": "string"} for parser in PARSERS},
        responses={
            200: serializers.ImportReportSerializer,
            **schema.errors(
                {
                    400: "invalid records; nothing was written",
                    403: "missing add or change permissions",
                    413: "the body is over IMPORT_MAX_BYTES",
                }
            ),
        },
        tags=["import"],
    )
    def post(self, request):
        options = serializers.ImportOptions(data=request.query_params)
        options.is_valid(raise_exception=True)
        if unknown := sorted(set(request.query_params) - set(options.fields)):
            raise ValidationError({unknown[0]: ["unknown parameter; the parameters are: dry_run, skip_invalid."]})
        try:
            lines = request.data
        except UnsupportedMediaType:
            raise UnsupportedMediaType(
                request.content_type,
                f"send the records as JSON Lines with Content-Type {MEDIA_TYPES}; got {request.content_type!r}.",
            ) from None
        lines = _unless_blank(lines)
        if lines is None:
            raise ValidationError("The body is empty: send one JSON record a line (FORMAT.md).")

        # Each record's key is looked up, so it costs a search (docs/access.md says why).
        charge = partial(ratelimit.charge, request.user, per="record")
        report = import_records(lines, user=request.user, charge=charge, **options.validated_data)
        body = serializers.ImportReportSerializer(report).data
        skipped = options.validated_data["skip_invalid"] and (report.written or options.validated_data["dry_run"])
        if report.problems and not skipped:
            message = report.failure(
                retry="send the file again", skip_invalid="skip_invalid=true", shown=PROBLEMS_IN_MESSAGE
            )
            return Response(
                error_body("invalid_records", message, problems=body["problems"]), status=status.HTTP_400_BAD_REQUEST
            )
        return Response(body)


def _unless_blank(lines: Iterable[bytes] | dict) -> Iterator[bytes] | None:
    """The body's lines, still to be read, or None when it has no line but blank ones (or none at all)."""
    if not isinstance(lines, Iterator):  # DRF's {} for a body without content
        return None
    blank = 0
    for line in lines:
        if line.strip():
            return chain(repeat(b"\n", blank), [line], lines)  # blank lines kept: line numbers stay right
        blank += 1
    return None


class SchemaView(JSONErrors, OneValueEach, SpectacularAPIView):
    """The OpenAPI schema, as YAML or JSON; its errors (a 405) as JSON."""


class DocsView(JSONErrors, OneValueEach, SpectacularSwaggerSplitView):
    """Swagger UI's page; its errors (a 405) as JSON."""
