"""The record interchange format (shared FORMAT.md): parse, validate, write.

One JSON object a line. `parse_line` turns a line into a typed record or a
list of plain-language problems; `to_record` turns a stored row back into the
same format, so import -> export -> import is the identity.
"""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)

from .models import KEY_PATTERN, TITLE_MAX_LENGTH, BugStatus, Severity, TestStatus
from .text import in_utc, no_nul

# Limits that keep one record from hurting the database or the index: a
# PostgreSQL tsvector holds at most 1 MB, and one line is read whole.
MAX_TEXT_CHARS = 200_000
MAX_LINE_BYTES = 4 * 1024 * 1024
# How deep raw_data may nest objects and arrays (raw_data itself is level 1).
# Trackers nest a few levels; the limit keeps every reader of the value (Python's
# json, the API's parser, PostgreSQL's jsonb functions) far from its recursion
# limit. A line nested past what pydantic's parser reads at all (200 levels) is
# refused as too deep too, by the same words.
MAX_RAW_DATA_DEPTH = 100
TOO_DEEP = f"nests objects and arrays more than {MAX_RAW_DATA_DEPTH} levels deep; flatten it"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def nests_deeper(value: Any, levels: int) -> bool:
    """Whether `value` nests objects and arrays more than `levels` deep (an
    object or array is level 1). Walked without recursion, so however deep a
    value a caller parsed, asking never runs out of stack."""
    waiting = [(value, 1)]
    while waiting:
        item, depth = waiting.pop()
        if isinstance(item, dict | list):
            if depth > levels:
                return True
            waiting.extend((inner, depth + 1) for inner in (item.values() if isinstance(item, dict) else item))
    return False


def storable_json(value: Any) -> Any:
    """raw_data, when it nests no deeper than MAX_RAW_DATA_DEPTH and PostgreSQL can store every string in it."""
    if nests_deeper(value, MAX_RAW_DATA_DEPTH):
        raise ValueError(TOO_DEEP)
    no_nul_anywhere(value)
    return value


def no_nul_anywhere(value: Any) -> None:
    """ValueError, in words, when a string (or key) of a JSON value holds what PostgreSQL cannot store."""
    if isinstance(value, str):
        no_nul(value)
    elif isinstance(value, dict):
        for name, item in value.items():
            no_nul(name)
            no_nul_anywhere(item)
    elif isinstance(value, list):
        for item in value:
            no_nul_anywhere(item)


Key = Annotated[str, StringConstraints(pattern=KEY_PATTERN)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS), AfterValidator(no_nul)]
Title = Annotated[
    str,
    StringConstraints(max_length=TITLE_MAX_LENGTH),
    AfterValidator(no_nul),
    AfterValidator(_not_blank),
]
RawData = Annotated[dict[str, Any], AfterValidator(storable_json)]
# ISO 8601 takes offsets up to ±23:59, PostgreSQL up to ±15:59: a time is kept
# in UTC, and one that is past year 9999 (or before year 1) there is refused.
Time = Annotated[AwareDatetime, AfterValidator(in_utc)]


class _Record(BaseModel):
    # strict: "5" is not a number and 1710000000 is not a time; extra fields
    # are refused so that a typo ("severty") is reported, not dropped.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, use_enum_values=True)

    key: Key
    created_at: Time | None = None
    updated_at: Time | None = None

    def relations(self) -> dict[str, str]:
        """Relation field -> the key it names (kind checked by the importer)."""
        return {name: value for name in RELATION_KINDS if (value := getattr(self, name, None)) is not None}


class ProductRecord(_Record):
    kind: Literal["product"]
    name: Title
    description: Text = ""


class FeatureRecord(_Record):
    kind: Literal["feature"]
    product: Key
    name: Title
    description: Text = ""
    acceptance_criteria: Text = ""


class TestRecord(_Record):
    __test__ = False  # a pydantic model, not a pytest test class

    kind: Literal["test"]
    product: Key
    title: Title
    feature: Key | None = None
    description: Text = ""
    steps: list[Text] = Field(default_factory=list)
    status: TestStatus = TestStatus.ACTIVE


class BugRecord(_Record):
    kind: Literal["bug"]
    product: Key
    title: Title
    description: Text = ""
    feature: Key | None = None
    test: Key | None = None
    severity: Severity | None = None
    status: BugStatus = BugStatus.OPEN
    duplicate_of: Key | None = None  # another bug of the same product (docs/format.md)
    raw_data: RawData = Field(default_factory=dict)


AnyRecord = Annotated[ProductRecord | FeatureRecord | TestRecord | BugRecord, Field(discriminator="kind")]
_adapter = TypeAdapter(AnyRecord)

# What the relation fields of each kind must point at.
RELATION_KINDS = {"product": "product", "feature": "feature", "test": "test", "duplicate_of": "bug"}

# Dependency order: a record is written after the records it names.
KIND_ORDER = ("product", "feature", "test", "bug")

# The stored fields of each kind, in the order the format writes them;
# relations are named by key in the file and by id in the table.
FIELDS = {
    "product": ["name", "description", "created_at", "updated_at"],
    "feature": ["product", "name", "description", "acceptance_criteria", "created_at", "updated_at"],
    "test": ["product", "feature", "title", "description", "steps", "status", "created_at", "updated_at"],
    "bug": [
        "product",
        "feature",
        "test",
        "title",
        "description",
        "severity",
        "status",
        "duplicate_of",
        "raw_data",
        "created_at",
        "updated_at",
    ],
}
RELATIONS = ("product", "feature", "test", "duplicate_of")


def parse_line(line: str | bytes) -> tuple[AnyRecord | None, list[str]]:
    """Validate one line: (record, []) or (None, [problem, ...])."""
    size = len(line.encode() if isinstance(line, str) else line)
    if size > MAX_LINE_BYTES:
        return None, [
            f"the line is {size:,} bytes; a record may be at most {MAX_LINE_BYTES:,} bytes "
            f"(and each text field at most {MAX_TEXT_CHARS:,} characters)"
        ]
    try:
        return _adapter.validate_json(line), []
    except ValidationError as exc:
        return None, [_explain(error) for error in exc.errors(include_url=False)]


def _explain(error: dict) -> str:
    if not error["loc"] and error["type"] not in ("json_invalid", "union_tag_invalid", "union_tag_not_found"):
        return 'a record must be a JSON object, like {"kind": "bug", "key": "BUG-1", ...}'
    kind, *path = error["loc"] or ("",)
    where = ".".join(str(part) for part in path)
    kind_names = "'product', 'feature', 'test' or 'bug'"
    match error["type"]:
        case "json_invalid" if "recursion limit exceeded" in error["ctx"]["error"]:
            return f"the line nests objects and arrays too deep to read; raw_data may nest {MAX_RAW_DATA_DEPTH} levels"
        case "json_invalid":
            return f"not valid JSON ({error['ctx']['error']})"
        case "model_attributes_type" | "model_type":
            return "a record must be a JSON object"
        case "union_tag_not_found":
            return f"missing field 'kind' (one of {kind_names})"
        case "union_tag_invalid":
            return f"unknown kind {error['input'].get('kind')!r}; use {kind_names}"
        case "missing":
            return f"missing required field '{where}' for a {kind}"
        case "extra_forbidden":
            known = ", ".join(_fields(kind))
            return f"unknown field '{where}' for a {kind}; the fields are: {known}"
        case "string_pattern_mismatch":
            return (
                f"'{where}' {error['input']!r} is not a valid key: use 1 to 64 letters, "
                "digits, '-', '_' or '.', like BUG-1043"
            )
        case "string_too_long":
            limit = error["ctx"]["max_length"]
            return f"'{where}' is {len(error['input']):,} characters; at most {limit:,} are allowed"
        case "timezone_aware" | "datetime_type" | "datetime_parsing" | "datetime_from_date_parsing":
            return (
                f"'{where}' must be an ISO 8601 time with an offset, like "
                f"2026-03-14T09:26:53+00:00 (got {error['input']!r})"
            )
        case "enum" | "literal_error":
            return f"'{where}' {error['input']!r} is not allowed; use {error['ctx']['expected']}"
        case "value_error":
            return f"'{where}' {error['ctx']['error']}"
        case _:
            return f"'{where}': {error['msg']}"


def _fields(kind: str) -> list[str]:
    model = {"product": ProductRecord, "feature": FeatureRecord, "test": TestRecord, "bug": BugRecord}[kind]
    return ["kind", "key"] + [name for name in model.model_fields if name not in ("kind", "key")]


def _time(value: datetime) -> str:
    return value.isoformat()


def to_record(kind: str, row: dict) -> dict:
    """A stored row (from `export_values`) as an interchange record.

    Empty optional fields are left out, as a person would write the file;
    importing the result sets the same values again.
    """
    record = {"kind": kind, "key": row["key"]}
    for name, value in row.items():
        if name in ("key", "id") or value in (None, "", [], {}):
            continue
        record[name] = _time(value) if isinstance(value, datetime) else value
    return record


def dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


@dataclass
class Problem:
    """What is wrong with a line of a file (`line` None: with the file)."""

    line: int | None
    key: str | None
    message: str

    def __str__(self):
        where = f"line {self.line}" if self.line is not None else "file"
        return f"{where}: {self.key + ': ' if self.key else ''}{self.message}"


@dataclass
class Parsed:
    """A valid record of a file, and the line it is on."""

    line: int
    record: _Record
