"""What every surface calls: four operations, each taking plain parameters
and the acting user and returning the contract's JSON.

REST passes its query string, MCP its tool arguments, the staff UI its URL;
all three get the same dict back for the same input, or the same
`SearchError` (whose text they show as it is). Nothing here ranks: `search`
and `similar` are search.operations.search's; `get` and `timeline` are search.operations.records',
which read records through the same access rule, so they show nothing a
search would not. Each call reads one database (search.db): a read replica
that is caught up, or the primary.

Parameters may come as strings (a query string: lists comma-separated,
`entities=bug,test`, or repeated) or as native values (MCP arrays, booleans,
integers); pydantic's lax parsing turns "true", "20" and ISO dates into
their types.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from django.conf import settings
from pydantic import BaseModel, ValidationError

from search import db
from search.contract import (
    DuplicateCheckRequest,
    GetRequest,
    IndexHealth,
    SearchError,
    SearchRequest,
    SimilarRequest,
    TimelineRequest,
)
from search.indexing.health import index_health
from search.operations import duplicates, records, search, similar
from search.operations.export import Export, Ranked, format_named
from search.query.scope import access_scope


@dataclass(frozen=True)
class Operation:
    request: type[BaseModel]  # what it takes: the contract's request model
    run: Callable  # run(request, user) -> the contract's response model


OPERATIONS = {
    "search": Operation(SearchRequest, search.search),
    "similar": Operation(SimilarRequest, similar.similar),
    "get": Operation(GetRequest, records.get),
    "timeline": Operation(TimelineRequest, records.timeline),
    "check_duplicates": Operation(DuplicateCheckRequest, duplicates.check_duplicates),
}


def call(operation: str, params: Mapping[str, Any], user=None) -> dict:
    """Run one operation; the JSON-ready response, or SearchError."""
    chosen = OPERATIONS[operation]
    request = parse(chosen.request, params)
    with db.reading():  # one database for the whole call: a caught-up replica, or the primary
        return chosen.run(request, user).model_dump(mode="json")


def ranked(params: Mapping[str, Any], user=None) -> Ranked:
    """A search's whole ranked list (search.operations.export.Ranked), at most EXPORT_MAX_ROWS
    records deep: what an export writes and what a saved search counts as new."""
    if _items(params).get("cursor"):
        raise SearchError("cursor: an export holds the whole list from its first record; leave cursor out.")
    request = parse(SearchRequest, params)
    limit = settings.EXPORT_MAX_ROWS
    with db.reading():
        ids, total, exact = search.ranked(request, user, depth=limit)
        return Ranked(request.query, ids[:limit], total, exact, limit, user, db.alias())


def export(params: Mapping[str, Any], user=None, link: Callable[[str], str] | None = None) -> Export:
    """A search's whole ranked list as a file, in `params["format"]` (search.operations.export):
    the search's own parameters and filters. The search runs now (its errors are
    raised here, before anything is sent); the rows are read as the returned
    Export's chunks are."""
    items = _items(params)
    chosen = items.pop("format", None)
    format_named(chosen)
    found = ranked(items, user)
    return Export(**vars(found), format=chosen, link=link)


def health(user=None) -> IndexHealth:
    """The index's health as `user` may see it (None: all records), as a search
    response carries it when asked (the dashboard, `serve`)."""
    with db.reading():
        return index_health(access_scope(user).products)


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
        if value is None:
            continue  # null (MCP, JSON) means "not given", as an empty form field does
        if _is_list(model, name):
            values = value if isinstance(value, list | tuple) else [value]
            # Other types stay as they are, for pydantic to name the one that is wrong.
            value = [
                part.strip() if isinstance(part, str) else part
                for v in values
                for part in (v.split(",") if isinstance(v, str) else [v])
            ]
            value = [v for v in value if v != ""]
        elif isinstance(value, list | tuple):
            value = one_value(name, value)
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


def one_value(name: str, values: list | tuple):
    """The value of a parameter that takes one, given as a list: a repeated
    query parameter or an MCP array. More than one is refused, naming it; the
    REST endpoints outside search refuse a repeated parameter with this too."""
    if len(values) != 1:
        raise SearchError(f"{name}: give one value, not a list of {len(values)}.")
    return values[0]


def _items(params: Mapping[str, Any]) -> dict[str, Any]:
    if hasattr(params, "lists"):  # Django's QueryDict: keep repeated values
        return {name: values if len(values) > 1 else values[0] for name, values in params.lists()}
    return dict(params)


def _is_list(model: type[BaseModel], name: str) -> bool:
    annotation = model.model_fields[name].annotation
    return get_origin(annotation) is list or any(get_origin(arg) is list for arg in get_args(annotation))
