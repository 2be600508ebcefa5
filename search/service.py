"""What every surface calls: four operations, each taking plain parameters
and the acting user and returning the contract's JSON.

REST passes its query string, MCP its tool arguments, the staff UI its URL;
all three get the same dict back for the same input, or the same
`SearchError` (whose text they show as it is). Nothing here ranks: `search`
and `similar` are search.engine's; `get` and `timeline` read records through
the same access scope, so they show nothing a search would not.

Parameters may come as strings (a query string: lists comma-separated,
`entities=bug,test`, or repeated) or as native values (MCP arrays, booleans,
integers); pydantic's lax parsing turns "true", "20" and ISO dates into
their types.
"""

import json
from collections.abc import Mapping
from typing import Any, get_args, get_origin

from django.db import connection
from pydantic import BaseModel, ValidationError

from . import engine, snippets
from .contract import (
    RELATED_MAX,
    GetRequest,
    GetResponse,
    NotFound,
    Record,
    RecordRef,
    Related,
    SearchError,
    SearchRequest,
    SimilarRequest,
    TimelineRequest,
    TimelineResponse,
)

OPERATIONS = {
    "search": SearchRequest,
    "similar": SimilarRequest,
    "get": GetRequest,
    "timeline": TimelineRequest,
}


def call(operation: str, params: Mapping[str, Any], user=None) -> dict:
    """Run one operation; the JSON-ready response, or SearchError."""
    request = parse(OPERATIONS[operation], params)
    return RUNNERS[operation](request, user).model_dump(mode="json")


# -- parameters ---------------------------------------------------------------------------


def parse(model: type[BaseModel], params: Mapping[str, Any]) -> BaseModel:
    """Validate `params` as `model`; any problem becomes one SearchError."""
    items = _items(params)
    unknown = sorted(set(items) - set(model.model_fields))
    if unknown:
        known = ", ".join(model.model_fields)
        raise SearchError(f"unknown parameter {unknown[0]!r}; the parameters are: {known}.")
    data = {}
    for name, value in items.items():
        if _is_list(model, name):
            values = value if isinstance(value, list | tuple) else [value]
            value = [part.strip() for v in values for part in (v.split(",") if isinstance(v, str) else [v])]
            value = [v for v in value if v != ""]
        elif isinstance(value, list):
            if len(value) > 1:
                raise SearchError(f"{name}: give one value, not {len(value)}.")
            value = value[0]
        if value == "" and name not in ("query",):
            continue  # an empty form field means "not given"
        data[name] = value
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SearchError(describe(exc)) from exc


def describe(exc: ValidationError) -> str:
    """pydantic's errors as one sentence a person or a model can act on."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"] if not isinstance(p, int)) or "request"
        message = error["msg"]
        if message.startswith("Value error, "):
            message = message.removeprefix("Value error, ")
        got = error.get("input")
        if error["type"] == "missing":
            parts.append(f"{where}: required; send {where}=...")
        elif isinstance(got, str | int | float) and not isinstance(got, bool) and error["type"] != "value_error":
            parts.append(f"{where}: {message[:1].lower()}{message[1:]} (got {str(got)!r})")
        else:
            parts.append(f"{where}: {message[:1].lower()}{message[1:]}")
    return "; ".join(parts) + "."


def _items(params: Mapping[str, Any]) -> dict[str, Any]:
    if hasattr(params, "lists"):  # Django's QueryDict: keep repeated values
        return {name: values if len(values) > 1 else values[0] for name, values in params.lists()}
    return dict(params)


def _is_list(model: type[BaseModel], name: str) -> bool:
    annotation = model.model_fields[name].annotation
    return get_origin(annotation) is list or any(get_origin(arg) is list for arg in get_args(annotation))


# -- search and similar -------------------------------------------------------------------


def _search(request: SearchRequest, user):
    return engine.search(request, user)


def _similar(request: SimilarRequest, user):
    return engine.similar(user=user, **request.model_dump())


# -- get --------------------------------------------------------------------------------------

REF_COLUMNS = "d.id, d.kind, d.key, d.title, d.status, d.severity, d.created_at, d.updated_at"


def _ref(row) -> RecordRef:
    _, kind, key, title, status, severity, created_at, updated_at = row[:8]
    return RecordRef(
        kind=kind, key=key, title=title, status=status, severity=severity, created_at=created_at, updated_at=updated_at
    )


def _get(request: GetRequest, user) -> GetResponse:
    scope = engine.access_scope(user)
    wanted = list(dict.fromkeys(request.keys))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {REF_COLUMNS}, d.record_id, d.product_id, d.feature_id, p.key, f.key "
            f"FROM search_document d JOIN backlog_product p ON p.id = d.product_id "
            f"LEFT JOIN backlog_feature f ON f.id = d.feature_id "
            f"WHERE upper(d.key) = ANY(%s) AND ({scope.where})",
            [[k.upper() for k in wanted], *scope.params],
        )
        rows = {row[2].upper(): row for row in cursor.fetchall()}
    found = [rows[k.upper()] for k in wanted if k.upper() in rows]
    contents = snippets.page_documents([row[0] for row in found]) if request.include_content and found else {}
    raw = _raw_data([row[8] for row in found if row[1] == "bug"]) if request.include_content else {}
    records = []
    for row in found:
        doc_id, kind, key = row[:3]
        record_id, product_id, feature_id, product_key, feature_key = row[8:]
        records.append(
            Record(
                **_ref(row).model_dump(),
                id=record_id,
                product=product_key if kind != "product" else None,
                feature=feature_key,
                content=contents[doc_id].fields if doc_id in contents else None,
                raw_data=raw.get(record_id) if kind == "bug" else None,
                related=_related(kind, record_id, product_id, feature_id, user) if request.include_related else None,
            )
        )
    return GetResponse(records=records, missing=[k for k in wanted if k.upper() not in rows])


def _raw_data(bug_ids: list[int]) -> dict[int, dict]:
    if not bug_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, raw_data FROM backlog_bug WHERE id = ANY(%s)", [bug_ids])
        # Django's psycopg adapter hands jsonb over as text.
        return {pk: json.loads(data) if isinstance(data, str) else data for pk, data in cursor.fetchall()}


def _related(kind: str, record_id: int, product_id: int, feature_id: int | None, user) -> dict[str, Related]:
    """Each relation as its total and newest RELATED_MAX records, inside the access scope."""
    product = ("d.kind = 'product' AND d.record_id = %s", [product_id])
    feature = ("d.kind = 'feature' AND d.record_id = %s", [feature_id])
    relations = {
        "bug": {
            "product": product,
            "feature": feature,
            "test": ("d.kind = 'test' AND d.record_id = (SELECT test_id FROM backlog_bug WHERE id = %s)", [record_id]),
        },
        "test": {
            "product": product,
            "feature": feature,
            "bugs": ("d.kind = 'bug' AND d.record_id IN (SELECT id FROM backlog_bug WHERE test_id = %s)", [record_id]),
        },
        "feature": {
            "product": product,
            "tests": ("d.kind = 'test' AND d.feature_id = %s", [record_id]),
            "open_bugs": ("d.kind = 'bug' AND d.feature_id = %s AND d.status = 'open'", [record_id]),
            "bugs": ("d.kind = 'bug' AND d.feature_id = %s", [record_id]),
        },
        "product": {
            "features": ("d.kind = 'feature' AND d.product_id = %s", [record_id]),
            "tests": ("d.kind = 'test' AND d.product_id = %s", [record_id]),
            "open_bugs": ("d.kind = 'bug' AND d.product_id = %s AND d.status = 'open'", [record_id]),
        },
    }[kind]
    scope = engine.access_scope(user)
    related = {}
    with connection.cursor() as cursor:
        for name, (condition, params) in relations.items():
            if params == [None]:
                related[name] = Related(total=0, items=[])
                continue
            cursor.execute(
                f"SELECT {REF_COLUMNS}, count(*) OVER () FROM search_document d "
                f"WHERE ({condition}) AND ({scope.where}) ORDER BY d.created_at DESC, d.id DESC LIMIT %s",
                [*params, *scope.params, RELATED_MAX],
            )
            rows = cursor.fetchall()
            related[name] = Related(total=rows[0][-1] if rows else 0, items=[_ref(row) for row in rows])
    return related


# -- timeline ---------------------------------------------------------------------------------


def _timeline(request: TimelineRequest, user) -> TimelineResponse:
    scope = engine.access_scope(user)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {REF_COLUMNS}, d.product_id, d.feature_id, p.key, f.key FROM search_document d "
            f"JOIN backlog_product p ON p.id = d.product_id LEFT JOIN backlog_feature f ON f.id = d.feature_id "
            f"WHERE upper(d.key) = upper(%s) AND ({scope.where})",
            [request.key, *scope.params],
        )
        row = cursor.fetchone()
        if row is None:
            raise NotFound(f"no record with key {request.key!r}; check the key (like BUG-12) or search for it first.")
        doc_id, created_at = row[0], row[6]
        product_id, feature_id, product_key, feature_key = row[8:]
        within = request.within if feature_id is not None else "product"
        if within == "feature":
            condition, params, scope_key = "d.feature_id = %s", [feature_id], feature_key
        else:
            condition, params, scope_key = "d.product_id = %s", [product_id], product_key
        if request.entities:
            condition += " AND d.kind = ANY(%s)"
            params.append(list(request.entities))
        sides = {}
        for side, operator, order, count in (
            ("before", "<", "DESC", request.before),
            ("after", ">", "ASC", request.after),
        ):
            cursor.execute(
                f"SELECT {REF_COLUMNS} FROM search_document d WHERE ({condition}) AND ({scope.where}) "
                f"AND (d.created_at, d.id) {operator} (%s, %s) ORDER BY d.created_at {order}, d.id {order} LIMIT %s",
                [*params, *scope.params, created_at, doc_id, count],
            )
            sides[side] = [_ref(r) for r in cursor.fetchall()]
    return TimelineResponse(record=_ref(row), within=within, scope_key=scope_key, **sides)


RUNNERS = {"search": _search, "similar": _similar, "get": _get, "timeline": _timeline}
