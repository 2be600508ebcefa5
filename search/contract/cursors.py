"""Cursors: where the next page of a ranked list starts.

A cursor holds the (score, id) of the previous page's last record and a
fingerprint of the request it belongs to, so a cursor sent with another
query or other filters is refused rather than misread. It is plain text,
`fingerprint_score_id` (URL-safe as it is): an agent reads every cursor it is
given, and base64 of JSON cost it about 45 tokens, this about 20.
"""

import hashlib
import json

from pydantic import BaseModel

from search.contract import SearchError

# What may change from page to page without changing the list.
PAGING = {
    "cursor",
    "limit",
    "include_scores",
    "include_content",
    "detail",
    "include_facets",
    "include_index",
    "max_tokens",
}


def fingerprint(request: BaseModel) -> str:
    data = request.model_dump(mode="json", exclude=PAGING)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def encode(owner: str, score: float, doc_id: int) -> str:
    return f"{owner}_{score!r}_{doc_id}"  # repr: the float exactly, to compare with the next page's scores


def decode(cursor: str, owner: str) -> tuple[float, int]:
    """The (score, id) of the last record of the previous page."""
    try:
        issued_for, score_text, id_text = cursor.split("_")
        score, doc_id = float(score_text), int(id_text)
        if score != score or abs(score) == float("inf"):  # NaN or infinite: no score this service gives
            raise ValueError(score_text)
    except ValueError as exc:
        raise SearchError(
            "cursor: not a cursor this service issued; send the next_cursor of the previous page."
        ) from exc
    if issued_for != owner:
        raise SearchError(
            "cursor: it belongs to a different search (query or filters changed); start again without a cursor."
        )
    return score, doc_id
