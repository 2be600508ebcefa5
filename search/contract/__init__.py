"""The search contract: what every surface sends in and gets back.

Declared once, as pydantic models. REST serializes `SearchResponse` as it
is, the MCP tools take `SearchRequest` fields as their input schema and
return `SearchResponse` as structured content, and the staff UI renders it.
`json_schema()` exports both for anyone else.
"""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from backlog.models import BugStatus, Severity, TestStatus
from backlog.text import NulFreeStr, UtcDateTime, no_nul
from search.models import Kind as DocumentKind

# The record vocabularies are the models' own choices, as Literals for the schemas.
Kind = Literal[tuple(DocumentKind.values)]
Mode = Literal["hybrid", "keyword", "semantic"]
MatchMode = Literal["simple", "raw"]
Sort = Literal["relevant", "recent"]
Detail = Literal["concise", "full"]
SeverityName = Literal[tuple(Severity.values)]
StatusName = Literal[tuple(BugStatus.values + TestStatus.values)]

QUERY_MIN, QUERY_MAX = 2, 500
LIMIT_DEFAULT, LIMIT_MAX = 20, 100
KEYS_MAX = 50
TIMELINE_DEFAULT, TIMELINE_MAX = 10, 50
RELATED_MAX = 20
DETAIL_HELP = "concise (default): kind, key, title, status, why; full: + dates, score, snippet, facets, index"
FACETS_HELP = "add counts by kind, product, status and severity (default: with detail=full only)"
INDEX_HELP = "add the index's health: records, vectors, embedding worker (default: with detail=full only)"
MAX_TOKENS_HELP = "most tokens (cl100k_base) of the answer's JSON: whole hits; `omitted` counts the rest"

# No string parameter may hold NUL: PostgreSQL cannot take it, even in a query.
# The NUL check comes after the length limits so that theirs stay pydantic's own messages.
Key = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(no_nul)]
KeyFilter = Annotated[str, Field(max_length=64), AfterValidator(no_nul)]


def _omitted_when_null(value) -> bool:
    return value is None


def _not(value) -> bool:
    return not value


def error_body(code: str, message: str, **extra) -> dict:
    """The one error shape of every surface: `{"error": {"code", "message", ...}}`."""
    return {"error": {"code": code, "message": message, **extra}}


class SearchError(ValueError):
    """The caller can fix it: the message says what was wrong and what to send.

    Every surface shows `str(error)` as it is: REST as `{"error": {...}}`
    with `status` as the HTTP status, MCP as a tool error's text.
    """

    status = 400
    code = "invalid_request"
    retry_after: int | None = None  # seconds, for an error that passes by itself

    def body(self) -> dict:
        return error_body(self.code, str(self))

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after else {}


class NotFound(SearchError):
    status = 404
    code = "not_found"

    @classmethod
    def no_record(cls, key: str) -> "NotFound":
        return cls(f"no record with key {key!r}; check the key (like BUG-12) or search for it first.")


class DatabaseUnavailable(SearchError):
    """The database cannot be reached: stopped, restarting or recovering from
    a crash (backlog.db.database_unavailable tells). Nothing was changed; the
    same request can be sent again after `retry_after` seconds."""

    status = 503
    code = "database_unavailable"
    retry_after = 2

    def __init__(self):
        super().__init__(
            "The database is not reachable right now (it is stopped, restarting or recovering); "
            f"nothing was changed. Send the same request again in {self.retry_after} seconds."
        )


class SemanticUnavailable(SearchError):
    """mode=semantic when no vector can be compared: none computed yet, or
    no embedding model can run. Not the caller's fault, and it passes once
    the index or the configuration is mended."""

    status = 503
    code = "semantic_unavailable"
    retry_after = 30


def trimmed_query(value: str) -> str:
    """A search's query, or a draft's title: QUERY_MIN-QUERY_MAX characters once trimmed."""
    value = value.strip()
    if not QUERY_MIN <= len(value) <= QUERY_MAX:
        raise ValueError(f"must be {QUERY_MIN} to {QUERY_MAX} characters after trimming spaces; got {len(value)}")
    return value


class SearchRequest(BaseModel):
    """One search. The same names on every surface (REST query string, MCP
    tool arguments, the staff UI's URL)."""

    model_config = ConfigDict(extra="forbid")

    query: Annotated[
        NulFreeStr,
        Field(description=f"{QUERY_MIN}-{QUERY_MAX} characters; a record's key (BUG-12) finds it first"),
    ]
    mode: Mode = Field("hybrid", description="hybrid (default): words and meaning; keyword: words; semantic: meaning")
    match_mode: MatchMode = Field(
        "simple",
        description='simple (default): "phrase", or, -word, fields (kind:bug status:open severity:high product:KEY '
        "created:>2025-01-31 updated:<7d); raw: tsquery (renew & !ios)",
    )
    entities: list[Kind] | None = Field(None, description="only these kinds of record")
    products: list[KeyFilter] | None = Field(None, description="only records of these product keys")
    status: list[StatusName] | None = Field(None, description="only these statuses (bugs and tests)")
    severity: list[SeverityName] | None = Field(None, description="only bugs of these severities")
    feature: KeyFilter | None = Field(None, description="only records of this feature key")
    created_after: UtcDateTime | None = None
    created_before: UtcDateTime | None = None
    updated_after: UtcDateTime | None = None
    updated_before: UtcDateTime | None = None
    sort: Sort = Field("relevant", description="relevant (default) or recent (newest first)")
    limit: int = Field(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX, description=f"results per page, 1-{LIMIT_MAX}")
    cursor: NulFreeStr | None = Field(None, description="next_cursor of the previous page")
    include_scores: bool = Field(False, description="add each arm's rank and score and the boosts")
    include_content: bool = Field(False, description="add the full text fields of each result")
    detail: Detail = Field("concise", description=DETAIL_HELP)
    include_facets: bool | None = Field(None, description=FACETS_HELP)
    include_index: bool | None = Field(None, description=INDEX_HELP)
    max_tokens: int | None = Field(None, ge=1, description=MAX_TOKENS_HELP)

    _query_length = field_validator("query")(trimmed_query)

    @model_validator(mode="after")
    def _ranges(self):
        for name in ("created", "updated"):
            after, before = getattr(self, f"{name}_after"), getattr(self, f"{name}_before")
            if after and before and after > before:
                raise ValueError(f"{name}_after must not be later than {name}_before")
        return self


class Highlight(BaseModel):
    start: int = Field(description="offset of the first highlighted character in snippet.text")
    end: int = Field(description="offset just past the last highlighted character")


class Snippet(BaseModel):
    text: str = Field(description="plain text, about 160 characters around the best match")
    field: str = Field(description="the field the text comes from (title, description, actual_result, ...)")
    highlights: list[Highlight]
    matched_fields: list[str] = Field(description="every field in which the query matched")


class ScoreDetail(BaseModel):
    keyword_rank: int | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = Field(None, description="cosine similarity")
    feedback_rank: int | None = Field(
        None, description="hybrid: rank in the semantic arm's second pass, from the query moved toward the best record"
    )
    feedback_score: float | None = Field(None, description="cosine similarity in that second pass")
    boosts: dict[str, float] = Field(default_factory=dict)


class Hit(BaseModel):
    """One result. Fields that `detail`, `include_scores` or `include_content`
    leave empty, and a status or severity the record does not have, are left
    out of the JSON, not sent as null: a concise hit is what an agent needs
    to choose what to `get` (kind, key, product, title, status, severity,
    why), about 50 tokens (docs/benchmarks.md)."""

    kind: Kind
    key: str
    id: int | None = Field(None, description="the record's id within its kind (full)", exclude_if=_omitted_when_null)
    product: str | None = Field(description="product key")
    title: str
    status: str | None = Field(None, exclude_if=_omitted_when_null)
    severity: str | None = Field(None, exclude_if=_omitted_when_null)
    why: str = Field(
        description="why it is here, in a line: the fields and words it matched ('title: renewal; text: ios'), "
        "'key' (the query is its key), or 'meaning' (close in meaning, no word of the query)"
    )
    created_at: datetime | None = Field(None, description="(full)", exclude_if=_omitted_when_null)
    updated_at: datetime | None = Field(None, description="(full)", exclude_if=_omitted_when_null)
    snippet: Snippet | None = Field(None, description="(full)", exclude_if=_omitted_when_null)
    score: float | None = Field(None, description="(full)", exclude_if=_omitted_when_null)
    rank: int | None = Field(
        None, description="1-based position in the whole result list (full)", exclude_if=_omitted_when_null
    )
    scores: ScoreDetail | None = Field(None, exclude_if=_omitted_when_null)
    content: dict[str, str | list[str] | None] | None = Field(None, exclude_if=_omitted_when_null)


class FacetCount(BaseModel):
    value: str
    count: int


class Facets(BaseModel):
    kind: list[FacetCount]
    product: list[FacetCount]
    status: list[FacetCount]
    severity: list[FacetCount]


class WorkerHealth(BaseModel):
    """The embedding worker, as the supervisor in `serve` last recorded it."""

    state: Literal["running", "restarting", "stopped", "unknown"] = Field(
        description="restarting: it died and is started again after a back-off; "
        "unknown: no word from its supervisor for 30 s"
    )
    restarts: int = Field(description="times it was started again since the server started")
    last_error: str | None = Field(None, description="how it last died: exit status and the end of its stderr")
    last_error_at: datetime | None = None
    heartbeat_at: datetime
    backlog: int = Field(description="documents still waiting for a current vector")


class IndexHealth(BaseModel):
    documents: int
    embedded: int = Field(description="documents whose vector is current for the active model")
    coverage: float = Field(description="embedded / documents, 0-1")
    model: str | None = Field(description="the active embedding model; null when none can run (see the log)")
    worker: WorkerHealth | None = Field(None, description="the embedding worker; null when none is supervised")


class QueryFilter(BaseModel):
    """A field of a `simple` query (severity:critical) read as a filter (docs/search-syntax.md)."""

    token: str = Field(description="the field as typed; the query without it drops the filter")
    param: str = Field(
        description="the parameter it narrows: entities, products, status, severity, feature, created_after, "
        "created_before, updated_after or updated_before"
    )
    values: list[str] = Field(description="any of these (keys for products and features; UTC times for dates)")
    exclude: bool = Field(False, description="-field:value: records with these values are left out", exclude_if=_not)


class SearchResponse(BaseModel):
    query: str
    mode: Mode = Field(description="the mode actually used (hybrid falls back to keyword without embeddings)")
    match_mode: MatchMode
    corrected_query: str | None = Field(
        None, description="set when typo tolerance rewrote the query", exclude_if=_omitted_when_null
    )
    total: int = Field(description="records matching the query and filters")
    total_exact: bool = Field(description="false when total and facets are estimates (very broad queries)")
    facets: Facets | None = Field(
        None, description="with include_facets (default: with detail=full)", exclude_if=_omitted_when_null
    )
    results: list[Hit]
    next_cursor: str | None = Field(None, description="continues right after the last hit of `results`")
    index: IndexHealth | None = Field(
        None, description="with include_index (default: with detail=full)", exclude_if=_omitted_when_null
    )
    filters: list[QueryFilter] | None = Field(
        None,
        description="the fields read from a simple query, on top of the filter parameters; left out when none",
        exclude_if=_omitted_when_null,
    )
    degraded: dict[str, str] | None = Field(
        None,
        description="set when part of the search could not run, by part (semantic): why; the results are "
        "what the rest found (hybrid answers by keyword alone, and `mode` says keyword)",
        exclude_if=_omitted_when_null,
    )
    omitted: int | None = Field(
        None,
        description="with max_tokens: hits of this page (of `limit`) left out to keep within it; "
        "next_cursor goes on from the last hit given",
        exclude_if=_omitted_when_null,
    )


# -- similar, get, timeline ----------------------------------------------------------------


class SimilarRequest(BaseModel):
    """Records nearest to one record (never the record itself)."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[Key, Field(description="the record's key, like BUG-12")]
    mode: Mode = Field("hybrid", description="hybrid (default), keyword or semantic")
    entities: list[Kind] | None = Field(None, description="only these kinds of record")
    limit: int = Field(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX, description=f"results per page, 1-{LIMIT_MAX}")
    cursor: NulFreeStr | None = Field(None, description="next_cursor of the previous page")
    include_scores: bool = Field(False, description="add each arm's rank and score")
    include_content: bool = Field(False, description="add the full text fields of each result")
    detail: Detail = Field("concise", description=DETAIL_HELP)
    include_facets: bool | None = Field(None, description=FACETS_HELP)
    include_index: bool | None = Field(None, description=INDEX_HELP)
    max_tokens: int | None = Field(None, ge=1, description=MAX_TOKENS_HELP)


class GetRequest(BaseModel):
    """Whole records by key (with max_tokens, as many whole records as fit: search.contract.budget)."""

    model_config = ConfigDict(extra="forbid")

    keys: list[Key] = Field(min_length=1, max_length=KEYS_MAX, description="record keys, like BUG-12")
    include_content: bool = Field(True, description="add the full text fields (and a bug's raw_data)")
    include_related: bool = Field(True, description="add related records (product, feature, tests, bugs)")
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="the most tokens (cl100k_base) the answer's JSON may take: whole records in the order asked, "
        "`omitted` lists the keys of the rest",
    )


class TimelineRequest(BaseModel):
    """Records created before and after one record, in its feature or product."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[Key, Field(description="the record's key, like BUG-12")]
    within: Literal["feature", "product"] = Field(
        "feature", description="feature (default; the product when the record has no feature) or product"
    )
    entities: list[Kind] | None = Field(None, description="only these kinds of record")
    before: int = Field(TIMELINE_DEFAULT, ge=0, le=TIMELINE_MAX, description=f"records before, 0-{TIMELINE_MAX}")
    after: int = Field(TIMELINE_DEFAULT, ge=0, le=TIMELINE_MAX, description=f"records after, 0-{TIMELINE_MAX}")


class RecordRef(BaseModel):
    """A record named by another answer. A status or severity it does not have is left out, as in a Hit."""

    kind: Kind
    key: str
    title: str
    status: str | None = Field(None, exclude_if=_omitted_when_null)
    severity: str | None = Field(None, exclude_if=_omitted_when_null)
    created_at: datetime
    updated_at: datetime


class Related(BaseModel):
    total: int = Field(description="how many there are; items holds the newest, at most " + str(RELATED_MAX))
    items: list[RecordRef]


class Record(RecordRef):
    """A whole record; what it does not have, or the request did not ask for, is left out."""

    id: int = Field(description="the record's id within its kind")
    product: str | None = Field(description="product key")
    feature: str | None = Field(None, description="feature key", exclude_if=_omitted_when_null)
    content: dict[str, str | list[str] | None] | None = Field(
        None, description="the full text fields", exclude_if=_omitted_when_null
    )
    raw_data: dict | None = Field(None, description="a bug's raw_data, as imported", exclude_if=_omitted_when_null)
    related: dict[str, Related] | None = Field(
        None,
        description="bug: product, feature, test, duplicate_of, duplicates; test: product, feature, bugs; "
        "feature: product, tests, open_bugs, bugs; product: features, tests, open_bugs",
        exclude_if=_omitted_when_null,
    )


class GetResponse(BaseModel):
    records: list[Record] = Field(description="in the order the keys were asked for")
    missing: list[str] = Field(description="keys with no record (or none you may see)")
    omitted: list[str] | None = Field(
        None,
        description="with max_tokens: keys of records left out, whole, to keep within it; ask for them again",
        exclude_if=_omitted_when_null,
    )


class TimelineResponse(BaseModel):
    record: RecordRef
    within: Literal["feature", "product"] = Field(description="the scope actually used")
    scope_key: str = Field(description="key of that feature or product")
    before: list[RecordRef] = Field(description="created earlier, nearest first")
    after: list[RecordRef] = Field(description="created later, nearest first")


# -- check_duplicates ---------------------------------------------------------------------

DUPLICATES_DEFAULT, DUPLICATES_MAX = 5, 20
DRAFT_TEXT_MAX = 200_000  # characters a draft field, as an imported text field


def _draft_length(value: str) -> str:
    # A check, not a schema bound: the MCP tool list would carry the number five times.
    if len(value) > DRAFT_TEXT_MAX:
        raise ValueError(f"must be at most {DRAFT_TEXT_MAX:,} characters; got {len(value):,}")
    return value


DraftText = Annotated[str, AfterValidator(_draft_length), AfterValidator(no_nul)]
Band = Literal["high", "medium", "low"]


class DuplicateCheckRequest(BaseModel):
    """A bug not yet filed: the bugs it most likely duplicates, among those
    you may see. Nothing is written; the draft's text is read and forgotten."""

    model_config = ConfigDict(extra="forbid")

    title: Annotated[NulFreeStr, Field(description=f"the draft's title, {QUERY_MIN}-{QUERY_MAX} characters")]
    description: DraftText | None = None
    steps: DraftText | None = Field(None, description="one step a line")
    actual_result: DraftText | None = None
    expected_result: DraftText | None = None
    environment: DraftText | None = None
    product: KeyFilter | None = Field(None, description="only bugs of this product key")
    feature: KeyFilter | None = Field(None, description="only bugs of this feature key")
    mode: Mode = "hybrid"
    limit: int = Field(
        DUPLICATES_DEFAULT, ge=1, le=DUPLICATES_MAX, description=f"candidates to return, 1-{DUPLICATES_MAX}"
    )
    include_scores: bool = Field(False, description="add each arm's rank and score")

    _title_length = field_validator("title")(trimmed_query)

    def body(self) -> str:
        """The draft's text after its title, as a stored bug's body is made
        (search.indexing.sql.KINDS["bug"]): description, actual, expected, steps, environment."""
        parts = (self.description, self.actual_result, self.expected_result, self.steps, self.environment)
        return "\n".join(part.strip() for part in parts if part and part.strip())


class DuplicateWhy(BaseModel):
    shared_words: list[str] = Field(description="the draft's words this bug also has, the most telling first")
    semantic_similarity: float | None = Field(
        None, description="cosine similarity of the draft's and the bug's text, 0-1; null without embeddings"
    )
    same_title: bool = Field(False, description="the titles are the same words", exclude_if=lambda v: not v)


class DuplicateCandidate(BaseModel):
    kind: Kind
    key: str
    id: int = Field(description="the bug's id (what a form's duplicate_of field takes)")
    title: str
    product: str | None = Field(description="product key")
    feature: str | None = Field(None, exclude_if=_omitted_when_null)
    status: str | None = None
    severity: str | None = None
    created_at: datetime
    duplicate_of: str | None = Field(
        None,
        description="set when this bug is itself linked as a duplicate: link the draft to that one",
        exclude_if=_omitted_when_null,
    )
    rank: int
    confidence: float = Field(description="0-1: how likely the draft duplicates this bug (see band)")
    band: Band = Field(description="high, medium or low, from confidence (docs/duplicates.md: how measured)")
    why: DuplicateWhy
    scores: ScoreDetail | None = Field(None, exclude_if=_omitted_when_null)


class DuplicateCheckResponse(BaseModel):
    mode: Mode = Field(description="the mode actually used (hybrid falls back to keyword without embeddings)")
    results: list[DuplicateCandidate] = Field(description="likeliest first")
    degraded: dict[str, str] | None = Field(None, exclude_if=_omitted_when_null)


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
