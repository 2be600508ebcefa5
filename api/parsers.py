"""Request bodies of the bulk import: JSON Lines, handed over line by line.

`backlog.services.import_records` parses and validates each line itself
(with its line number), so these parsers only split the body into lines;
three media types because clients send JSON Lines under all three names.
"""

from rest_framework.parsers import BaseParser


class JSONLinesParser(BaseParser):
    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None) -> list[bytes]:
        return list(stream)


class JSONLParser(JSONLinesParser):
    media_type = "application/jsonl"


class PlainTextParser(JSONLinesParser):
    media_type = "text/plain"


PARSERS = [JSONLinesParser, JSONLParser, PlainTextParser]
