"""Filing upstream from the report-a-bug page: the staff UI's door over writeback.service.

"File bug", for a product whose tracker takes writes (its source's `write_back`
on), calls `writeback.service.file(..., surface=UI)` with the idempotency key
the form has carried since it was rendered, so a double click or a form sent
again is the same write. The page then shows the write at `?write=<id>`:
pending (it looks again by itself: a meta refresh, which the CSP does not
govern), sent (upstream's key and link, and the record here) or failed
(upstream's own words, the draft back in the form under a new key, to try
again). A product no tracker takes writes for is filed here only, and the page
says so beside the button, and why.
"""

import secrets

from connectors.models import Source
from search.contract import SearchError
from writeback import service
from writeback.contract import CannotFile, CannotMark, WriteBackOff
from writeback.models import Status, Surface, UpstreamWrite

REFRESH_SECONDS = 3
DRAFT_FIELDS = ("title", "description", "steps", "expected_result", "actual_result", "environment", "severity")
ADMIN_SETTING = "“Write back” on that source (admin › Connectors › Sources)"


def new_key() -> str:
    """A form's idempotency key: one rendered form, one write."""
    return secrets.token_urlsafe(24)


def destinations(products) -> dict[str, dict]:
    """Each product's key → where "File bug" files it: `upstream` (whether its
    tracker takes the write) and the sentence said beside the button.

    The rule is writeback.service.writable_source, which decides when the bug is
    filed; here it is asked beforehand, for all the products offered in one query."""
    fed: dict[str, list[Source]] = {}
    for source in Source.objects.filter(enabled=True).order_by("pk"):
        fed.setdefault(source.product_key.upper(), []).append(source)
    return {product.key: _where(product.key, fed.get(product.key.upper(), [])) for product in products}


def _where(key: str, sources: list[Source]) -> dict:
    try:
        source = service.writable_source(key, sources)
    except CannotFile as why:
        if why.source is None:
            return _here(f"{key} is not synced from a tracker, so there is no other place to file it.")
        return _here(
            f"QA Search cannot file in {why.source.get_kind_display()} yet, so {why.source} will not see this bug."
        )
    except WriteBackOff as why:
        return _here(
            f"{why.source}, the tracker {key} is synced from, does not take writes from QA Search. "
            f"An administrator can turn on {ADMIN_SETTING}; until then the tracker will not see this bug."
        )
    note = (
        f"Files the issue in {source.get_kind_display()} ({source.project}); the record here is made from its answer."
    )
    return {"upstream": True, "note": note}


def _here(why: str) -> dict:
    return {"upstream": False, "note": f"Filed here only: {why}"}


def file_upstream(form, user, duplicate_of: str | None = None) -> dict | None:
    """File the valid form's draft in its product's tracker (then marked a duplicate of
    `duplicate_of` there): the write (WriteResponse's JSON); None when the product's tracker
    takes no writes, or the original is not its issue (file it here), or when the service
    refused the draft (its reason is then on the form)."""
    data = form.cleaned_data
    params = {name: data[name].strip() for name in DRAFT_FIELDS if (data.get(name) or "").strip()}
    params["product"] = data["product"].key
    try:
        return service.file(params, user, Surface.UI, data.get("idempotency_key") or None, duplicate_of).write
    except (WriteBackOff, CannotFile, CannotMark):
        return None
    except SearchError as exc:  # a draft the tracker's bounds refuse, a key reused for another draft
        form.add_error(None, str(exc))
        return None


def look_up(write_id: str, user) -> dict:
    """The write `user` may see (NotFound otherwise), with `draft`: what was typed, for a failed one's form."""
    if not write_id.isdigit() or len(write_id) > 18:
        write_id = "0"
    write = service.get(int(write_id), user)
    if write["status"] in (Status.FAILED, Status.DROPPED):
        stored = UpstreamWrite.objects.get(pk=write["id"]).draft
        write["draft"] = {
            "product": write["product"],
            **{name: stored[name] for name in DRAFT_FIELDS if stored.get(name)},
            "idempotency_key": new_key(),  # trying again is a new write: the key's own stays failed
        }
    return write
