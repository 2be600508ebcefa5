"""The search contract: what every surface sends in and gets back.

Declared once, as pydantic models. REST serializes `SearchResponse` as it
is, the MCP tools take `SearchRequest` fields as their input schema and
return `SearchResponse` as structured content, and the staff UI renders it.
`json_schema()` exports both for anyone else.

The names live in: types (vocabulary and limits), errors, search (a search's
request and response), records (similar, get, timeline) and duplicates
(check_duplicates). Import them from here.
"""

from search.contract.duplicates import *
from search.contract.errors import *
from search.contract.records import *
from search.contract.search import *
from search.contract.types import *


def without_null(prop: dict) -> dict:
    """One property of a request model's JSON Schema with `X | None` as `X` (and no null default):
    leaving a parameter out is how a query string or a tool call says None. REST's OpenAPI
    parameters and the MCP tools' input schemas both publish them so."""
    options = [option for option in prop.get("anyOf", []) if option != {"type": "null"}]
    rest = {key: value for key, value in prop.items() if key != "anyOf" and not (key == "default" and value is None)}
    if len(options) == 1:
        return {**rest, **options[0]}
    return {**rest, "anyOf": options} if options else rest


def json_schema() -> dict:
    models = (
        SearchRequest,
        SearchResponse,
        SimilarRequest,
        GetRequest,
        GetResponse,
        TimelineRequest,
        TimelineResponse,
        DuplicateCheckRequest,
        DuplicateCheckResponse,
    )
    return {model.__name__: model.model_json_schema() for model in models}
