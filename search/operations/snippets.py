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

START, STOP = "\ue000", "\ue001"
SNIPPET_CHARS = 160


def _fields(kind: str) -> list[str]:
    """The kind's text fields in the order a snippet prefers them (title last: it is shown anyway)."""
    return list(KINDS[kind]["fields"])


def _columns(kind: str) -> str:
    """The kind's title and text fields, as columns of its table `r` (search.indexing.sql.KINDS)."""
    fields = KINDS[kind]["fields"]
    return ", ".join([f"{KINDS[kind]['title']} AS title", *(f"{sql} AS {name}" for name, (sql, _) in fields.items())])


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
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT d.id, d.kind, d.record_id, d.key, p.key, d.title, d.status, d.severity, d.created_at, "
            f"d.updated_at, ARRAY[{in_title}]::bool[], ARRAY[{anywhere}]::bool[] "
            "FROM search_document d LEFT JOIN backlog_product p ON p.id = d.product_id "
            "CROSS JOIN LATERAL (SELECT ts_filter(d.search_vector, '{a}') AS title_vector) t "
            "WHERE d.id = ANY(%(ids)s)",
            {"ids": ids, **{f"w{i}": word for i, word in enumerate(words)}},
        )
        documents = {
            row[0]: PageDocument(*row[:10], fields={}, in_title=row[10], anywhere=row[11]) for row in cursor.fetchall()
        }
        if not with_fields:
            return documents
        by_kind: dict[str, list[PageDocument]] = {}
        for doc in documents.values():
            by_kind.setdefault(doc.kind, []).append(doc)
        for kind, docs in by_kind.items():
            cursor.execute(
                f"SELECT r.id, {_columns(kind)} FROM {KINDS[kind]['table']} r WHERE r.id = ANY(%s)",
                [[d.record_id for d in docs]],
            )
            names = [column.name for column in cursor.description][1:]
            rows = {row[0]: dict(zip(names, row[1:], strict=True)) for row in cursor.fetchall()}
            for doc in docs:
                doc.fields = rows.get(doc.record_id, {"title": doc.title})
    return documents


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
                f"""
                WITH f(doc, field, body, position) AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[])
                                                       WITH ORDINALITY)
                SELECT doc, field, to_tsvector('{TEXT_SEARCH_CONFIG}', body) @@ %s::tsquery FROM f ORDER BY position
                """,
                [[c[0] for c in candidates], [c[1] for c in candidates], [c[2] for c in candidates], tsquery],
            )
            for doc_id, name, hit in cursor.fetchall():
                if hit:
                    matched[doc_id].append(name)
            best = {doc_id: _best(names) for doc_id, names in matched.items()}
            pairs = [(doc_id, name, documents[doc_id].fields[name]) for doc_id, name in best.items() if name]
            if pairs:
                cursor.execute(
                    f"""
                    SELECT doc, field, ts_headline('{TEXT_SEARCH_CONFIG}', body, %s::tsquery,
                        'StartSel={START}, StopSel={STOP}, MaxWords=30, MinWords=15, ShortWord=2,
                         MaxFragments=1, FragmentDelimiter=" … "')
                    FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS f(doc, field, body)
                    """,
                    [tsquery, [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]],
                )
                headlines = {(doc_id, name): text for doc_id, name, text in cursor.fetchall()}
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
