"""OpenAPI for the search operations, generated from search.contract.

The query parameters of /api/search, /api/similar, /api/records and
/api/timeline are the fields of the operation's pydantic request model, and
their responses are the response model's JSON Schema, registered as
components by `add_contract_components` (a drf-spectacular postprocessing
hook). Nothing is copied by hand, so the documentation cannot drift from
what `search.service.call` validates and returns. The schema is OpenAPI 3.1,
whose schema objects are JSON Schema: pydantic's output fits as it is.
`add_error_responses` documents the errors every endpoint can give, all of
them in the one shape of `Error` (api/errors.py).
"""

import inspect

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from pydantic import BaseModel, Field

from search.contract import (
    DuplicateCheckRequest,
    DuplicateCheckResponse,
    GetResponse,
    SearchRequest,
    SearchResponse,
    TimelineResponse,
    without_null,
)
from search.operations.export import FORMATS

REF_TEMPLATE = "#/components/schemas/{model}"
# And the one request that comes as a JSON body (POST /api/bugs/check-duplicates).
RESPONSE_MODELS = (SearchResponse, GetResponse, TimelineResponse, DuplicateCheckRequest, DuplicateCheckResponse)


class ImportProblem(BaseModel):
    line: int | None = Field(description="line number in the body; null: the whole import")
    key: str | None = Field(description="the record's key, when it could be read")
    message: str


class ErrorDetail(BaseModel):
    code: str = Field(
        description="invalid_request, invalid_records, not_found, not_authenticated, authentication_failed, "
        "permission_denied, method_not_allowed, unsupported_media_type, conflict, too_large, server_error, "
        "semantic_unavailable, database_unavailable"
    )
    message: str = Field(description="what was wrong and what to send instead; the MCP tools show the same text")
    fields: dict[str, list[str]] | None = Field(None, description="record validation: the messages of each field")
    problems: list[ImportProblem] | None = Field(None, description="import: every problem, with its line number")


class Error(BaseModel):
    """Every error under /api/ has this shape."""

    error: ErrorDetail


def ref(model: type[BaseModel]) -> dict:
    return {"$ref": REF_TEMPLATE.format(model=model.__name__)}


def errors(described: dict[int, str]) -> dict[int, OpenApiResponse]:
    """An endpoint's own error answers, each in the shape of `Error`, by status: {404: "no run of that id"}."""
    return {status: OpenApiResponse(ref(Error), description=description) for status, description in described.items()}


def parameters(model: type[BaseModel], path: tuple[str, ...] = ()) -> list[OpenApiParameter]:
    """The model's fields as parameters: `path` ones in the URL, the rest in the query string."""
    schema = model.model_json_schema(ref_template=REF_TEMPLATE)
    required = set(schema.get("required", ()))
    result = []
    for name, prop in schema["properties"].items():
        prop = without_null(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        listed = prop.get("type") == "array"
        result.append(
            OpenApiParameter(
                name,
                type=prop,
                location=OpenApiParameter.PATH if name in path else OpenApiParameter.QUERY,
                required=name in required or name in path,
                description=description + (" (comma-separated)" if listed else "") if description else None,
                # entities=bug,test; a repeated parameter works too.
                style="form" if listed else None,
                explode=False if listed else None,
            )
        )
    return result


def operation(request: type[BaseModel], response: type[BaseModel], summary: str, path: tuple[str, ...] = ()):
    """extend_schema for a GET that passes `request`'s fields to search.service and returns `response`."""
    return extend_schema(
        summary=summary,
        description=inspect.cleandoc(request.__doc__ or ""),
        parameters=parameters(request, path),
        responses={200: OpenApiResponse(ref(response))},
        tags=["search"],
    )


def body_operation(request: type[BaseModel], response: type[BaseModel], summary: str):
    """extend_schema for a POST whose JSON body is `request` and whose answer is `response`."""
    return extend_schema(
        summary=summary,
        description=inspect.cleandoc(request.__doc__ or ""),
        request={"application/json": ref(request)},
        responses={200: OpenApiResponse(ref(response))},
        tags=["search"],
    )


def search_operation():
    """/api/search: the search, or with `format` the same search as a file (search.operations.export)."""
    format_parameter = OpenApiParameter(
        "format",
        type={"type": "string", "enum": list(FORMATS)},
        location=OpenApiParameter.QUERY,
        description="csv or jsonl: the whole ranked list (up to EXPORT_MAX_ROWS records) as a streamed file "
        "instead of a page of JSON; cursor is refused, the other paging parameters do not apply. "
        "The X-Export-Rows, X-Export-Total and X-Export-Truncated headers say what it holds (docs/api.md).",
    )
    files = {(200, format.media_type.split(";")[0]): OpenApiTypes.STR for format in FORMATS.values()}
    return extend_schema(
        summary="Search all records",
        description=inspect.cleandoc(SearchRequest.__doc__ or ""),
        parameters=[*parameters(SearchRequest), format_parameter],
        responses={(200, "application/json"): OpenApiResponse(ref(SearchResponse)), **files},
        tags=["search"],
    )


def add_contract_components(result, generator, request, public):
    """Register the response models (and the models they use) as schema components."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for model in (*RESPONSE_MODELS, Error):
        schema = model.model_json_schema(ref_template=REF_TEMPLATE)
        for name, definition in {**schema.pop("$defs", {}), model.__name__: schema}.items():
            if schemas.setdefault(name, definition) != definition:
                raise ValueError(f"two schema components are called {name}; rename one")
    return result


def add_error_responses(result, generator, request, public):
    """Document the errors every endpoint can give, all in the shape of `Error`."""
    for path, operations in result.get("paths", {}).items():
        for method, spec in operations.items():
            errors = {}
            if any(p["in"] == "query" for p in spec.get("parameters", ())) or method in ("post", "put", "patch"):
                errors["400"] = "invalid parameters or body; the message names each one"
            if spec.get("security"):
                errors["401"] = "no token or session, or an invalid token"
                if method != "get":
                    errors["403"] = "the user lacks the permission this write needs"
            if "{key}" in path:
                errors["404"] = "no record with that key"
            if "{run}" in path:
                errors["404"] = "no run of that id of a product you can see (runs are kept TRIAGE_KEEP_DAYS)"
            if method == "delete":
                errors["409"] = "other records still name this one"
            if method in ("post", "put", "patch"):
                errors["409"] = "another request wrote a record with the same key at the same time"
                errors["413"] = "the body is over the limit (DATA_UPLOAD_MAX_MEMORY_SIZE; import: IMPORT_MAX_BYTES)"
            errors["414"] = "the URL is over REQUEST_LINE_MAX_BYTES"
            searches = ("/api/search", "/api/similar", "/api/records", "/api/timeline")
            if (method == "get" and path.startswith(searches)) or path == "/api/bugs/check-duplicates":
                errors["429"] = "more searches than SEARCH_RATE_LIMIT for this user; see Retry-After"
            if path == "/api/import":
                errors["429"] = "more records (one search each) than SEARCH_RATE_LIMIT leaves; see Retry-After"
            # Any request may find the database away; a search may ask for mode=semantic
            # when no model can run. Both say when to ask again (Retry-After).
            errors["503"] = "the database is unavailable, or mode=semantic cannot run; see Retry-After"
            for status, description in errors.items():
                spec["responses"].setdefault(
                    status, {"description": description, "content": {"application/json": {"schema": ref(Error)}}}
                )
    return result
