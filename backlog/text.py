"""Text (and times) PostgreSQL can store, rules shared by every path that reads or writes records.

PostgreSQL's text types cannot hold NUL (U+0000): a query or a row with one
fails with a DataError. Nor can any UTF-8 text hold a lone UTF-16 surrogate
(U+D800 to U+DFFF), which JSON's "\\ud800" escapes can still carry. The
interchange format refuses both in records, the search contract in every
request parameter and the REST API's JSON parser in every body, with the
same words.
"""

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator

SURROGATE = re.compile("[\ud800-\udfff]")
SURROGATE_PROBLEM = "holds a lone UTF-16 surrogate (\\ud800 to \\udfff), which is not text; send valid Unicode"


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL character (\\u0000), which PostgreSQL cannot store; remove it")
    if SURROGATE.search(value):
        raise ValueError(SURROGATE_PROBLEM)
    return value


def surrogate_at(value, where: str = "") -> str | None:
    """Where in a parsed JSON value a string (or an object's key) holds a lone
    surrogate, like raw_data.steps[1]; None when nowhere."""
    if isinstance(value, str):
        return where or "the body" if SURROGATE.search(value) else None
    if isinstance(value, dict):
        for name, item in value.items():
            if isinstance(name, str) and SURROGATE.search(name):
                return f"a key of {where}" if where else "a key of the body"
            if found := surrogate_at(item, f"{where}.{name}" if where else str(name)):
                return found
    if isinstance(value, list):
        for number, item in enumerate(value):
            if found := surrogate_at(item, f"{where}[{number}]"):
                return found
    return None


NulFreeStr = Annotated[str, AfterValidator(no_nul)]


def one_of(choices) -> str:
    """'a', 'b' or 'c': the values a field takes, as every refusal of a value names them."""
    values = [repr(str(value)) for value in choices]
    return ", ".join(values[:-1]) + f" or {values[-1]}" if len(values) > 1 else "".join(values)


def in_utc(value: datetime) -> datetime:
    """An aware time as UTC; a naive one is taken as UTC. ISO 8601 allows
    offsets up to ±23:59 and PostgreSQL only up to ±15:59, so every time
    reaches the database in UTC (the same instant)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range once converted to UTC; give a time between years 1 and 9999") from None


UtcDateTime = Annotated[datetime, AfterValidator(in_utc)]
