"""A search: its request, and the response `search` and `similar` give."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from backlog.text import NulFreeStr, UtcDateTime
from search.contract.types import (
    DETAIL_HELP,
    FACETS_HELP,
    INDEX_HELP,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    MAX_TOKENS_HELP,
    QUERY_MAX,
    QUERY_MIN,
    TRACE_MAX,
    Detail,
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
from search.query import traces


def trimmed_query(value: str) -> str:
    """A search's query, or a draft's title: QUERY_MIN-QUERY_MAX characters once trimmed."""
    value = value.strip()
    if not QUERY_MIN <= len(value) <= QUERY_MAX:
        raise ValueError(f"must be {QUERY_MIN} to {QUERY_MAX} characters after trimming spaces; got {len(value)}")
    return value


def search_query(value: str) -> str:
    """A search's query: as trimmed_query, or up to TRACE_MAX characters when
    it is a pasted stack trace (read as words, not syntax: search.query.traces)."""
    value = value.strip()
    if len(value) <= QUERY_MAX:
        return trimmed_query(value)
    if len(value) > TRACE_MAX or not traces.read(value):
        raise ValueError(
            f"must be {QUERY_MIN} to {QUERY_MAX} characters after trimming spaces, or up to {TRACE_MAX:,} for a "
            f"pasted stack trace; got {len(value):,}"
        )
    return value


class SearchRequest(BaseModel):
    """One search. The same names on every surface (REST query string, MCP
    tool arguments, the staff UI's URL)."""

    model_config = ConfigDict(extra="forbid")

    query: Annotated[
        NulFreeStr,
        Field(
            description='words, "phrase", -word, a key, a stack trace, fields (kind:bug status:open severity:high '
            "product:KEY feature:KEY created:>2025-01-31 updated:<7d)"
        ),
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
    correct: bool = Field(
        True,
        description="true (default): a misspelt word no record holds is corrected (corrected_query); "
        "false: the words as typed, as 'search instead for' asks",
    )
    limit: int = Field(LIMIT_DEFAULT, ge=1, le=LIMIT_MAX, description=f"results per page, 1-{LIMIT_MAX}")
    cursor: NulFreeStr | None = Field(None, description="next_cursor of the previous page")
    include_scores: bool = Field(False, description="add each arm's rank and score and the boosts")
    include_content: bool = Field(False, description="add the full text fields of each result")
    detail: Detail = Field("concise", description=DETAIL_HELP)
    include_facets: bool | None = Field(None, description=FACETS_HELP)
    include_index: bool | None = Field(None, description=INDEX_HELP)
    max_tokens: int | None = Field(None, ge=1, description=MAX_TOKENS_HELP)

    _query_length = field_validator("query")(search_query)

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
    id: int | None = Field(None, description="the record's id within its kind (full)", exclude_if=omitted_when_null)
    product: str | None = Field(description="product key")
    title: str
    status: str | None = Field(None, exclude_if=omitted_when_null)
    severity: str | None = Field(None, exclude_if=omitted_when_null)
    why: str = Field(
        description="why it is here, in a line: the fields and words it matched ('title: renewal; text: ios'), "
        "'key' (the query is its key), or 'meaning' (close in meaning, no word of the query)"
    )
    created_at: datetime | None = Field(None, description="(full)", exclude_if=omitted_when_null)
    updated_at: datetime | None = Field(None, description="(full)", exclude_if=omitted_when_null)
    snippet: Snippet | None = Field(None, description="(full)", exclude_if=omitted_when_null)
    score: float | None = Field(None, description="(full)", exclude_if=omitted_when_null)
    rank: int | None = Field(
        None, description="1-based position in the whole result list (full)", exclude_if=omitted_when_null
    )
    scores: ScoreDetail | None = Field(None, exclude_if=omitted_when_null)
    content: dict[str, str | list[str] | None] | None = Field(None, exclude_if=omitted_when_null)


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
    exclude: bool = Field(False, description="-field:value: records with these values are left out", exclude_if=falsy)


class Relaxed(BaseModel):
    """How the keyword arm widened a query whose words, all together, few records hold."""

    how: Literal["any_word", "similar_titles"] = Field(
        description="any_word: records with any of the words, those with the rarer words first; "
        "similar_titles: records whose titles read closest to the query"
    )
    matched_all: int = Field(description="records that hold every word, fewer than were wanted")
    words: list[str] | None = Field(
        None,
        description="the query's words; a hit may hold only some, or none (similar_titles) (full)",
        exclude_if=omitted_when_null,
    )


class SearchResponse(BaseModel):
    query: str
    mode: Mode = Field(description="the mode actually used (hybrid falls back to keyword without embeddings)")
    match_mode: MatchMode
    corrected_query: str | None = Field(
        None,
        description="set when typo tolerance rewrote the query; correct=false searches it as typed",
        exclude_if=omitted_when_null,
    )
    total: int = Field(description="records matching the query and filters")
    total_exact: bool = Field(description="false when total and facets are estimates (very broad queries)")
    facets: Facets | None = Field(
        None, description="with include_facets (default: with detail=full)", exclude_if=omitted_when_null
    )
    results: list[Hit]
    next_cursor: str | None = Field(None, description="continues right after the last hit of `results`")
    index: IndexHealth | None = Field(
        None, description="with include_index (default: with detail=full)", exclude_if=omitted_when_null
    )
    filters: list[QueryFilter] | None = Field(
        None,
        description="the fields read from a simple query, on top of the filter parameters; left out when none",
        exclude_if=omitted_when_null,
    )
    degraded: dict[str, str] | None = Field(
        None,
        description="set when part of the search could not run, by part (semantic): why; the results are "
        "what the rest found (hybrid answers by keyword alone, and `mode` says keyword)",
        exclude_if=omitted_when_null,
    )
    relaxed: Relaxed | None = Field(
        None,
        description="set when few records hold every word and the keyword arm took records holding some",
        exclude_if=omitted_when_null,
    )
    trace: str | None = Field(
        None,
        description="set when the query was read as a pasted stack trace: the words searched (its exception, "
        "message and top frames; docs/search-syntax.md)",
        exclude_if=omitted_when_null,
    )
    omitted: int | None = Field(
        None,
        description="with max_tokens: hits of this page (of `limit`) left out to keep within it; "
        "next_cursor goes on from the last hit given",
        exclude_if=omitted_when_null,
    )
