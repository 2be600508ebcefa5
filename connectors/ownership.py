"""What a source may write: only what it owns.

- A source writes records it created (its SyncedRecord rows) or keys
  nothing holds yet, in its own product. A key held by anything else is
  refused for that item and reported; the page goes on.
- A product it did not create it feeds only when the operator named it
  (`--product`), and then never renames or edits it.
- A sync never widens who sees what: a product it creates belongs to the
  teams set on the source (the writer sets them with its first page), and a
  product that existed before keeps its teams.
"""

from django.db.models.functions import Upper

from backlog.keys import stored_by_key
from backlog.models import Bug, Product, QATest

from .base import Mapped, ProductInfo, SyncError, product_key
from .models import Source, SyncedRecord

ITEM_MODELS = {"bug": Bug, "test": QATest}
KEY_MAX = Bug._meta.get_field("key").max_length
UPSTREAM_ID_MAX = SyncedRecord._meta.get_field("upstream_id").max_length


def claim_product(source: Source, product: ProductInfo) -> bool:
    """Whether `source` owns its product (made it, or makes it now); False for
    a product it feeds only because the operator named it (`--product`, or
    the source's product key in the admin). SyncError for a product it
    neither made nor was given: a source never adopts a product by a key it
    derived from the upstream's name."""
    if source.pk is not None and (
        SyncedRecord.objects.filter(source=source, kind="product", key__iexact=product.key).exists()
    ):
        return True
    existing = Product.objects.filter(key__iexact=product.key).values_list("key", flat=True).first()
    if existing is None:
        return True
    if source.product_key and product_key(source.product_key) == product.key:
        return False
    raise SyncError(
        f"product {existing} exists and was not made by this source; to feed it, name it with --product "
        f"{existing} (its name, description and teams stay as they are), or give the source another product key"
    )


def refusals(source: Source, product: str, items: list[Mapped]) -> dict[int, str]:
    """The items `source` may not write, by index, with why: keys outside the
    database's limits, another product than `product`, or a key held by a
    record this source did not write."""
    problems: dict[int, str] = {}
    for index, m in enumerate(items):
        key, upstream = m.record.get("key"), m.upstream_id
        if not _storable(key, KEY_MAX):
            problems[index] = f"its key is longer than {KEY_MAX} characters, or not text"
        elif not _storable(upstream):
            problems[index] = f"its upstream id is longer than {UPSTREAM_ID_MAX} characters, or not text"
        elif m.feature is not None and not _storable(m.feature.upstream_id):
            problems[index] = f"its feature's id is longer than {UPSTREAM_ID_MAX} characters, or not text"
        elif m.record.get("product") != product:
            problems[index] = f"it names product {str(m.record.get('product'))[:64]}, not {product}"
    keys = [m.record["key"] for index, m in enumerate(items) if index not in problems]
    held = stored_by_key(keys)
    product_id = Product.objects.filter(key__iexact=product).values_list("id", flat=True).first()
    mine = {
        (kind, key.upper())
        for kind, key in SyncedRecord.objects.filter(source=source, kind__in=ITEM_MODELS)
        .annotate(folded=Upper("key"))
        .filter(folded__in=list(held))
        .values_list("kind", "key")
    }
    for index, m in enumerate(items):
        folded = m.record["key"].upper() if index not in problems else None
        if folded in held:
            holder = held[folded]
            if (holder.kind, folded) not in mine or holder.kind != m.kind or holder.product_id != product_id:
                problems[index] = "the key is taken by a record this source did not write"
    return problems


def _storable(value, limit: int = UPSTREAM_ID_MAX) -> bool:
    """A key or upstream id PostgreSQL can keep: text within `limit`, no NUL, valid UTF-8."""
    if not isinstance(value, str) or not 0 < len(value) <= limit or "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True
