"""`get` and `timeline`: records read by key, through the search index.

Both read `search_document` with the ORM, cut to what the user may see by
`backlog.access.visible` (the rule's ORM form; search.query.scope holds its SQL
form for ranking), so they show nothing a search would not.
"""

from operator import itemgetter

from django.db.models import CharField, Count, F, OuterRef, Q, QuerySet, Subquery, Value, Window
from django.db.models.functions import Upper

from backlog.access import visible
from backlog.models import Bug, Feature, Product
from search.contract import (
    BRIEF_TEXT,
    LINKS_MAX,
    RECORD_PARTS,
    RELATED_MAX,
    TEXT_CUT,
    GetRequest,
    GetResponse,
    NotFound,
    Record,
    RecordRef,
    Related,
    TimelineRequest,
    TimelineResponse,
    budget,
)
from search.models import Document
from search.operations import keys, snippets
from search.ranking import layout

REF_FIELDS = ("kind", "key", "title", "status", "severity", "created_at", "updated_at")


def _documents(visible_rows: QuerySet) -> QuerySet:
    """`visible_rows`, the index rows a user may see (the access rule, read once a call: every
    query of the call is built on them), found by key; `_with_keys` reads their products' and
    features' keys."""
    documents = visible_rows.annotate(upper_key=Upper("key"))
    if layout.distributed():
        return documents
    return documents.annotate(
        product_key=Subquery(Product.objects.filter(id=OuterRef("product_id")).values("key")),
        feature_key=Subquery(Feature.objects.filter(id=OuterRef("feature_id")).values("key")),
    )


def _with_keys(documents: QuerySet, *fields: str) -> list[dict]:
    """`fields` of `documents` (from _documents) with product_key and feature_key:
    joined in on one server, read after on a distributed index (keys.name)."""
    if not layout.distributed():
        return list(documents.values(*fields, "product_key", "feature_key"))
    rows = list(documents.values(*fields, product_key=F("product_id"), feature_key=F("feature_id")))
    keys.name(rows, product="product_key", feature="feature_key")
    return rows


def _ref(row: dict) -> RecordRef:
    return RecordRef(**{name: row[name] for name in REF_FIELDS})


def get(request: GetRequest, user) -> GetResponse:
    wanted = list(dict.fromkeys(request.keys))
    fields = ("id", *REF_FIELDS, "record_id", "product_id", "feature_id")
    visible_rows = visible(Document.objects.all(), user)
    rows = {
        row["key"].upper(): row
        for row in _with_keys(_documents(visible_rows).filter(upper_key__in=[k.upper() for k in wanted]), *fields)
    }
    found = [rows[k.upper()] for k in wanted if k.upper() in rows]
    # detail not given: full, unless fields name parts to add to a concise record.
    full = request.detail == "full" or (request.detail is None and not request.fields)
    parts = set(RECORD_PARTS) if full else set(request.fields or ())
    contents = snippets.page_documents([row["id"] for row in found]) if request.include_content and found else {}
    raw = {}
    if request.include_content and "raw_data" in parts:
        bug_ids = [row["record_id"] for row in found if row["kind"] == "bug"]
        raw = dict(Bug.objects.filter(id__in=bug_ids).values_list("id", "raw_data")) if bug_ids else {}
    records = []
    for row in found:
        related = _related(row, visible_rows) if request.include_related else None
        text = contents[row["id"]].fields if row["id"] in contents else None
        record = Record(
            **_ref(row).model_dump(),
            id=row["record_id"] if "id" in parts else None,
            product=row["product_key"] if row["kind"] != "product" else None,
            feature=row["feature_key"],
            raw_data=raw.get(row["record_id"]) if row["kind"] == "bug" else None,
            related=related if "related" in parts else None,
        )
        if full:
            record.content = text
        else:
            record.created_at, record.updated_at = record.created_at.date(), record.updated_at.date()
            record.links, link_cuts = _links(related)
            record.content, text_cuts = _brief(row["kind"], text, parts)
            record.cut = {**text_cuts, **link_cuts} or None
        records.append(record)
    missing = [k for k in wanted if k.upper() not in rows]

    def answer(given: int) -> GetResponse:
        omitted = [record.key for record in records[given:]] or None
        return GetResponse(records=records[:given], missing=missing, omitted=omitted)

    if request.max_tokens is None:
        return answer(len(records))
    return budget.fit(answer, len(records), request.max_tokens, "record")


# Relations a concise record names one key of; product and feature are its own fields.
ONE_KEY = ("test", "duplicate_of")


def _links(related: dict[str, Related] | None) -> tuple[dict | None, dict[str, int]]:
    """A concise record's links (keys by relation, those it has) and the relations cut short."""
    if related is None:
        return None, {}
    links, cuts = {}, {}
    for name, relation in related.items():
        if name in ("product", "feature") or not relation.items:
            continue
        found = [item.key for item in relation.items]
        links[name] = found[0] if name in ONE_KEY else found[:LINKS_MAX]
        if relation.total > LINKS_MAX and name not in ONE_KEY:
            cuts[name] = relation.total
    return links or None, cuts


def _brief(kind: str, text: dict | None, parts: set[str]) -> tuple[dict | None, dict[str, int]]:
    """A concise record's text fields: what says what happens, each cut to TEXT_CUT characters
    (a field named in `parts` whole, or all of them for `content`), and the fields cut."""
    if text is None:
        return None, {}
    present = {name: value for name, value in text.items() if name != "title" and value}
    names = [name for name in BRIEF_TEXT[kind] if name in present]
    if kind == "bug" and not names and "description" in present:
        names = ["description"]  # a tracker that keeps one text
    whole = set(present) if "content" in parts else parts & set(present)
    names += [name for name in present if name in whole and name not in names]
    brief, cuts = {}, {}
    for name in names:
        value = present[name]
        flat = "\n".join(value) if isinstance(value, list) else value
        if name in whole or len(flat) <= TEXT_CUT:
            brief[name] = value
        else:
            brief[name] = _cut(flat)
            cuts[name] = len(flat)
    return brief or None, cuts


def _cut(text: str) -> str:
    """`text`'s first TEXT_CUT characters or fewer, ended at a word, and an ellipsis."""
    head = text[: TEXT_CUT - 1]
    if " " in head[TEXT_CUT // 2 :]:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:.\n") + "…"


def _relations(row: dict) -> dict[str, Q]:
    """Each relation of the record in `row`, as a condition on index rows."""
    record_id, product_id, feature_id = row["record_id"], row["product_id"], row["feature_id"]
    product = Q(kind="product", record_id=product_id)
    feature = Q(kind="feature", record_id=feature_id)
    return {
        "bug": {
            "product": product,
            "feature": feature,
            "test": Q(kind="test", record_id__in=Bug.objects.filter(id=record_id).values("test_id")),
            "duplicate_of": Q(kind="bug", record_id__in=Bug.objects.filter(id=record_id).values("duplicate_of_id")),
            "duplicates": Q(kind="bug", record_id__in=Bug.objects.filter(duplicate_of_id=record_id).values("id")),
        },
        "test": {
            "product": product,
            "feature": feature,
            "bugs": Q(kind="bug", record_id__in=Bug.objects.filter(test_id=record_id).values("id")),
        },
        "feature": {
            "product": product,
            "tests": Q(kind="test", feature_id=record_id),
            "open_bugs": Q(kind="bug", feature_id=record_id, status="open"),
            "bugs": Q(kind="bug", feature_id=record_id),
        },
        "product": {
            "features": Q(kind="feature", product_id=record_id),
            "tests": Q(kind="test", product_id=record_id),
            "open_bugs": Q(kind="bug", product_id=record_id, status="open"),
        },
    }[row["kind"]]


def _related(row: dict, visible_rows: QuerySet) -> dict[str, Related]:
    """Each relation as its total and newest RELATED_MAX records, in one query: a
    UNION ALL of one part a relation (one query each took 5 for a bug)."""
    relations = _relations(row)
    parts = [
        visible_rows.filter(condition)
        .annotate(relation=Value(name, output_field=CharField()), total=Window(Count("id")))
        .order_by("-created_at", "-id")
        .values("id", *REF_FIELDS, "total", "relation")[:RELATED_MAX]
        for name, condition in relations.items()
        if not (name == "feature" and row["feature_id"] is None)
    ]
    found = {name: [] for name in relations}
    for item in parts[0].union(*parts[1:], all=True):
        found[item["relation"]].append(item)
    related = {}
    for name, items in found.items():
        items.sort(key=itemgetter("created_at", "id"), reverse=True)
        related[name] = Related(total=items[0]["total"] if items else 0, items=[_ref(item) for item in items])
    return related


def timeline(request: TimelineRequest, user) -> TimelineResponse:
    fields = ("id", *REF_FIELDS, "product_id", "feature_id")
    visible_rows = visible(Document.objects.all(), user)
    found = _with_keys(_documents(visible_rows).filter(upper_key=request.key.upper()).order_by("id")[:1], *fields)
    if not found:
        raise NotFound.no_record(request.key)
    row = found[0]
    within = request.within if row["feature_id"] is not None else "product"
    if within == "feature":
        neighbours, scope_key = visible_rows.filter(feature_id=row["feature_id"]), row["feature_key"]
    else:
        neighbours, scope_key = visible_rows.filter(product_id=row["product_id"]), row["product_key"]
    if request.entities:
        neighbours = neighbours.filter(kind__in=request.entities)
    neighbours = neighbours.values(*REF_FIELDS)
    created, doc_id = row["created_at"], row["id"]
    earlier = Q(created_at__lt=created) | Q(created_at=created, id__lt=doc_id)
    later = Q(created_at__gt=created) | Q(created_at=created, id__gt=doc_id)
    return TimelineResponse(
        record=_ref(row),
        within=within,
        scope_key=scope_key,
        before=[_ref(r) for r in neighbours.filter(earlier).order_by("-created_at", "-id")[: request.before]],
        after=[_ref(r) for r in neighbours.filter(later).order_by("created_at", "id")[: request.after]],
    )
