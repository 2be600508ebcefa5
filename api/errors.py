"""Every error under /api/ is one JSON shape: `{"error": {"code", "message", ...}}`.

A `search.contract.SearchError` is answered with its own `body()` and
`status`, so REST shows the same text as the MCP tools. DRF's errors
(authentication, permissions, validation, parsing) are put in the same
shape here; a validation error's message names each field and `fields`
lists them. Anything unexpected is logged and answered with a short 500:
never a traceback or SQL.
"""

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from backlog.db import database_unavailable
from search.contract import SearchError, error_body, unavailable

logger = logging.getLogger(__name__)

# DRF's codes, where ours are more telling or match search.contract's.
CODES = {"invalid": "invalid_request", "parse_error": "invalid_request", "error": "server_error"}


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "The request conflicts with stored records."


class TooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = "The request body is too large."


def exception_handler(exc, context):
    if database_unavailable(exc):
        exc = unavailable(exc)
    if isinstance(exc, SearchError):
        return Response(exc.body(), status=exc.status, headers=exc.headers())
    if isinstance(exc, RequestDataTooBig):
        exc = TooLarge(
            f"The body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes, the limit for a record "
            "(DATA_UPLOAD_MAX_MEMORY_SIZE). Send many records through POST /api/import as JSON Lines."
        )
    if isinstance(exc, IntegrityError):
        # A write raced another one for the same key (the checks before it passed).
        logger.warning("a write lost a race: %s", exc)
        exc = Conflict("Another request wrote a record with the same key at the same time; send yours again.")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("unexpected error in %s", context.get("view").__class__.__name__)
        set_rollback()
        return Response(
            error_body("server_error", "The server failed to answer this request; the error is logged."),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    detail = exc.detail
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten(detail)
        message = "; ".join(
            " ".join(messages) if name == "non_field_errors" else f"{name}: {' '.join(messages)}"
            for name, messages in fields.items()
        )
        extra = {} if list(fields) == ["non_field_errors"] else {"fields": fields}
        response.data = error_body("invalid_request", message, **extra)
    else:
        code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
        response.data = error_body(CODES.get(code, code), str(detail))
    return response


class JSONErrors:
    """For a view whose answers are another format (the schema's YAML, the docs'
    HTML): its errors, such as a 405 for a method it does not take, in the JSON
    shape too, rather than through the view's own renderer."""

    def handle_exception(self, exc):
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


def flatten(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as {"field" or "steps.2": [messages]}."""
    if isinstance(detail, dict):
        fields = {}
        for name, value in detail.items():
            fields.update(flatten(value, f"{prefix}.{name}" if prefix else str(name)))
        return fields
    if isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        fields = {}
        for index, value in enumerate(detail):
            if value:
                fields.update(flatten(value, f"{prefix}.{index}" if prefix else str(index)))
        return fields
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix or "non_field_errors": [str(message) for message in messages]}


# Exempt from CSRF, as DRF's views are (it changes nothing): otherwise a PUT,
# PATCH, POST or DELETE to a URL no route takes, such as a key with a character
# the routes refuse, got the CSRF middleware's HTML 403 instead of this 404.
@csrf_exempt
def not_found(request, path=""):
    """Any URL under /api/ that names no endpoint."""
    message = f"no endpoint at {request.path}; the endpoints are listed at /api/docs."
    return JsonResponse(error_body("not_found", message), status=404)
