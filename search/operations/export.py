"""A search's results as a file: CSV for people, JSON Lines for programs.

An export is a search: the same parameters, filters and access rule, ranked
by the same engine (search.operations.search.ranked), then written record by record
while the response streams. Only the ranked ids are held (at most
EXPORT_MAX_ROWS); the rows are read EXPORT_BATCH at a time, each batch
again through the access rule, so a record moved out of the user's products
(or deleted) after the ranking is left out, never written.

JSON Lines is the interchange format itself (backlog.interchange, through
backlog.exports.export_selected): importing an export writes those records
back as they were. CSV has one row a record with the columns of CSV_COLUMNS;
a cell that a spreadsheet would read as a formula (starting with = + - @, a
tab or a carriage return) gets a leading apostrophe.
"""

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.text import slugify

from backlog.exports import export_selected
from backlog.interchange import dumps
from search import db
from search.contract import SearchError
from search.operations import keys
from search.query.scope import access_scope
from search.ranking import layout


@dataclass(frozen=True)
class Format:
    media_type: str
    extension: str


FORMATS = {
    "csv": Format("text/csv; charset=utf-8", "csv"),
    "jsonl": Format("application/x-ndjson; charset=utf-8", "jsonl"),
}
CSV_COLUMNS = (
    "rank",
    "key",
    "kind",
    "product",
    "feature",
    "title",
    "status",
    "severity",
    "created_at",
    "updated_at",
    "url",
)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
EXPORT_BATCH = 500
# A byte-order mark first: Excel reads the file as UTF-8 only with it.
CSV_BOM = "\ufeff"


def format_named(name) -> Format:
    """The format `name` asks for, or a SearchError naming the ones there are."""
    known = " or ".join(repr(known) for known in FORMATS)
    if isinstance(name, list | tuple):  # format=csv&format=jsonl
        raise SearchError(f"format: give one format, not {len(name)}; use {known}.")
    if isinstance(name, str) and name in FORMATS:
        return FORMATS[name]
    raise SearchError(f"format: {name!r} is not a format; use {known} (or leave format out for the JSON response).")


@dataclass
class Ranked:
    """A search's whole ranked list, held as ids (search.service.ranked); its
    rows are read from the index when asked for, a batch at a time, through
    the access rule again."""

    query: str
    ids: list[int]  # search_document ids, best first
    total: int  # the matches the search response would report
    total_exact: bool
    limit: int
    user: object
    alias: str  # the database the search read; the rows are read from it too

    @property
    def truncated(self) -> bool:
        return len(self.ids) < self.total

    def documents(self, since: datetime | None = None) -> Iterator[list[tuple[int, dict]]]:
        """Batches of (rank, index row), in rank order; with `since`, only the
        records updated (or created) after it."""
        for start in range(0, len(self.ids), EXPORT_BATCH):
            chunk = self.ids[start : start + EXPORT_BATCH]
            with db.reading(self.alias):
                rows = _documents(chunk, self.user, since)
            rank = {doc_id: start + offset + 1 for offset, doc_id in enumerate(chunk)}
            yield [(rank[row["id"]], row) for row in rows]

    def count(self, since: datetime) -> int:
        """How many of the records were updated (or created) after `since`: one statement."""
        scope = access_scope(self.user)
        with db.reading(self.alias), db.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM search_document d "
                f"WHERE d.id = ANY(%(ids)s) AND d.updated_at > %(since)s AND ({scope.where})",
                {"ids": self.ids, "since": since, **scope.params},
            )
            return cursor.fetchone()[0]


@dataclass
class Export(Ranked):
    """One export, ranked and ready to stream: `chunks()` reads and writes the records."""

    format: str = "jsonl"
    link: Callable[[str], str] | None = None  # key -> the record's page, for the CSV's url column

    @property
    def media_type(self) -> str:
        return FORMATS[self.format].media_type

    @property
    def filename(self) -> str:
        words = slugify(self.query)[:40].strip("-") or "search"
        return f"search-{words}-{timezone.now():%Y-%m-%d}.{FORMATS[self.format].extension}"

    def headers(self) -> dict[str, str]:
        """What the file holds, before it is read: the records ranked, the search's
        total, and whether the file holds fewer (X-Export-Truncated)."""
        headers = {
            "X-Export-Rows": str(len(self.ids)),
            "X-Export-Total": str(self.total),
            "X-Export-Total-Exact": "true" if self.total_exact else "false",
            "X-Export-Limit": str(self.limit),
        }
        if self.truncated:
            headers["X-Export-Truncated"] = "true"
        return headers

    def response(self) -> StreamingHttpResponse:
        """The file as a streamed download, what it holds in its X-Export-* headers."""
        response = StreamingHttpResponse(self.chunks(), content_type=self.media_type, headers=self.headers())
        response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=self.filename)
        return response

    def chunks(self) -> Iterator[str]:
        if self.format == "csv":
            yield CSV_BOM + _csv_lines([CSV_COLUMNS])
        for batch in self.documents():
            if self.format == "jsonl":
                with db.reading(self.alias):
                    refs = [(row["kind"], row["record_id"]) for _, row in batch]
                    text = "".join(dumps(record) + "\n" for record in export_selected(refs, self.user))
            else:
                text = _csv_lines(self.cells(rank, row) for rank, row in batch)
            if text:
                yield text

    def cells(self, rank: int, row: dict) -> list:
        """One CSV row: CSV_COLUMNS' values, each cell safe from formula injection."""
        url = self.link(row["key"]) if self.link else ""
        return [rank, *(_cell(row[name]) for name in CSV_COLUMNS[1:-1]), url]


def _documents(ids: list[int], user, since: datetime | None = None) -> list[dict]:
    """The index rows of `ids` that `user` may still see (updated after `since`), in the order of `ids`."""
    scope = access_scope(user)
    newer = "d.updated_at > %(since)s" if since else "TRUE"
    # The product's and feature's keys joined in; on a distributed index read after (keys.name).
    distributed = layout.distributed()
    if distributed:
        named, joined = "d.product_id AS product, d.feature_id AS feature", ""
    else:
        named = "p.key AS product, f.key AS feature"
        joined = (
            "LEFT JOIN backlog_product p ON p.id = d.product_id LEFT JOIN backlog_feature f ON f.id = d.feature_id "
        )
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id, d.kind, d.record_id, d.key, {named}, d.title, d.status, "
            f"d.severity, d.created_at, d.updated_at FROM search_document d {joined}"
            f"WHERE d.id = ANY(%(ids)s) AND {newer} AND ({scope.where})",
            {"ids": ids, "since": since, **scope.params},
        )
        names = [column.name for column in cursor.description]
        found = {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}
    if distributed:
        keys.name(found.values(), product="product", feature="feature")
    return [found[doc_id] for doc_id in ids if doc_id in found]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _csv_lines(rows) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    return out.getvalue()
