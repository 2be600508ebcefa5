"""similar, get and timeline: requests, and the records they answer with."""

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from backlog.text import NulFreeStr
from search.contract.types import (
    DETAIL_HELP,
    FACETS_HELP,
    INDEX_HELP,
    KEYS_MAX,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    MAX_TOKENS_HELP,
    RELATED_MAX,
    TIMELINE_DEFAULT,
    TIMELINE_MAX,
    Detail,
    Key,
    Kind,
    Mode,
    omitted_when_null,
)

TEXT_CUT = 100  # characters of each text field in a concise record
LINKS_MAX = 10  # keys of each relation in a concise record
# What a concise record holds of each kind's text: what says what happens (docs/mcp.md).
# A bug's description only when it has none of the four (a tracker that keeps one text).
BRIEF_TEXT = {
    "bug": ("actual_result", "expected_result", "steps", "environment"),
    "test": ("description", "steps"),
    "feature": ("description", "acceptance_criteria"),
    "product": ("description",),
}
TEXT_FIELDS = ("description", "acceptance_criteria", "steps", "actual_result", "expected_result", "environment")
RECORD_PARTS = (*TEXT_FIELDS, "content", "raw_data", "related", "id")
RecordPart = Literal[RECORD_PARTS]


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
    """Records by key (with max_tokens, as many whole records as fit).

    `detail=full` (REST's default) is the whole record: every text field, a bug's
    raw_data, related records expanded. `concise` (the MCP tool's default) is what a
    decision needs: the record's fields, its links as keys and the texts that say what
    happens, each cut to TEXT_CUT characters; `cut` says what was cut. `fields` adds
    parts whole to a concise record (and makes it concise when detail is not given)."""

    model_config = ConfigDict(extra="forbid")

    keys: list[Key] = Field(min_length=1, max_length=KEYS_MAX, description="record keys, like BUG-12")
    detail: Detail | None = Field(
        None, description="concise: fields, links, texts cut (cut says which); full (REST's default): all, whole"
    )
    fields: list[RecordPart] | None = Field(None, max_length=len(RECORD_PARTS), description="add these whole")
    include_content: bool = Field(True, description="add the text fields (and a bug's raw_data)")
    include_related: bool = Field(True, description="add related records (product, feature, tests, bugs)")
    max_tokens: int | None = Field(None, ge=1, description=MAX_TOKENS_HELP)


class TimelineRequest(BaseModel):
    """Records created before and after one record, in its feature or product."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[Key, Field(description="the record's key, like BUG-12")]
    # A record without a feature is read within its product.
    within: Literal["feature", "product"] = "feature"
    entities: list[Kind] | None = Field(None, description="only these kinds of record")
    before: int = Field(TIMELINE_DEFAULT, ge=0, le=TIMELINE_MAX, description=f"records before, 0-{TIMELINE_MAX}")
    after: int = Field(TIMELINE_DEFAULT, ge=0, le=TIMELINE_MAX, description=f"records after, 0-{TIMELINE_MAX}")


class RecordRef(BaseModel):
    """A record named by another answer. A status or severity it does not have is left out, as in a Hit."""

    kind: Kind
    key: str
    title: str
    status: str | None = Field(None, exclude_if=omitted_when_null)
    severity: str | None = Field(None, exclude_if=omitted_when_null)
    created_at: datetime
    updated_at: datetime


class Related(BaseModel):
    total: int = Field(description="how many there are; items holds the newest, at most " + str(RELATED_MAX))
    items: list[RecordRef]


class Record(RecordRef):
    """A record, whole or concise (GetRequest.detail); what it does not have, or the
    request did not ask for, is left out."""

    # A concise record's dates are days (UTC): enough to decide, half the tokens.
    created_at: datetime | date
    updated_at: datetime | date
    id: int | None = Field(None, description="the record's id within its kind", exclude_if=omitted_when_null)
    product: str | None = Field(description="product key")
    feature: str | None = Field(None, description="feature key", exclude_if=omitted_when_null)
    links: dict[str, str | list[str]] | None = Field(
        None,
        description="concise: related records' keys by relation (newest first, at most "
        f"{LINKS_MAX}), those it has; product and feature are the fields above",
        exclude_if=omitted_when_null,
    )
    content: dict[str, str | list[str] | None] | None = Field(
        None,
        description=f"the text fields: whole, or in a concise record each cut to {TEXT_CUT} characters",
        exclude_if=omitted_when_null,
    )
    cut: dict[str, int] | None = Field(
        None,
        description="concise: what was cut short and its whole size (characters of a text field, records of a "
        "relation); ask for it with fields=[name] (a relation's records: related)",
        exclude_if=omitted_when_null,
    )
    raw_data: dict | None = Field(None, description="a bug's raw_data, as imported", exclude_if=omitted_when_null)
    related: dict[str, Related] | None = Field(
        None,
        description="bug: product, feature, test, duplicate_of, duplicates; test: product, feature, bugs; "
        "feature: product, tests, open_bugs, bugs; product: features, tests, open_bugs",
        exclude_if=omitted_when_null,
    )


class GetResponse(BaseModel):
    records: list[Record] = Field(description="in the order the keys were asked for")
    missing: list[str] = Field(description="keys with no record (or none you may see)")
    omitted: list[str] | None = Field(
        None,
        description="with max_tokens: keys of records left out, whole, to keep within it; ask for them again",
        exclude_if=omitted_when_null,
    )


class TimelineResponse(BaseModel):
    record: RecordRef
    within: Literal["feature", "product"] = Field(description="the scope actually used")
    scope_key: str = Field(description="key of that feature or product")
    before: list[RecordRef] = Field(description="created earlier, nearest first")
    after: list[RecordRef] = Field(description="created later, nearest first")
