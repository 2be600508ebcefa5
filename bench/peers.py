"""The searches a user would pick instead of ours, on the same records.

- SQLite FTS5 with bm25: what the MCP search servers we learned from use.
  The records are copied from search_document into a SQLite file (title and
  body indexed with the porter stemmer, title weighted 10:1 as ours weighs
  it above the text), filters are columns of the joined table, applied in
  the same statement.
- Django's icontains over title and text: what a plain Django app does
  (every word in the title or the text, newest first).

Both answer what a page of results needs: the first 20 records and how many
match. Ours does more per search (facets, snippets, typo correction, both
arms of hybrid), which the ratios include.
"""

import re
import sqlite3
import time
from dataclasses import dataclass
from functools import reduce
from operator import and_
from pathlib import Path

from django.db import connection, transaction
from django.db.models import Q

from search.models import Document

PAGE = 20
_TOKEN = re.compile(r'(-?)"([^"]*)"|(\S+)')
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Filters:
    """The filters of a filtered query, as our contract names them."""

    entities: tuple[str, ...] = ()
    severity: tuple[str, ...] = ()

    def request(self) -> dict:
        return {name: list(values) for name, values in vars(self).items() if values}


def fts5_query(query: str) -> str:
    """Our simple syntax in FTS5's: words ANDed, "phrases", -word as NOT,
    `or` between words, and the last word a prefix (ours matches it so)."""
    parts, negated = [], []
    tokens = list(_TOKEN.finditer(query))
    for i, token in enumerate(tokens):
        minus, phrase, word = token.groups()
        if phrase is not None:
            words = _WORD.findall(phrase)
            text = '"' + " ".join(words) + '"' if words else ""
        else:
            minus = "-" if word.startswith("-") and len(word) > 1 else ""
            words = _WORD.findall(word)
            if [w.lower() for w in words] == ["or"] and parts and i + 1 < len(tokens):
                parts.append("OR")
                continue
            text = '"' + " ".join(words) + '"' if words else ""
            if text and i == len(tokens) - 1 and not minus:
                text += "*"
        if text:
            (negated if minus else parts).append(text)
    expression = " ".join(parts) or '""'
    return expression + "".join(f" NOT {n}" for n in negated)


class Fts5:
    """search_document copied into SQLite FTS5; built once per file."""

    def __init__(self, path: Path):
        self.path = path
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("PRAGMA cache_size = -512000")  # 512 MB, as our shared_buffers
        self.db.execute("PRAGMA mmap_size = 4000000000")

    def build(self) -> tuple[int, float]:
        """Copy the records and index them: (records, seconds)."""
        started = time.perf_counter()
        db = self.db
        db.executescript(
            """
            DROP TABLE IF EXISTS docs; DROP TABLE IF EXISTS fts;
            CREATE TABLE docs (id INTEGER PRIMARY KEY, kind TEXT, product_id INTEGER, status TEXT,
                               severity TEXT, updated_at TEXT, title TEXT, body TEXT);
            CREATE VIRTUAL TABLE fts USING fts5(title, body, content='docs', content_rowid='id',
                                                tokenize='porter unicode61');
            """
        )
        copied = 0
        # A server-side cursor: a client-side one holds every row at once
        # (at a million records, gigabytes).
        with transaction.atomic(), connection.connection.cursor(name="fts5_copy") as cursor:
            cursor.itersize = 20_000
            cursor.execute(
                "SELECT id, kind, product_id, status, severity, updated_at::text, title, body "
                "FROM search_document ORDER BY id"
            )
            while rows := cursor.fetchmany(20_000):
                db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
                copied += len(rows)
        db.execute("INSERT INTO fts(fts) VALUES ('rebuild')")
        db.execute("CREATE INDEX docs_kind_severity ON docs (kind, severity)")
        db.execute("CREATE INDEX docs_updated ON docs (updated_at)")
        db.commit()
        db.execute("ANALYZE")
        return copied, time.perf_counter() - started

    def count(self) -> int:
        """Records copied (0 before the first build)."""
        if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'fts'").fetchone():
            return 0
        return self.db.execute("SELECT count(*) FROM docs").fetchone()[0]

    def search(self, query: str, filters: Filters | None = None) -> tuple[int, list[int]]:
        where, params = ["fts MATCH ?"], [fts5_query(query)]
        filters = filters or Filters()
        for column, values in (("kind", filters.entities), ("severity", filters.severity)):
            if values:
                where.append(f"docs.{column} IN ({', '.join('?' * len(values))})")
                params += values
        sql = f"FROM fts JOIN docs ON docs.id = fts.rowid WHERE {' AND '.join(where)}"
        ranked = self.db.execute(f"SELECT docs.id {sql} ORDER BY bm25(fts, 10.0, 1.0) LIMIT {PAGE}", params)
        page = [row[0] for row in ranked]
        total = self.db.execute(f"SELECT count(*) {sql}", params).fetchone()[0]
        return total, page


def icontains(query: str, filters: Filters | None = None) -> tuple[int, list[int]]:
    """Every word of the query in the title or the text, newest first."""
    words = _WORD.findall(query) or [query]
    matches = Document.objects.filter(reduce(and_, (Q(title__icontains=w) | Q(body__icontains=w) for w in words)))
    if filters and filters.entities:
        matches = matches.filter(kind__in=filters.entities)
    if filters and filters.severity:
        matches = matches.filter(severity__in=filters.severity)
    page = list(matches.order_by("-updated_at").values_list("id", flat=True)[:PAGE])
    return matches.count(), page
