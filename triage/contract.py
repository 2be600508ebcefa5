"""What a triage takes and answers: one shape for REST, MCP, the command and the UI.

Built in one place (triage.service), stored with the run (Run.answer) and
given back as it is by id. A group is one cause (triage.failures): its
verdict, its likeliest known bugs with a confidence band (the bands of
check_duplicates, docs/duplicates.md; what they mean here: docs/triage.md),
its failing tests and their history.
"""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from search.contract.duplicates import Band
from search.contract.types import KeyFilter, omitted_when_null

from .junit import COMMIT


def _empty(value) -> bool:
    return not value


class TriageRequest(BaseModel):
    """A JUnit report to triage (its text and product), or a stored run by id."""

    model_config = ConfigDict(extra="forbid")

    junit: str | None = None  # the report's XML
    product: KeyFilter | None = Field(None, description="key of the product run")
    run: int | None = Field(None, ge=1)  # a stored run's id, instead of junit
    commit: Annotated[str, Field(pattern=rf"^{COMMIT}$")] | None = None  # tested; else the report's property
    max_tokens: int | None = Field(None, ge=100)  # whole groups; `omitted` counts the rest

    @model_validator(mode="after")
    def _one_source(self):
        if (self.junit is None) == (self.run is None):
            raise ValueError("send either junit (the report's XML, with product) or run (a stored run's id)")
        if self.junit is not None and not self.product:
            raise ValueError("product: required with junit; send the key of the product the run tested")
        return self


class DecisionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    signature: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
    bug: KeyFilter
    decision: Literal["confirmed", "rejected"]


class Counts(BaseModel):
    tests: int
    passed: int
    failed: int = Field(description="failures and errors")
    skipped: int
    flaky: int = Field(description="passed on a rerun")


class MatchWhy(BaseModel):
    frames: list[int] = Field(description="[top frames the bug's text holds, top frames read]")
    words: list[str] = Field(description="the failure's exception and message words the bug holds")


class Suggestion(BaseModel):
    key: str
    title: str
    status: str
    severity: str | None = Field(None, exclude_if=omitted_when_null)
    confidence: float
    band: Band
    decision: Literal["confirmed", "rejected"] | None = Field(None, exclude_if=omitted_when_null)
    write: int | None = Field(
        None, description="the confirmation's comment upstream: GET /api/writes/<id>", exclude_if=omitted_when_null
    )
    why: MatchWhy


# A failing test's last runs (at most 10) that ran it, of the run's commit when named (triage.flaky).
class Recent(BaseModel):
    failed: int
    runs: int
    commit: str | None = Field(None, exclude_if=omitted_when_null)
    flipped: bool  # it passed on this commit too


class FailedTest(BaseModel):
    test: str = Field(description="classname.name as the runner reported it")
    outcome: Literal["failure", "error"]
    flaky: bool = Field(False, description="passed on a rerun", exclude_if=lambda v: not v)
    message: str = Field("", exclude_if=_empty)
    test_case: str | None = Field(None, description="the test case record of this name", exclude_if=omitted_when_null)
    case_bugs: list[str] = Field(default_factory=list, description="bugs linked to that test case", exclude_if=_empty)
    failing_runs: int = Field(description="runs in a row this test failed, this one included")
    recent: Recent | None = Field(None, exclude_if=omitted_when_null)


class Draft(BaseModel):
    """A new bug's draft from the failure: what the report-a-bug form and check_duplicates take."""

    title: str
    description: str


class Group(BaseModel):
    signature: str = Field(description="the cause's: the same exception and top frames, numbers and paths aside")
    cause: str
    frames: list[str] = Field(default_factory=list, exclude_if=_empty)
    verdict: Literal["known", "flaky", "new"]  # flaky: no known bug, each test passed on this commit too
    bug: str | None = Field(None, description="the likeliest known bug, when known", exclude_if=omitted_when_null)
    band: Band | None = Field(None, exclude_if=omitted_when_null)
    suggestions: list[Suggestion] = Field(description="likeliest first")
    failures: list[FailedTest]
    first_seen: datetime = Field(description="when this cause first failed a run of the product")
    runs_seen: int = Field(description="runs of the product this cause failed, this one included")
    draft: Draft


class TriageResponse(BaseModel):
    run: int
    product: str
    name: str = Field("", exclude_if=_empty)
    commit: str = Field("", exclude_if=_empty)
    created_at: datetime
    counts: Counts
    groups: list[Group] = Field(description="one a cause, most failures first")
    omitted: int = Field(0, description="groups left out by max_tokens", exclude_if=_empty)
