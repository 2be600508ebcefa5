"""Snippets for the returned page only: the best matching field, about 160
characters around the match, plain text with highlight offsets.

ts_headline re-parses documents, so it runs on at most one field of each
record on the page, never on the match set. Highlights are marked with two
private-use characters that cannot occur in stored text, then turned into
offsets, so no markup ever travels: surfaces escape the text and draw the
highlights themselves.
"""

from dataclasses import dataclass, field

from search import db
from search.contract import Highlight, Snippet
from search.indexing.sql import KINDS, TEXT_SEARCH_CONFIG
from search.operations import keys
from search.ranking import layout

START, STOP = "\ue000", "\ue001"
SNIPPET_CHARS = 160


def _fields(kind: str) -> list[str]:
    """The kind's text fields in the order a snippet prefers them (title last: it is shown anyway)."""
    return list(KINDS[kind]["fields"])


def _fields_json(kind: str) -> str:
    """The kind's title and text fields as one JSON object (all text), of its table `r` (search.indexing.sql.KINDS)."""
    fields = KINDS[kind]["fields"]
    pairs = [f"'title', {KINDS[kind]['title']}", *(f"'{name}', {sql}" for name, (sql, _) in fields.items())]
    return f"json_build_object({', '.join(pairs)})"


@dataclass
class PageDocument:
    id: int
    kind: str
    record_id: int
    key: str
    product_key: str | None
    title: str
    status: str | None
    severity: str | None
    created_at: object
    updated_at: object
    fields: dict
    # For each of page_documents' `words`: whether the title holds it, whether the record does.
    in_title: list[bool] = field(default_factory=list)
    anywhere: list[bool] = field(default_factory=list)


def page_documents(ids: list[int], with_fields: bool = True, words: list[str] = ()) -> dict[int, PageDocument]:
    """The page's rows, and which of `words` (tsqueries) each holds in its title and at all (for a
    hit's `why`, from the stored tsvector, whose title lexemes are weighted A); with `with_fields`,
    each record's text fields too (for snippets and include_content), read from its own table."""
    checks = [f"%(w{i})s::tsquery" for i in range(len(words))]
    in_title = ", ".join(f"t.title_vector @@ {check}" for check in checks)
    anywhere = ", ".join(f"d.search_vector @@ {check}" for check in checks)
    # The product's key joined in; on a distributed index read after (keys.of).
    distributed = layout.distributed()
    product_key = "d.product_id" if distributed else "p.key"
    product = "" if distributed else "LEFT JOIN backlog_product p ON p.id = d.product_id "
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id, d.kind, d.record_id, d.key, {product_key}, d.title, d.status, d.severity, d.created_at, "
            f"d.updated_at, ARRAY[{in_title}]::bool[], ARRAY[{anywhere}]::bool[] "
            f"FROM search_document d {product}"
            "CROSS JOIN LATERAL (SELECT ts_filter(d.search_vector, '{a}') AS title_vector) t "
            "WHERE d.id = ANY(%(ids)s)",
            {"ids": ids, **{f"w{i}": word for i, word in enumerate(words)}},
        )
        rows = cursor.fetchall()
        if distributed and rows:
            products = keys.of(products=[row[4] for row in rows])["product"]
            rows = [(*row[:4], products.get(row[4]), *row[5:]) for row in rows]
        documents = {row[0]: PageDocument(*row[:10], fields={}, in_title=row[10], anywhere=row[11]) for row in rows}
        if not with_fields:
            return documents
        by_kind: dict[str, list[int]] = {}
        for doc in documents.values():
            by_kind.setdefault(doc.kind, []).append(doc.record_id)
        if not by_kind:
            return documents
        # Every kind's records in one statement. Not joined to the page's rows above: on Citus
        # the record tables stay on the coordinator, and a join would pull them into the query.
        cursor.execute(
            " UNION ALL ".join(
                f"SELECT %s::text, r.id, {_fields_json(kind)} FROM {KINDS[kind]['table']} r WHERE r.id = ANY(%s)"
                for kind in by_kind
            ),
            [value for kind, ids in by_kind.items() for value in (kind, ids)],
        )
        rows = {(kind, record_id): fields for kind, record_id, fields in cursor.fetchall()}
        for doc in documents.values():
            doc.fields = rows.get((doc.kind, doc.record_id), {"title": doc.title})
    return documents


# Which fields match, and the headline of each record's best one (_best: the first
# matching field other than the title, else the title), in one statement.
SNIPPETS_SQL = f"""
    WITH f(doc, field, body, position) AS (
        SELECT * FROM unnest(%(docs)s::bigint[], %(fields)s::text[], %(bodies)s::text[]) WITH ORDINALITY
    ), m AS MATERIALIZED (
        SELECT f.*, to_tsvector('{TEXT_SEARCH_CONFIG}', body) @@ %(query)s::tsquery AS hit FROM f
    ), best AS (
        SELECT DISTINCT ON (doc) doc, field FROM m WHERE hit ORDER BY doc, field = 'title', position
    )
    SELECT m.doc, m.field, m.hit,
           CASE WHEN best.doc IS NOT NULL THEN ts_headline('{TEXT_SEARCH_CONFIG}', m.body, %(query)s::tsquery,
               'StartSel={START}, StopSel={STOP}, MaxWords=30, MinWords=15, ShortWord=2,
                MaxFragments=1, FragmentDelimiter=" … "') END
    FROM m LEFT JOIN best ON best.doc = m.doc AND best.field = m.field
    ORDER BY m.position
"""


def build(documents: dict[int, PageDocument], tsquery: str) -> dict[int, Snippet]:
    """One snippet a document; highlighted where `tsquery` matches."""
    candidates = []  # (doc id, field, text)
    for doc in documents.values():
        for name in ["title", *_fields(doc.kind)]:
            text = doc.fields.get(name)
            if text:
                candidates.append((doc.id, name, text))
    matched: dict[int, list[str]] = {doc_id: [] for doc_id in documents}
    headlines: dict[tuple[int, str], str] = {}
    if tsquery and candidates:
        with db.cursor() as cursor:
            cursor.execute(
                SNIPPETS_SQL,
                {
                    "docs": [c[0] for c in candidates],
                    "fields": [c[1] for c in candidates],
                    "bodies": [c[2] for c in candidates],
                    "query": tsquery,
                },
            )
            for doc_id, name, hit, headline in cursor.fetchall():
                if hit:
                    matched[doc_id].append(name)
                if headline is not None:
                    headlines[(doc_id, name)] = headline
    snippets = {}
    for doc in documents.values():
        names = matched[doc.id]
        best = _best(names)
        if best and (doc.id, best) in headlines:
            text, highlights = _offsets(headlines[(doc.id, best)], doc.fields[best])
            snippets[doc.id] = Snippet(text=text, field=best, highlights=highlights, matched_fields=names)
        else:
            field = next((n for n in _fields(doc.kind) if doc.fields.get(n)), "title")
            text = _shorten(doc.fields.get(field) or doc.title)
            snippets[doc.id] = Snippet(text=text, field=field, highlights=[], matched_fields=names)
    return snippets


def _best(names: list[str]) -> str | None:
    """The first matched field other than the title, else the title."""
    others = [n for n in names if n != "title"]
    return others[0] if others else (names[0] if names else None)


def _offsets(marked: str, whole: str) -> tuple[str, list[Highlight]]:
    """Strip the markers; keep where they were. Trim to about SNIPPET_CHARS.
    A fragment that starts or ends inside the field's text (`whole`) says so
    with "…": cut from its first words, "No crash; the mains…" would read
    "crash; the mains…"."""
    text, highlights, start = [], [], None
    length = 0
    for char in marked:
        if char == START:
            start = length
        elif char == STOP and start is not None:
            highlights.append(Highlight(start=start, end=length))
            start = None
        else:
            text.append(char)
            length += 1
    plain = " ".join("".join(text).split("\n"))
    normal, field = " ".join(plain.split()), " ".join(whole.split())
    at = field.find(normal)
    starts_inside, ends_inside = at > 0, 0 <= at and at + len(normal) < len(field)
    if not highlights:
        return _shorten(plain), highlights
    if len(plain) <= SNIPPET_CHARS + 40:
        return _with_ellipses(plain, highlights, starts_inside, ends_inside)
    # Keep a window around the first highlight.
    centre = highlights[0].start
    begin = max(0, min(centre - 50, len(plain) - SNIPPET_CHARS))
    while begin > 0 and not plain[begin - 1].isspace():
        begin -= 1
    end = min(len(plain), begin + SNIPPET_CHARS)
    while end < len(plain) and not plain[end].isspace():
        end += 1
    inside = [h for h in highlights if h.start >= begin and h.end <= end]
    kept = [Highlight(start=h.start - begin, end=h.end - begin) for h in inside]
    return _with_ellipses(plain[begin:end], kept, begin > 0 or starts_inside, end < len(plain) or ends_inside)


def _with_ellipses(text: str, highlights: list[Highlight], before: bool, after: bool) -> tuple[str, list[Highlight]]:
    """`text` with "… " before it and " …" after it where it was cut, the highlights moved along."""
    prefix = "… " if before else ""
    moved = [Highlight(start=h.start + len(prefix), end=h.end + len(prefix)) for h in highlights]
    return prefix + text + (" …" if after else ""), moved


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= SNIPPET_CHARS:
        return text
    cut = text.rfind(" ", 0, SNIPPET_CHARS)
    return text[: cut if cut > 80 else SNIPPET_CHARS] + " …"
