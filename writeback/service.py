"""Write-back operations: one place, every surface (REST, MCP, next the UI) a thin door over it.

`mark_duplicate(key, of_key, user, surface, idempotency_key)`: bug `key`
marked a duplicate of `of_key` in the tracker both were synced from; only
the outbox row is committed here: the local `duplicate_of` comes back
from upstream's answer through the sync's writer, as a sync brings it.

`file(params, user, surface, idempotency_key)`: a draft bug filed in the
tracker that feeds its product. The decision and its outbox row
(writeback.models) commit together; then, within WRITEBACK_WAIT_SECONDS,
the call sends it itself (writeback.worker, as the worker would), so a
caller usually gets the write back `sent`, its record searchable; a slow
or lost answer leaves it `pending` for the worker, which settles it by its
marker. The answer is `WriteResponse` (writeback.contract).

Who may: a user who sees the product (backlog.access: its team; superusers
and access_all_products see all), on a source that writes back. Whether
the session or token may write is the surface's to ask (REST's
TokenMayWrite, MCP's token scope), as for every other change.
"""

import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from django.conf import settings
from django.db import IntegrityError, transaction

from backlog import access
from backlog.models import Bug, Product
from connectors.models import Source, SyncedRecord
from connectors.sources import connector_class
from search.contract import NotFound, SearchError
from search.service import parse

from . import worker
from .contract import CannotFile, CannotMark, DuplicateRequest, FileRequest, KeyReused, WriteBackOff, WriteResponse
from .models import Operation, UpstreamWrite

WRITING_BACK = "docs/connectors.md, Writing back"


class Filed(NamedTuple):
    write: dict  # WriteResponse's JSON
    created: bool  # False: the idempotency key's earlier write


def file(
    params: Mapping[str, Any],
    user,
    surface: str,
    idempotency_key: str | None = None,
    duplicate_of: str | None = None,
) -> Filed:
    """File a draft bug upstream (FileRequest's fields); the write, and whether this call made it.

    With `duplicate_of` (a bug synced from the same tracker), the issue filed is then marked
    its duplicate there: once it is sent, the sender adds that write (`Operation.DUPLICATE`,
    one per filed write) in the transaction that settles it, so the link comes back from
    upstream as any duplicate's does."""
    if user is None or not user.is_authenticated:
        raise SearchError("filing in a tracker is done as a person: sign in, or start the MCP server with --user.")
    request = parse(FileRequest, params)
    key = (idempotency_key or request.idempotency_key or "").strip()
    product = _product(request.product, user)
    source = _writable_source(product)
    asked = request.model_dump(exclude={"idempotency_key"})
    draft = {**request.draft(), "filed_by": user.get_full_name() or user.get_username()}
    if duplicate_of:
        original = _bug(duplicate_of, user)
        first, other = _synced(original)
        if other.pk != source.pk or not connector_class(source.kind).marks_duplicates:
            raise CannotMark(
                f"{original.key} comes from {other}, and {product.key}'s bugs are filed in {source}: a tracker "
                "links only its own issues, so file it as new or name a bug of the same tracker."
            )
        draft["duplicate_of"] = {"of": original.key, "original": first.upstream_id}
        asked["duplicate_of"] = original.key
    digest = hashlib.sha256(json.dumps(asked, sort_keys=True).encode())
    return _outbox(Operation.FILE, source, product, draft, user, surface, key, digest.hexdigest())


def mark_duplicate(key: str, of_key: str, user, surface: str, idempotency_key: str | None = None) -> Filed:
    """Mark bug `key` a duplicate of `of_key` upstream; the write, and whether this call made it.
    Nothing local changes here: `duplicate_of` comes back with upstream's answer (writeback.worker)."""
    if user is None or not user.is_authenticated:
        raise SearchError("writing to a tracker is done as a person: sign in, or start the MCP server with --user.")
    request = parse(DuplicateRequest, {"key": key, "of": of_key, "idempotency_key": idempotency_key})
    duplicate, original = _bug(request.key, user), _bug(request.of, user)
    if duplicate.pk == original.pk:
        raise SearchError(f"{duplicate.key} cannot be a duplicate of itself: name the bug it repeats in 'of'.")
    (copy, source), (first, other) = _synced(duplicate), _synced(original)
    if other.pk != source.pk:
        raise CannotMark(
            f"{duplicate.key} comes from {source} and {original.key} from {other}: a tracker links only its own "
            "issues, so mark a duplicate of a bug from the same source."
        )
    markable(source)
    digest = hashlib.sha256(json.dumps(["duplicate", duplicate.key, original.key]).encode()).hexdigest()
    ikey = (request.idempotency_key or "").strip()
    if ikey and (earlier := _earlier(user, ikey, digest)):
        return Filed(_answer(earlier), False)
    if duplicate.duplicate_of_id == original.pk:
        raise CannotMark(f"{duplicate.key} is already a duplicate of {original.key}, as {source} has it.")
    draft = {
        "key": duplicate.key,
        "of": original.key,
        "number": copy.upstream_id,
        "original": first.upstream_id,
        "filed_by": user.get_full_name() or user.get_username(),
    }
    return _outbox(Operation.DUPLICATE, source, duplicate.product, draft, user, surface, ikey, digest)


def markable(source: Source) -> None:
    """Nothing when `source` takes a duplicate's mark; else CannotMark (its kind marks none
    yet) or WriteBackOff (it writes nothing back) saying why. The record page asks it too."""
    if not connector_class(source.kind).marks_duplicates:
        raise CannotMark(f"marking duplicates in {source.get_kind_display()} is not built yet ({WRITING_BACK}).")
    if not source.write_back:
        raise WriteBackOff(
            f"{source} does not write back: an admin turns on 'Write back' on it (admin › Connectors › Sources › "
            f"{source}), and its token needs the right to edit issues ({WRITING_BACK})."
        )


def duplicate(params: Mapping[str, Any], user, surface: str, idempotency_key: str | None = None) -> Filed:
    """`mark_duplicate` from a request's fields (DuplicateRequest: key, of, idempotency_key)."""
    request = parse(DuplicateRequest, params)
    return mark_duplicate(request.key, request.of, user, surface, idempotency_key or request.idempotency_key)


def _outbox(operation, source, product, draft: dict, user, surface: str, key: str, digest: str) -> Filed:
    """The write's row, committed alone (or the idempotency key's earlier one), then sent within the wait."""
    if key and (earlier := _earlier(user, key, digest)):
        return Filed(_answer(earlier), False)
    try:
        with transaction.atomic():
            write = UpstreamWrite.objects.create(
                source=source,
                product=product,
                operation=operation,
                draft=draft,
                requested_by=user,
                surface=surface,
                idempotency_key=key,
                request_hash=digest if key else "",
            )
    except IntegrityError:  # the same key, sent twice at once: the other call's write
        return Filed(_answer(_earlier(user, key, digest)), False)
    if settings.WRITEBACK_WAIT_SECONDS > 0:
        worker.send_now(write.pk, settings.WRITEBACK_WAIT_SECONDS)
    return Filed(_answer(UpstreamWrite.objects.select_related("source", "product").get(pk=write.pk)), True)


def _bug(key: str, user) -> Bug:
    bug = access.visible(Bug.objects.select_related("product"), user).filter(key__iexact=key).first()
    if bug is None:
        raise NotFound(f"no bug {key!r} you can see; name bugs of your team's products by their keys (SEAMONKEY-12).")
    return bug


def synced_from(bug: Bug) -> SyncedRecord | None:
    """The upstream item `bug` was synced from (its source with it), if an enabled source holds one."""
    synced = SyncedRecord.objects.select_related("source").filter(kind="bug", key=bug.key, source__enabled=True)
    return synced.order_by("pk").first()


def _synced(bug: Bug) -> tuple[SyncedRecord, Source]:
    """The upstream item `bug` was synced from, and its source; or why there is none to mark."""
    synced = synced_from(bug)
    if synced is None:
        raise CannotMark(
            f"{bug.key} was not synced from a tracker (it was made here), so there is nothing upstream to mark; "
            "mark it a duplicate here, on its page."
        )
    return synced, synced.source


def get(write_id: int, user) -> dict:
    """A write, for those who see its product."""
    write = UpstreamWrite.objects.select_related("source", "product").filter(pk=write_id).first()
    if write is None or not access.can_see(write.product, user):
        raise NotFound(f"no write {write_id} you can see; a write's id is in the answer that made it.")
    return _answer(write)


def _answer(write: UpstreamWrite) -> dict:
    return WriteResponse.of(write).model_dump(mode="json")


def _product(key: str, user) -> Product:
    product = access.visible(Product.objects.all(), user).filter(key__iexact=key).first()
    if product is None:
        raise NotFound(f"no product {key!r} you can see; file in a product of your team's (its key, like SEAMONKEY).")
    return product


def _writable_source(product: Product) -> Source:
    """The source that feeds `product` and may take the write, or why none may."""
    return writable_source(product.key, list(Source.objects.filter(product_key__iexact=product.key, enabled=True)))


def writable_source(key: str, sources: list[Source]) -> Source:
    """Of `sources`, the enabled ones feeding product `key`, the one a write goes to (the
    oldest that may); else CannotFile or WriteBackOff saying why, its `source` the one in
    the way (None: no tracker feeds it). The one rule: the report-a-bug page says it too."""
    sources = sorted(sources, key=lambda source: source.pk)
    if not sources:
        raise _because(
            CannotFile(
                f"{key} is not fed by a tracker (no enabled source syncs it), so there is nowhere upstream "
                "to file; its records are filed here, on the report-a-bug page."
            ),
            None,
        )
    filing = [s for s in sources if connector_class(s.kind).files_issues]
    if not filing:
        raise _because(
            CannotFile(
                f"{key} is fed by {sources[0]} ({sources[0].get_kind_display()}), where filing is not built yet; "
                f"GitHub and Jira sources file now ({WRITING_BACK})."
            ),
            sources[0],
        )
    writable = [s for s in filing if s.write_back]
    if not writable:
        raise _because(
            WriteBackOff(
                f"{filing[0]} does not write back: an admin turns on 'Write back' on it (admin › Connectors › "
                f"Sources › {filing[0]}), and its token needs the right to create issues ({WRITING_BACK})."
            ),
            filing[0],
        )
    return writable[0]


def _because(error: Exception, source: Source | None) -> Exception:
    error.source = source
    return error


def _earlier(user, key: str, digest: str) -> UpstreamWrite | None:
    """The write `user` made with idempotency key `key`; refused when it was for another request."""
    earlier = UpstreamWrite.objects.select_related("source", "product").filter(requested_by=user, idempotency_key=key)
    earlier = earlier.first()
    if earlier is not None and earlier.request_hash != digest:
        raise KeyReused(
            f"the idempotency key {key[:60]!r} was used for another request (write {earlier.pk}); "
            "a key stands for one request: send a new key for a new bug."
        )
    return earlier
