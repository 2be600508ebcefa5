"""What a write back takes and answers: declared once, for REST, MCP and (next) the UI.

`FileRequest` is a draft bug with the same field names `check_duplicates`
takes, so an agent sends the draft it checked; `DuplicateRequest` names a
duplicate and its original by their keys. `WriteResponse` is the write
as every surface shows it, built only by `WriteResponse.of`.
"""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from backlog.text import NulFreeStr
from search.contract import DraftText, KeyFilter, SearchError
from triage.contract import DecisionRequest

#: GitHub's own bound on a title (a longer one is its 422).
TITLE_MAX = 256
Label = Annotated[NulFreeStr, Field(min_length=1, max_length=50)]


class FileRequest(BaseModel):
    """A bug to file in the product's own tracker, after check_duplicates found nothing."""

    model_config = ConfigDict(extra="forbid")

    product: KeyFilter  # the key of the product whose tracker takes it
    title: Annotated[NulFreeStr, Field(min_length=1, max_length=TITLE_MAX)]
    description: DraftText | None = None
    steps: DraftText | None = None
    expected_result: DraftText | None = None
    actual_result: DraftText | None = None
    environment: DraftText | None = None
    severity: Literal["critical", "high", "medium", "low"] | None = None
    labels: list[Label] = Field(default_factory=list, max_length=20)
    idempotency_key: Annotated[str, Field(max_length=255)] | None = None  # again: the same write, no second issue

    def draft(self) -> dict:
        """What the outbox row keeps: the draft without the caller's key."""
        return self.model_dump(exclude={"idempotency_key", "product"}, exclude_none=True)


class DuplicateRequest(BaseModel):
    """Mark bug `key` a duplicate of `of` in the tracker both come from (GitHub: closed as a duplicate)."""

    model_config = ConfigDict(extra="forbid")

    key: KeyFilter  # the duplicate, like SEAMONKEY-14
    of: KeyFilter  # the original it repeats, like SEAMONKEY-12
    idempotency_key: Annotated[str, Field(max_length=255)] | None = None  # again: the same write, no second comment


class WriteResponse(BaseModel):
    """A write to a tracker: pending (being sent), sent (upstream_key, upstream_url,
    record_key: searchable here; note: what it did beyond what was asked), failed
    (error: upstream's own words) or dropped."""

    id: int
    operation: Literal["file", "duplicate", "comment"]
    status: Literal["pending", "sent", "failed", "dropped"]
    source: str
    product: str
    upstream_key: str | None = None
    upstream_url: str | None = None
    record_key: str | None = None
    error: str | None = None
    note: str | None = None
    attempts: int
    created_at: datetime
    sent_at: datetime | None = None

    @classmethod
    def of(cls, write) -> "WriteResponse":
        """The contract of an UpstreamWrite (writeback.models)."""
        return cls(
            id=write.pk,
            operation=write.operation,
            status=write.status,
            source=write.source.name,
            product=write.product.key,
            upstream_key=write.upstream_key or None,
            upstream_url=write.upstream_url or None,
            record_key=write.record_key or None,
            error=write.error or None,
            note=write.note or None,
            attempts=write.attempts,
            created_at=write.created_at,
            sent_at=write.sent_at,
        )


class WriteBackOff(SearchError):
    """The product's source does not write back: an admin has to turn it on."""

    status = 409
    code = "write_back_off"


class CannotFile(SearchError):
    """No tracker of the product's can take the write (none feeds it, or its kind files nothing yet)."""

    status = 409
    code = "not_supported"


class CannotMark(SearchError):
    """The two records cannot be marked upstream: not both synced, from different sources, or the same."""

    status = 409
    code = "not_supported"


class KeyReused(SearchError):
    status = 409
    code = "idempotency_key_reused"


class ReadOnly(SearchError):
    status = 403
    code = "forbidden"
    MESSAGE = (
        "this token is read-only: writing to a tracker takes a token with the scope 'read and write' "
        "(make one on the Tokens page, /tokens/)"
    )


class LinkRequest(DecisionRequest):
    """A curator's decision on one suggested bug of a stored run's cause (triage_run's
    `run` and a group's `signature`); confirmed, the bug's tracker gets one comment."""

    run: int = Field(ge=1)


class LinkResponse(BaseModel):
    """The decision, kept for the next runs, and the comment's write (None: none asked for)."""

    run: int
    signature: str
    bug: str
    decision: Literal["confirmed", "rejected"]
    write: WriteResponse | None = None
