"""The ranking's constants: one typed, validated object, read once.

They are not settings for an operator: the defaults are the measured ones
(docs/benchmarks.md), and each one changes what every search returns. An
evaluation run (`manage.py search_eval`, bench/ranking_lab.py) overrides
some by name in the Django setting SEARCH_RANKING, from the environment
variable of that name holding JSON: SEARCH_RANKING='{"rrf_k": 10}'. A system
check (registered in search/apps.py) refuses a bad value when a command
starts, naming the field and what it may be. docs/settings.md has one line
for each field.
"""

import json
import os
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Literal

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Share = Annotated[float, Field(ge=0, le=1)]


class RankingConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Fusion and boosts (search.ranking.fusion).
    fusion: Literal["zscore", "rrf"] = "zscore"  # what a list gives its records: z-scores or reciprocal ranks
    zscore_depth: int = Field(100, ge=2)  # zscore: each list's first records that give its standard deviation
    rrf_k: int = Field(20, ge=1)  # rrf: each list adds weight / (k + rank)
    keyword_weight: float = Field(1.0, ge=0)  # the keyword arm's weight in the fusion
    semantic_weight: float = Field(1.0, ge=0)  # the semantic arm's weight in the fusion
    weak_coverage: float = Field(0.33, ge=0, le=1)  # below this share of the query, the keyword weight shrinks
    title_boost: float = Field(1.0, ge=0)  # a title equal to the query adds this / k
    recency_weight: float = Field(0.0, ge=0)  # the score x (1 + this x 0.5 ** (age / half life)); 0: off (LOSO)
    recency_half_life: float = Field(365.0, gt=0)  # in days
    # Hybrid's pseudo-relevance feedback (search.ranking.pipeline, search.ranking.semantic).
    feedback_docs: int = Field(1, ge=0)  # the first fusion's best records the second pass moves toward; 0: off
    feedback_weight: float = Field(3.0, gt=0)  # the weight of their mean vector beside the query's (LOSO)
    feedback_list_weight: float = Field(2.0, ge=0)  # the second pass's list weighs the semantic weight x this (LOSO)
    # A pasted stack trace's words only the frames of the runtime, UI framework and test harness hold:
    # their idf x this (search.query.traces.Trace.weights), the trace's other words' x 1.
    trace_platform_weight: float = Field(0.5, ge=0)
    # Candidates.
    arm_depth: int = Field(200, ge=1)  # records the keyword arm ranks (and the semantic arm in semantic mode)
    semantic_depth: int = Field(100, ge=1)  # records the semantic arm ranks in hybrid mode and for similar
    hnsw_ef_search: int = Field(400, ge=1, le=1000)  # pgvector's hnsw.ef_search, at least the depth asked for
    relax_below: int = Field(5, ge=0)  # fewer records than this hold every word: any word may match
    # Broad queries (search.ranking.keyword, search.ranking.sampling).
    exact_limit: int = Field(3000, ge=1)  # matches ranked, counted and faceted exactly; past it a query is broad
    sample_matches: int = Field(400, ge=1)  # about how many matches a broad query's estimate samples
    recent_candidates: int = Field(300, ge=1)  # a broad query's most recently updated matches that are ranked
    # ts_rank (search.ranking.keyword).
    rank_weights: tuple[Share, Share, Share, Share] = (0.1, 0.2, 0.6, 1.0)  # D, C, B, A: environment, -, text, title
    rank_normalization: int = Field(1, ge=0, le=63)  # ts_rank's normalization flags, or-ed
    # The second stage, when a reranker is configured (search.ranking.rerank).
    rerank_depth: int = Field(30, ge=1)  # the fused list's best records the reranker reorders
    rerank_chars: int = Field(1000, ge=1)  # characters of each record's text it reads after the title

    @field_validator("rank_weights", mode="before")
    @classmethod
    def _comma_separated(cls, value):
        return value.split(",") if isinstance(value, str) else value


class RankingConfigError(ImproperlyConfigured):
    """SEARCH_RANKING holds what RankingConfig refuses: one sentence a problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(" ".join(problems))
        self.problems = problems


def build(overrides: Mapping) -> RankingConfig:
    """The defaults with `overrides` (field name -> value) on top, validated."""
    if not isinstance(overrides, Mapping):
        kind = type(overrides).__name__
        raise RankingConfigError([f"SEARCH_RANKING must map field names to values (a JSON object), not a {kind}."])
    try:
        return RankingConfig.model_validate(overrides)
    except ValidationError as exc:
        fields = dict.fromkeys(error["loc"][0] for error in exc.errors())  # one sentence a field, in order
        raise RankingConfigError([_problem(name, overrides[name]) for name in fields]) from None


def _problem(name: str, value) -> str:
    fields = RankingConfig.model_fields
    if name not in fields:
        return f"SEARCH_RANKING names {name!r}, which is not a ranking constant; they are: {', '.join(fields)}."
    return f"SEARCH_RANKING sets {name} to {value!r}; it must be {allowed(name)} (default {default_json(name)})."


def default_json(name: str) -> str:
    """A field's default as SEARCH_RANKING would write it: "200", "[0.1, 0.2, 0.6, 1.0]"."""
    return json.dumps(RankingConfig.model_fields[name].default)


def allowed(name: str) -> str:
    """What a field may be, in words, from its schema: "a whole number from 1 to 1000"."""
    schema = RankingConfig.model_json_schema()["properties"][name]
    if "enum" in schema:
        return "one of " + ", ".join(schema["enum"])
    if schema["type"] == "array":
        return f"{len(schema['prefixItems'])} numbers, each {_bounds(schema['prefixItems'][0])}"
    return f"{'a whole number' if schema['type'] == 'integer' else 'a number'} {_bounds(schema)}"


def _bounds(schema: dict) -> str:
    low, high, above = schema.get("minimum"), schema.get("maximum"), schema.get("exclusiveMinimum")
    if high is not None:
        return f"from {low} to {high}"
    return f"above {above}" if above is not None else f"of at least {low}"


@cache
def current() -> RankingConfig:
    """The ranking's constants, built from SEARCH_RANKING once (and again when a test overrides it)."""
    return build(_overrides())


def _overrides():
    return getattr(settings, "SEARCH_RANKING", None) or {}


def _forget(*, setting: str, **_) -> None:
    if setting == "SEARCH_RANKING":
        current.cache_clear()


setting_changed.connect(_forget, dispatch_uid="search.ranking.config.forget")


def check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A system check: SEARCH_RANKING's overrides are valid, before any search needs them;
    and a warning for each environment variable that used to set a constant and is now ignored."""
    hint = "The defaults are the measured ones; an evaluation run overrides them in SEARCH_RANKING (docs/settings.md)."
    problems = []
    try:
        build(_overrides())
    except RankingConfigError as exc:
        problems += [checks.Error(problem, hint=hint, id="search.E001") for problem in exc.problems]
    for name in RankingConfig.model_fields:
        if (old := f"SEARCH_{name.upper()}") in os.environ:
            message = f"{old} is set but no longer read: {name} is a ranking constant (search.ranking.config)."
            instead = (
                f"Unset it; an evaluation run sets SEARCH_RANKING='{{\"{name}\": ...}}' instead (docs/settings.md)."
            )
            problems.append(checks.Warning(message, hint=instead, id="search.W001"))
    return problems
