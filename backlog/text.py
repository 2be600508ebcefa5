"""Text (and times) PostgreSQL can store, rules shared by every path that reads or writes records.

PostgreSQL's text types cannot hold NUL (U+0000): a query or a row with one
fails with a DataError. The interchange format refuses it in records and the
search contract in every request parameter, with the same message.
"""

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL character (\\u0000), which PostgreSQL cannot store; remove it")
    return value


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
