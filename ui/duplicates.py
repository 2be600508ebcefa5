"""A bug page's "Likely duplicates": the bug itself, read as a draft by check_duplicates.

`similar` ranks a record's nearest neighbours, and nearness is not duplication:
bugs filed against the same scenario share its wording (the steps, the screen)
but not its defect. check_duplicates ranks the same way and also says how likely
each candidate is a duplicate (its band, docs/duplicates.md), so the page lists
as likely duplicates only those in the high or medium band, and the rest of
`similar`'s list as related. Both calls run as the user, within their access.
"""

from search import service
from search.contract.types import QUERY_MAX, QUERY_MIN
from search.query.scope import leaving_out

from .report import DRAFT_FIELDS

LIKELY_BANDS = ("high", "medium")
CANDIDATES = 10  # asked for: the bands never rise down the list, so the likely ones come first


def likely_duplicates(bug: dict, user) -> dict | None:
    """check_duplicates' answer for a stored bug's title and text (a `get` record),
    its results kept to the likely bands; None for a title too short to check."""
    title = bug["title"].strip()[:QUERY_MAX]
    if len(title) < QUERY_MIN:
        return None
    draft = {"title": title, "product": bug["product"], "limit": CANDIDATES}
    if bug.get("feature"):  # a look-alike of another feature is never a high one
        draft["draft_feature"] = bug["feature"]
    for name in DRAFT_FIELDS:
        value = (bug.get("content") or {}).get(name)
        text = "\n".join(value) if isinstance(value, list) else value
        if text and text.strip():
            draft[name] = text
    # The bug is left out of the corpus while it is ranked, as search_eval's duplicate
    # task leaves out the report a query was taken from: it is not its own duplicate.
    with leaving_out([bug["key"]]):
        checked = service.call("check_duplicates", draft, user)
    return {**checked, "results": [hit for hit in checked["results"] if hit["band"] in LIKELY_BANDS]}


def related(similar: dict, duplicates: dict | None) -> dict:
    """`similar`'s answer without the records already listed as likely duplicates."""
    listed = {hit["key"] for hit in duplicates["results"]} if duplicates else set()
    return {**similar, "results": [hit for hit in similar["results"] if hit["key"] not in listed]}
