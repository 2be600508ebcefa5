"""Text PostgreSQL can store, a rule shared by every path that reads or writes records.

PostgreSQL's text types cannot hold NUL (U+0000): a query or a row with one
fails with a DataError. The interchange format refuses it in records and the
search contract in every request parameter, with the same message.
"""

from typing import Annotated

from pydantic import AfterValidator


def no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL character (\\u0000), which PostgreSQL cannot store; remove it")
    return value


NulFreeStr = Annotated[str, AfterValidator(no_nul)]
