"""Test run triage over REST: upload a JUnit report, read a run, decide on a suggestion.

Thin over triage.service, as the search views are over search.service: the
view takes the report (the body as XML, a multipart `file`, or JSON with
`junit`), its product and name from the query string, and returns what
the service returns; the service's errors are SearchErrors, answered by
api/errors.py in the one JSON error shape.
"""

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import UnsupportedMediaType, ValidationError
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from triage import service, summary
from triage.junit import refuse_declared, too_large
from writeback import links

from . import schema, throttles
from .authentication import TokenMayWrite
from .errors import JSONErrors
from .parsers import JSONParser, declared_length
from .views import OneValueEach


class XMLBodyParser(BaseParser):
    """The report as the body, its bytes as sent (the XML declaration names its encoding),
    refused past TRIAGE_MAX_BYTES by its Content-Length or while reading."""

    media_type = "application/xml"

    def parse(self, stream, media_type=None, parser_context=None) -> bytes:
        limit = settings.TRIAGE_MAX_BYTES
        if (declared := declared_length(parser_context)) > limit:
            raise too_large(declared)
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise too_large(None)
        return data


class TextXMLBodyParser(XMLBodyParser):
    media_type = "text/xml"


class MarkdownRenderer(BaseRenderer):
    """`Accept: text/markdown`: the triage as a pull request comment (triage.summary)."""

    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        request = renderer_context["request"]
        return summary.markdown(data, request.build_absolute_uri("/")).encode()


TRIAGE = (
    "the run's triage: its groups, verdicts and suggestions (docs/triage.md, triage/contract.py); "
    "with `Accept: text/markdown`, a summary for a pull request comment"
)
QUERY = [
    OpenApiParameter("product", str, description="the key of the product the run tested (required with a report)"),
    OpenApiParameter("name", str, description="the report's file name, kept with the run"),
    OpenApiParameter("max_tokens", int, description="whole groups within that many tokens"),
]


class RunsView(JSONErrors, OneValueEach, APIView):
    refuse_body = staticmethod(refuse_declared)  # config.middleware.DeclaredBodyLimitMiddleware
    parser_classes = [XMLBodyParser, TextXMLBodyParser, MultiPartParser, JSONParser]
    renderer_classes = [JSONRenderer, MarkdownRenderer]
    throttle_classes = [throttles.SearchRateThrottle]

    @extend_schema(
        summary="Triage a JUnit report",
        description="The body is the report (application/xml or text/xml), a multipart `file`, or JSON "
        '{"junit": "<xml>", "product": "KEY"}. The run is stored; the answer is its triage (docs/triage.md).',
        parameters=QUERY,
        request={"application/xml": {"type": "string"}, "multipart/form-data": {"type": "object"}},
        responses={
            200: OpenApiResponse(description=TRIAGE),
            **schema.errors(
                {
                    400: "not a JUnit report: the line and why",
                    404: "no product of that key you can see",
                    413: "over TRIAGE_MAX_BYTES",
                }
            ),
        },
        tags=["triage"],
    )
    def post(self, request):
        params = request.query_params.dict()  # one value each (OneValueEach)
        name = params.pop("name", "")
        try:
            body = request.data
        except UnsupportedMediaType:
            raise UnsupportedMediaType(
                request.content_type,
                "send the report as application/xml or text/xml, a multipart `file`, or JSON with `junit`; "
                f"got {request.content_type!r}.",
            ) from None
        if isinstance(body, bytes):
            return Response(service.call(params, request.user, data=body, name=name))
        if upload := request.FILES.get("file"):
            if upload.size > settings.TRIAGE_MAX_BYTES:
                raise too_large(upload.size)
            return Response(service.call(params, request.user, data=upload.read(), name=name or upload.name))
        if not hasattr(body, "items") or not body:
            raise ValidationError("The body is empty: send the JUnit report (application/xml), or a multipart `file`.")
        return Response(service.call({**params, **body}, request.user, name=name))


class RunView(JSONErrors, OneValueEach, APIView):
    renderer_classes = [JSONRenderer, MarkdownRenderer]

    @extend_schema(
        summary="A stored run's triage",
        parameters=QUERY[2:],
        responses={200: OpenApiResponse(description=TRIAGE)},
        tags=["triage"],
    )
    def get(self, request, run: int):
        return Response(service.call({**request.query_params.dict(), "run": run}, request.user))


class DecisionsView(APIView):
    # A decision changes every later run's answers for its product: a read-only token may triage, not decide.
    permission_classes = [*APIView.permission_classes, TokenMayWrite]

    @extend_schema(
        summary="Confirm or reject a suggested bug for a run's cause",
        request={"application/json": {"type": "object"}},
        description='{"signature": "<a group\'s>", "bug": "BUG-12", "decision": "confirmed" or "rejected"}. '
        "A confirmation of a bug synced from a tracker that writes back also comments on it there, once a run "
        "(the suggestion's `write`: GET /api/writes/<id>).",
        responses={200: OpenApiResponse(description=TRIAGE)},
        tags=["triage"],
    )
    def post(self, request, run: int):
        if not isinstance(request.data, dict):
            raise ValidationError(
                'The body is a JSON object: {"signature": ..., "bug": "BUG-12", "decision": "confirmed"}.'
            )
        return Response(links.decide(run, request.data, request.user, "rest")[0])
