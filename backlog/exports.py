"""Export of records: what is stored, in the interchange format, ready to import again."""

from collections.abc import Iterable, Iterator

from . import access, interchange
from .bulk import BATCH_SIZE
from .interchange import FIELDS, KIND_ORDER, RELATIONS
from .models import RECORD_MODELS

EXPORT_COLUMNS = {
    kind: ["key"] + [f"{name}__key" if name in RELATIONS else name for name in fields]
    for kind, fields in FIELDS.items()
}


def export_records(kinds: Iterable[str] = KIND_ORDER, products: Iterable[str] | None = None) -> Iterator[dict]:
    """Every stored record (of `kinds`, of `products`) in the interchange format,
    in dependency order so that the output can be imported as it is."""
    products = list(products or [])
    for kind in KIND_ORDER:
        if kind not in kinds:
            continue
        queryset = RECORD_MODELS[kind].objects.order_by("id")
        if products:
            queryset = queryset.filter(**{"key__in" if kind == "product" else "product__key__in": products})
        for row in queryset.values(*EXPORT_COLUMNS[kind]).iterator(chunk_size=BATCH_SIZE):
            yield interchange.to_record(kind, {name.removesuffix("__key"): value for name, value in row.items()})


def export_selected(records: Iterable[tuple[str, int]], user=None) -> Iterator[dict]:
    """The records named by (kind, id), in that order, in the interchange format;
    only those `user` may see (backlog.access), and none deleted meanwhile. One
    query a kind: call it a batch at a time."""
    records = list(records)
    found = {}
    for kind in KIND_ORDER:
        ids = [record_id for k, record_id in records if k == kind]
        if not ids:
            continue
        queryset = access.visible(RECORD_MODELS[kind].objects.filter(id__in=ids), user)
        for row in queryset.values("id", *EXPORT_COLUMNS[kind]):
            values = {name.removesuffix("__key"): value for name, value in row.items()}
            found[kind, row["id"]] = interchange.to_record(kind, values)
    return (found[ref] for ref in records if ref in found)


def count_records(kinds: Iterable[str] = KIND_ORDER, products: Iterable[str] | None = None) -> int:
    products = list(products or [])
    total = 0
    for kind in kinds:
        queryset = RECORD_MODELS[kind].objects.all()
        if products:
            queryset = queryset.filter(**{"key__in" if kind == "product" else "product__key__in": products})
        total += queryset.count()
    return total
