"""Writing back over REST: file a bug in the product's own tracker, mark a duplicate there, read a write.

Thin over writeback.service, as the search views are over search.service:
the view takes the draft (a JSON object) and the `Idempotency-Key` header,
and returns the write the service returns: 201 for a new one, 200 for the
key's earlier one. Its errors are SearchErrors, answered by api/errors.py.
"""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from writeback import outbox, service
from writeback.models import Surface

from . import schema
from .authentication import TokenMayWrite

WRITE = "the write: pending, sent (upstream_key, upstream_url, record_key) or failed (error) (writeback/contract.py)"


class FileBugView(APIView):
    permission_classes = [*APIView.permission_classes, TokenMayWrite]

    @extend_schema(
        summary="File a bug in the product's tracker",
        description='{"product": "SEAMONKEY", "title": ..., "description", "steps", "expected_result", '
        '"actual_result", "environment", "severity", "labels"}: the same draft check_duplicates takes. '
        "The header Idempotency-Key makes a repeat of the call return the same write (docs/api.md).",
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        request={"application/json": {"type": "object"}},
        responses={
            201: OpenApiResponse(description=WRITE),
            200: OpenApiResponse(description="the Idempotency-Key's earlier write"),
            **schema.errors(
                {
                    403: "a read-only token",
                    404: "no product of that key you can see",
                    409: "its source does not write back",
                }
            ),
        },
        tags=["writing back"],
    )
    def post(self, request):
        if not isinstance(request.data, dict):
            raise ValidationError({"body": ['must be a JSON object, like {"product": "SEAMONKEY", "title": "..."}']})
        return _answer(service.file(request.data, request.user, Surface.REST, request.headers.get("Idempotency-Key")))


class DuplicateOfView(APIView):
    permission_classes = [*APIView.permission_classes, TokenMayWrite]

    @extend_schema(
        summary="Mark a bug a duplicate in its tracker",
        description='{"of": "SEAMONKEY-12"}: the bug this one repeats, synced from the same source. Upstream '
        "closes it as a duplicate; duplicate_of here comes back from upstream's answer. The header "
        "Idempotency-Key makes a repeat of the call return the same write (docs/api.md).",
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        request={"application/json": {"type": "object", "properties": {"of": {"type": "string"}}}},
        responses={
            201: OpenApiResponse(description=WRITE),
            200: OpenApiResponse(description="the Idempotency-Key's earlier write"),
            **schema.errors(
                {
                    400: "no 'of', or a bug named its own duplicate",
                    403: "a read-only token",
                    404: "no bug of that key you can see",
                    409: "not both synced from one source, its source does not write back, or already marked",
                }
            ),
        },
        tags=["writing back"],
    )
    def post(self, request, key: str):
        if not isinstance(request.data, dict):
            raise ValidationError({"body": ['must be a JSON object, like {"of": "SEAMONKEY-12"}']})
        params = {**request.data, "key": key}
        return _answer(service.duplicate(params, request.user, Surface.REST, request.headers.get("Idempotency-Key")))


def _answer(written) -> Response:
    """A new write is 201, the Idempotency-Key's earlier one 200; either names where to read it again."""
    location = {"Location": f"/api/writes/{written.write['id']}"}
    return Response(written.write, status=201 if written.created else 200, headers=location)


class WriteView(APIView):
    @extend_schema(
        summary="A write to a tracker",
        responses={
            200: OpenApiResponse(description=WRITE),
            **schema.errors(
                {
                    404: "no write of that id you can see",
                }
            ),
        },
        tags=["writing back"],
    )
    def get(self, request, write: int):
        return Response(service.get(write, request.user))


class WriteActionView(APIView):
    """POST /api/writes/<id>/retry or /drop: writeback.outbox, for the person who asked or staff."""

    permission_classes = [*APIView.permission_classes, TokenMayWrite]
    action = "retry"

    @extend_schema(
        summary="Retry a failed write, or drop a pending or failed one",
        description="retry: a failed write is sent again, its marker asked for first (no second issue); "
        "drop: a pending or failed write is never sent. The person who asked, or staff who see its product.",
        request=None,
        responses={
            200: OpenApiResponse(description=WRITE),
            **schema.errors(
                {
                    403: "a read-only token",
                    404: "no write of that id you can handle",
                    409: "not failed (retry), or sent or dropped",
                }
            ),
        },
        tags=["writing back"],
    )
    def post(self, request, write: int):
        change = outbox.retry if self.action == "retry" else outbox.drop
        return Response(change(write, request.user, Surface.REST))
