"""The search contract: what every surface sends in and gets back.

Declared once, as pydantic models. REST serializes `SearchResponse` as it
is, the MCP tools take `SearchRequest` fields as their input schema and
return `SearchResponse` as structured content, and the staff UI renders it.
`json_schema()` exports both for anyone else.

The names live in: types (vocabulary and limits), errors, search (a search's
request and response), records (similar, get, timeline) and duplicates
(check_duplicates). Import them from here.
"""

from search.contract.duplicates import (
    DRAFT_TEXT_MAX,
    Band,
    DraftText,
    DuplicateCandidate,
    DuplicateCheckRequest,
    DuplicateCheckResponse,
    DuplicateWhy,
)
from search.contract.errors import DatabaseUnavailable, NotFound, SearchError, SemanticUnavailable, error_body
from search.contract.records import (
    GetRequest,
    GetResponse,
    Record,
    RecordRef,
    Related,
    SimilarRequest,
    TimelineRequest,
    TimelineResponse,
)
from search.contract.search import (
    FacetCount,
    Facets,
    Highlight,
    Hit,
    IndexHealth,
    QueryFilter,
    ScoreDetail,
    SearchRequest,
    SearchResponse,
    Snippet,
    WorkerHealth,
    trimmed_query,
)
from search.contract.types import (
    DETAIL_HELP,
    DUPLICATES_DEFAULT,
    DUPLICATES_MAX,
    FACETS_HELP,
    INDEX_HELP,
    KEYS_MAX,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    MAX_TOKENS_HELP,
    QUERY_MAX,
    QUERY_MIN,
    RELATED_MAX,
    TIMELINE_DEFAULT,
    TIMELINE_MAX,
    Detail,
    Key,
    KeyFilter,
    Kind,
    MatchMode,
    Mode,
    SeverityName,
    Sort,
    StatusName,
    falsy,
    omitted_when_null,
)


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
