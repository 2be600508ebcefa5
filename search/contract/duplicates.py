"""check_duplicates: a draft bug in, the bugs it likely duplicates out."""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from backlog.text import NulFreeStr, no_nul
from search.contract.search import ScoreDetail, trimmed_query
from search.contract.types import (
    DUPLICATES_DEFAULT,
    DUPLICATES_MAX,
    QUERY_MAX,
    QUERY_MIN,
    Detail,
    KeyFilter,
    Kind,
    Mode,
    omitted_when_null,
)

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
    steps: DraftText | None = None  # one step a line
    actual_result: DraftText | None = None
    expected_result: DraftText | None = None
    environment: DraftText | None = None
    product: KeyFilter | None = Field(None, description="only bugs of this product key")
    feature: KeyFilter | None = None  # only bugs of this feature key
    draft_feature: KeyFilter | None = Field(
        None, description="the feature the draft is about: bugs of other features stay candidates, never high"
    )
    mode: Mode = "hybrid"
    limit: int = Field(
        DUPLICATES_DEFAULT, ge=1, le=DUPLICATES_MAX, description=f"candidates to return, 1-{DUPLICATES_MAX}"
    )
    include_scores: bool = Field(False, description="add each arm's rank and score")
    detail: Detail = "concise"  # full: + id, kind, feature, severity, created_at, rank

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
    """A likely duplicate. Concise (the default): what deciding needs, about 70 tokens;
    detail=full adds what is left out as null here (the list's order is its rank)."""

    kind: Kind | None = Field(None, exclude_if=omitted_when_null)
    key: str
    id: int | None = Field(
        None, description="the bug's id (what a form's duplicate_of field takes)", exclude_if=omitted_when_null
    )
    title: str
    product: str | None = Field(description="product key")
    feature: str | None = Field(None, exclude_if=omitted_when_null)
    status: str | None = None
    severity: str | None = Field(None, exclude_if=omitted_when_null)
    created_at: datetime | None = Field(None, exclude_if=omitted_when_null)
    duplicate_of: str | None = Field(
        None,
        description="set when this bug is itself linked as a duplicate: link the draft to that one",
        exclude_if=omitted_when_null,
    )
    rank: int | None = Field(None, exclude_if=omitted_when_null)
    confidence: float = Field(description="0-1: how likely the draft duplicates this bug (see band)")
    band: Band = Field(description="high, medium or low, from confidence (docs/duplicates.md: how measured)")
    why: DuplicateWhy
    scores: ScoreDetail | None = Field(None, exclude_if=omitted_when_null)


class DuplicateCheckResponse(BaseModel):
    mode: Mode = Field(description="the mode actually used (hybrid falls back to keyword without embeddings)")
    results: list[DuplicateCandidate] = Field(description="likeliest first")
    degraded: dict[str, str] | None = Field(None, exclude_if=omitted_when_null)
