"""Cursors: where the next page of a ranked list starts.

A cursor holds the (score, id) of the previous page's last record and a
fingerprint of the request it belongs to, so a cursor sent with another
query or other filters is refused rather than misread.
"""

import base64
import hashlib
import json

from pydantic import BaseModel

from .contract import SearchError

# What may change from page to page without changing the list.
PAGING = {"cursor", "limit", "include_scores", "include_content", "detail"}


def fingerprint(request: BaseModel) -> str:
    data = request.model_dump(mode="json", exclude=PAGING)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def encode(owner: str, score: float, doc_id: int) -> str:
    payload = json.dumps({"f": owner, "s": score, "i": doc_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode(cursor: str, owner: str) -> tuple[float, int]:
    """The (score, id) of the last record of the previous page."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        score, doc_id, issued_for = float(data["s"]), int(data["i"]), data["f"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SearchError(
            "cursor: not a cursor this service issued; send the next_cursor of the previous page."
        ) from exc
    if issued_for != owner:
        raise SearchError(
            "cursor: it belongs to a different search (query or filters changed); start again without a cursor."
        )
    return score, doc_id
