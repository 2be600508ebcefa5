"""Middleware of the whole site."""

from django.conf import settings
from django.contrib.admin.exceptions import DisallowedModelAdminToField
from django.contrib.admin.options import TO_FIELD_VAR
from django.http import JsonResponse

from backlog.db import database_unavailable
from runtime.postgres import deadline, replicas
from search.contract import SearchError, error_body, unavailable

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class DatabaseDeadlineMiddleware:
    """A request waits on the database at most DATABASE_REQUEST_TIMEOUT seconds
    from its start (runtime.postgres.deadline); past it, the database counts as
    unavailable and the request is answered 503 (the middleware below, REST's
    handler). A streamed response (an export) reads its rows after this
    returns: each chunk gets the same time again."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        seconds = settings.DATABASE_REQUEST_TIMEOUT
        with deadline.within(seconds):
            response = self.get_response(request)
        if response.streaming and not response.is_async:
            response.streaming_content = deadline.each_within(response.streaming_content, seconds)
        return response


class DatabaseUnavailableMiddleware:
    """A page or admin request that failed because the database could not be
    reached is a 503 with the API's error body and Retry-After, not a 500: the
    client may send it again once the server is back (the embedded one is
    started again by the next connection, runtime.postgres.embedded.revive).
    REST answers the same through api.errors, MCP through mcp_bridge.server."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not database_unavailable(exception):
            return None
        error = unavailable(exception)
        return JsonResponse(error.body(), status=error.status, headers=error.headers())


class RequestLineLimitMiddleware:
    """A URL longer than REQUEST_LINE_MAX_BYTES (path and query string) is a
    414 with the API's error body, before any view parses it. gunicorn's own
    limit is off (`serve`): it would answer in plain text."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        size = len(request.path_info.encode()) + len(request.META.get("QUERY_STRING", ""))
        if size > settings.REQUEST_LINE_MAX_BYTES:
            message = (
                f"The URL is {size:,} bytes, over the limit of {settings.REQUEST_LINE_MAX_BYTES:,} "
                "(REQUEST_LINE_MAX_BYTES): shorten the query, or ask for fewer keys at a time."
            )
            return JsonResponse(error_body("uri_too_long", message), status=414)
        return self.get_response(request)


class DeclaredBodyLimitMiddleware:
    """A view that says how large a body it takes (`refuse_body`, a function of the declared
    Content-Length raising a SearchError, on the view or its DRF class) is answered before
    anything reads a body declared larger: the CSRF check reads a form whole, and a multipart
    upload is written to a temporary file whole, before the view could look at its size. The
    answer is the view's `refused_page` (a page of the staff UI), or the API's error body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        refuse = getattr(view_func, "refuse_body", None) or getattr(
            getattr(view_func, "cls", None), "refuse_body", None
        )
        if refuse is None:
            return None
        try:
            refuse(request.META.get("CONTENT_LENGTH"))
        except SearchError as error:
            page = getattr(view_func, "refused_page", None)
            if page is not None and (answer := page(request, error)) is not None:
                return answer
            return JsonResponse(error.body(), status=error.status, headers=error.headers())
        return None


class AdminEmptyToFieldMiddleware:
    """An admin page asked with an empty `_to_field` is a 400, as Django's
    admin answers a field it may not reference. Django 5.2 checks a non-empty
    one only, then looks the empty name up and fails with a 500
    (`/admin/auth/group/1/delete/?_to_field=`, found by tests/test_fuzz.py)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if "admin" not in request.resolver_match.app_names:
            return None
        given = request.GET.getlist(TO_FIELD_VAR)
        if request.method == "POST" and request.content_type in FORM_TYPES:
            given += request.POST.getlist(TO_FIELD_VAR)
        if any(not value for value in given):
            raise DisallowedModelAdminToField(f"{TO_FIELD_VAR} is empty: name a field, or leave it out.")
        return None


class ReadYourWritesMiddleware:
    """With read replicas (DATABASE_REPLICA_URLS): a request that may write
    (POST, PUT, PATCH, DELETE) or has written a record reads from the
    primary, so it never reads past its own write; the next request starts
    afresh (runtime/postgres/replicas.py)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with replicas.request_reads(request.method):
            return self.get_response(request)
