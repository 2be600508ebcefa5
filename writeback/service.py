"""Write-back operations: one place, every surface (REST, MCP, next the UI) a thin door over it.

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
from backlog.models import Product
from connectors.models import Source
from connectors.sources import connector_class
from search.contract import NotFound, SearchError
from search.service import parse

from . import worker
from .contract import CannotFile, FileRequest, KeyReused, WriteBackOff, WriteResponse
from .models import Operation, UpstreamWrite

WRITING_BACK = "docs/connectors.md, Writing back"


class Filed(NamedTuple):
    write: dict  # WriteResponse's JSON
    created: bool  # False: the idempotency key's earlier write


def file(params: Mapping[str, Any], user, surface: str, idempotency_key: str | None = None) -> Filed:
    """File a draft bug upstream (FileRequest's fields); the write, and whether this call made it."""
    if user is None or not user.is_authenticated:
        raise SearchError("filing in a tracker is done as a person: sign in, or start the MCP server with --user.")
    request = parse(FileRequest, params)
    key = (idempotency_key or request.idempotency_key or "").strip()
    product = _product(request.product, user)
    source = _writable_source(product)
    digest = hashlib.sha256(json.dumps(request.model_dump(exclude={"idempotency_key"}), sort_keys=True).encode())
    if key and (earlier := _earlier(user, key, digest.hexdigest())):
        return Filed(_answer(earlier), False)
    draft = {**request.draft(), "filed_by": user.get_full_name() or user.get_username()}
    try:
        with transaction.atomic():
            write = UpstreamWrite.objects.create(
                source=source,
                product=product,
                operation=Operation.FILE,
                draft=draft,
                requested_by=user,
                surface=surface,
                idempotency_key=key,
                request_hash=digest.hexdigest() if key else "",
            )
    except IntegrityError:  # the same key, sent twice at once: the other call's write
        return Filed(_answer(_earlier(user, key, digest.hexdigest())), False)
    if settings.WRITEBACK_WAIT_SECONDS > 0:
        worker.send_now(write.pk, settings.WRITEBACK_WAIT_SECONDS)
    return Filed(_answer(UpstreamWrite.objects.select_related("source", "product").get(pk=write.pk)), True)


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
    sources = list(Source.objects.filter(product_key__iexact=product.key, enabled=True).order_by("pk"))
    if not sources:
        raise CannotFile(
            f"{product.key} is not fed by a tracker (no enabled source syncs it), so there is nowhere upstream "
            "to file; its records are filed here, on the report-a-bug page."
        )
    filing = [s for s in sources if connector_class(s.kind).files_issues]
    if not filing:
        raise CannotFile(
            f"{product.key} is fed by {sources[0]} ({sources[0].get_kind_display()}), where filing is not built yet; "
            f"GitHub sources file now ({WRITING_BACK})."
        )
    writable = [s for s in filing if s.write_back]
    if not writable:
        raise WriteBackOff(
            f"{filing[0]} does not write back: an admin turns on 'Write back' on it (admin › Connectors › Sources › "
            f"{filing[0]}), and its token needs the right to create issues ({WRITING_BACK})."
        )
    return writable[0]


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
