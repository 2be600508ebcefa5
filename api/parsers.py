"""Request bodies: JSON, and the bulk import's JSON Lines, handed over line by line.

`backlog.imports.import_records` parses and validates each line itself
(with its line number), so these parsers only split the body into lines, as
the import asks for them; three media types because clients send JSON Lines
under all three names. A body over `settings.IMPORT_MAX_BYTES` is refused
with 413: by its Content-Length before anything is read, and while reading
in case the length was not declared (a chunked body: `unsized_body`).
"""

from collections.abc import Iterator

from django.conf import settings
from rest_framework import exceptions, parsers
from rest_framework.parsers import BaseParser

from backlog.interchange import MAX_RAW_DATA_DEPTH, nests_deeper
from backlog.text import SURROGATE_PROBLEM, surrogate_at


class JSONParser(parsers.JSONParser):
    """DRF's, refusing with a 400: a body nested deeper than any field takes
    (raw_data's MAX_RAW_DATA_DEPTH, one level down), before anything walks it,
    and one too deep for Python's json to read at all (to DRF a RecursionError,
    a 500); and a body whose text no database stores (a lone surrogate),
    naming where, before a field's validation could echo it back."""

    def parse(self, stream, media_type=None, parser_context=None):
        levels = MAX_RAW_DATA_DEPTH + 1
        too_deep = f"The body nests objects and arrays more than {levels} levels deep; raw_data may nest {levels - 1}."
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(too_deep) from None
        if nests_deeper(data, levels):
            raise exceptions.ParseError(too_deep)
        if (where := surrogate_at(data)) is not None:
            raise exceptions.ParseError(f"{where} {SURROGATE_PROBLEM}.")
        return data


class JSONLinesParser(BaseParser):
    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None) -> Iterator[bytes]:
        limit = settings.IMPORT_MAX_BYTES
        if declared_length(parser_context) > limit:
            raise too_large(limit)
        return _lines(stream, limit)


class JSONLParser(JSONLinesParser):
    media_type = "application/jsonl"


class PlainTextParser(JSONLinesParser):
    media_type = "text/plain"


PARSERS = [JSONLinesParser, JSONLParser, PlainTextParser]


def declared_length(parser_context) -> int:
    """The body's Content-Length, 0 when none (or not a number) is declared."""
    try:
        return int(parser_context["request"].META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def unsized_body(request):
    """The body of a request sent without a length (Transfer-Encoding: chunked),
    when the server ends its input where the body ends (`wsgi.input_terminated`,
    a PEP 3333 extension gunicorn sets); None otherwise. Django and DRF take a
    body without Content-Length for no body; the import reads this one instead,
    within the same IMPORT_MAX_BYTES."""
    meta = request.META
    chunked = "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower()
    if chunked and not meta.get("CONTENT_LENGTH") and meta.get("wsgi.input_terminated"):
        return meta["wsgi.input"]
    return None


def _lines(stream, limit: int) -> Iterator[bytes]:
    read = 0
    # Never more than one byte past the limit at a time, however long a line is.
    while line := stream.readline(limit + 1 - read):
        read += len(line)
        if read > limit:
            raise too_large(limit)
        yield line


def too_large(limit: int):
    # Imported here: DRF reads DEFAULT_PARSER_CLASSES (this module) while api.errors is being imported.
    from .errors import TooLarge

    return TooLarge(
        f"The body is larger than the import limit of {limit:,} bytes (IMPORT_MAX_BYTES). Import a bigger "
        "file on the server with `manage.py import_records FILE`, or send it in parts of whole lines."
    )
