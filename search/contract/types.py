"""The contract's vocabulary: kinds, modes, limits and the field types requests share."""

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from backlog.models import BugStatus, Severity, TestStatus
from backlog.text import no_nul
from search.models import Kind as DocumentKind

# The record vocabularies are the models' own choices, as Literals for the schemas.
Kind = Literal[tuple(DocumentKind.values)]
Mode = Literal["hybrid", "keyword", "semantic"]
MatchMode = Literal["simple", "raw"]
Sort = Literal["relevant", "recent"]
Detail = Literal["concise", "full"]
SeverityName = Literal[tuple(Severity.values)]
StatusName = Literal[tuple(BugStatus.values + TestStatus.values)]

QUERY_MIN = 2
QUERY_MAX = 500
TRACE_MAX = 20_000  # a query read as a pasted stack trace (search.query.traces) may be this long
LIMIT_DEFAULT = 20
LIMIT_MAX = 100
KEYS_MAX = 50
TIMELINE_DEFAULT = 10
TIMELINE_MAX = 50
RELATED_MAX = 20
DUPLICATES_DEFAULT = 5
DUPLICATES_MAX = 20
DETAIL_HELP = "concise (default): kind, key, title, status, why; full: + dates, score, snippet, facets, index"
FACETS_HELP = "add counts by kind, product, status and severity (default: with detail=full only)"
INDEX_HELP = "add the index's health: records, vectors, embedding worker (default: with detail=full only)"
MAX_TOKENS_HELP = "most tokens (cl100k_base) of the answer: whole items; omitted says what was left out"

# No string parameter may hold NUL: PostgreSQL cannot take it, even in a query.
# The NUL check comes after the length limits so that theirs stay pydantic's own messages.
Key = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(no_nul)]
KeyFilter = Annotated[str, Field(max_length=64), AfterValidator(no_nul)]


def omitted_when_null(value) -> bool:
    return value is None


def falsy(value) -> bool:
    return not value
