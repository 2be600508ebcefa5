"""Import and export of records: operations that cross the four models.

`import_records` validates a whole file first and reports every problem with
its line number; only then does it write, in one transaction, upserting by
key and touching only records that differ from what is stored. Re-importing
the same file therefore changes nothing. `export_records` writes the same
format back.

Keys are compared case aside, as everywhere. An import made for a user
(the REST endpoint) writes only into the products that user may change
(backlog.access): a record of another product is "not stored" to them, and
a key that such a record holds is "taken", the words a key that exists
nowhere would never get, and nothing more. A key a record of another kind
holds is "taken" in the same words, naming no kind, for every importer.
"""

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import DatabaseError, transaction
from django.utils import timezone

from . import access, bulk, interchange
from .models import RECORD_MODELS, Product, key_taken_message
from .signals import records_imported
from .text import SURROGATE

logger = logging.getLogger(__name__)

# Dependency order: a record is written after the records it names.
KIND_ORDER = ("product", "feature", "test", "bug")

# The stored fields of each kind, in the order the format writes them;
# relations are named by key in the file and by id in the table.
FIELDS = {
    "product": ["name", "description", "created_at", "updated_at"],
    "feature": ["product", "name", "description", "acceptance_criteria", "created_at", "updated_at"],
    "test": ["product", "feature", "title", "description", "steps", "status", "created_at", "updated_at"],
    "bug": [
        "product",
        "feature",
        "test",
        "title",
        "description",
        "severity",
        "status",
        "duplicate_of",
        "raw_data",
        "created_at",
        "updated_at",
    ],
}
RELATIONS = ("product", "feature", "test", "duplicate_of")
BATCH_SIZE = 5000


class _NoProgress:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


# A progress factory: (description, total or None) -> an object with
# tqdm's update(n) and close(). The command passes tqdm itself.
Progress = Callable[[str, int | None], Any]


def no_progress(description: str, total: int | None) -> _NoProgress:
    return _NoProgress()


@dataclass
class Problem:
    line: int | None
    key: str | None
    message: str

    def __str__(self):
        where = f"line {self.line}" if self.line is not None else "file"
        return f"{where}: {self.key + ': ' if self.key else ''}{self.message}"


@dataclass
class ImportReport:
    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)
    written: bool = False

    @property
    def changed(self) -> int:
        return sum(self.created.values()) + sum(self.updated.values())

    def summary(self) -> str:
        def part(counter: Counter) -> str:
            total = sum(counter.values())
            detail = ", ".join(f"{counter[k]} {k}" for k in KIND_ORDER if counter[k])
            return f"{total}" + (f" ({detail})" if detail else "")

        return f"created {part(self.created)}, updated {part(self.updated)}, unchanged {part(self.unchanged)}"

    def failure(self, *, retry: str, skip_invalid: str, shown: int = 0) -> str:
        """Why nothing was imported, for `manage.py import_records` and the REST import alike:
        the count, the first `shown` problems, and what to do (`retry`, or the `skip_invalid` option)."""
        listed = "; ".join(str(problem) for problem in self.problems[:shown])
        more = len(self.problems) - shown
        return (
            f"{len(self.problems)} problem(s) found; nothing was imported"
            + (f": {listed}" if listed else "")
            + (f"; and {more} more (see problems)" if listed and more > 0 else "")
            + f". Fix them and {retry}, or use {skip_invalid} to import the valid records."
        )


@dataclass
class _Parsed:
    line: int
    record: interchange._Record


DATABASE_REFUSED = (
    "the database refused the import, so nothing was written; its error is in the server's log. "
    "Try again; if it keeps failing, tell the service's operator (a dry run checks the file without writing)"
)


class ImportAborted(Exception):
    """Raised inside the transaction to roll back a dry run or a failed write."""


def import_records(
    lines: Iterable[str | bytes],
    *,
    skip_invalid: bool = False,
    dry_run: bool = False,
    progress: Progress = no_progress,
    total_lines: int | None = None,
    user=None,
    charge: Callable[[int], Any] | None = None,
) -> ImportReport:
    """Validate and upsert the records in `lines` (the interchange format).

    All or nothing by default: any problem leaves the database untouched.
    With `skip_invalid`, valid records are written and invalid ones (and the
    records that name them) are reported. `dry_run` reports what would
    change and writes nothing. `user`: whose products the records may be in
    (None: any, the operator's import). `charge`: called with the number of
    valid records before their keys are looked up, outside the transaction
    (the REST import charges the user's search budget: docs/access.md); what
    it raises ends the import with nothing looked up or written.
    """
    report = ImportReport()
    parsed, invalid = _parse(lines, report, progress, total_lines)
    if charge is not None:
        charge(len(parsed))
    with transaction.atomic():
        resolved, stored = _resolve(parsed, invalid, report, access.visible_product_ids(user))
        if report.problems and not skip_invalid:
            return report
        plan = _plan(resolved, stored, report)
        if dry_run:
            return report
        try:
            with transaction.atomic():
                done = _write(plan, progress)
        except (DatabaseError, psycopg.Error):
            # The database's own text names tables and values: it goes to the log, not to the caller.
            logger.exception("the database refused an import")
            report.problems.append(Problem(None, None, DATABASE_REFUSED))
            report.created.clear()
            report.updated.clear()
            return report
        # What the database did: another import may have written some of the
        # same records meanwhile (a planned creation is then an update).
        report.created, report.updated = done.created, done.updated
        report.written = True
    if report.written:
        records_imported.send(sender=import_records, rows=report.changed)
    return report


def _parse(lines, report, progress, total_lines) -> tuple[list[_Parsed], dict[str, int]]:
    """The valid records, and the keys (with lines) of the invalid ones."""
    parsed: list[_Parsed] = []
    invalid: dict[str, int] = {}
    first_line_of: dict[str, int] = {}
    bar = progress("validating", total_lines)
    for number, line in enumerate(lines, start=1):
        bar.update(1)
        if not line.strip():
            continue
        record, problems = interchange.parse_line(line)
        if problems:
            key = _guess_key(line)
            report.problems.extend(Problem(number, key, message) for message in problems)
            if key:
                first_line_of.setdefault(key.upper(), number)
                invalid.setdefault(key.upper(), number)
            continue
        if (folded := record.key.upper()) in first_line_of:
            report.problems.append(
                Problem(number, record.key, f"the key is already used on line {first_line_of[folded]} (case aside)")
            )
            continue
        first_line_of[folded] = number
        parsed.append(_Parsed(number, record))
    bar.close()
    return parsed, invalid


def _guess_key(line: str | bytes) -> str | None:
    """The key of an invalid line, when one can be read, to make reports findable.
    Python's json reads what the validating parser refuses (a lone surrogate
    elsewhere in the line); a line nested deeper than the stack allows is a
    RecursionError to it, and has no key to show."""
    try:
        key = json.loads(line).get("key")
    except (ValueError, AttributeError, RecursionError):
        return None
    # Only a key that is text: it is echoed in the report (a lone surrogate is not, nor is NUL).
    return key if isinstance(key, str) and len(key) <= 64 and not SURROGATE.search(key) and "\x00" not in key else None


@dataclass
class _Stored:
    kind: str
    id: int
    key: str  # as stored (the file may write it in another case)
    product_id: int  # its product (a product's own id), for consistency and access


def stored_by_key(keys) -> dict[str, "_Stored"]:
    """The records already in the database under any of `keys`, of any kind
    and product, by their key in upper case (the importer's, and a sync's
    check of which keys it may write)."""
    found: dict[str, _Stored] = {}
    folded = list({key.upper() for key in keys})
    for kind, model in RECORD_MODELS.items():
        product = "id" if kind == "product" else "product_id"
        query = f"SELECT key, id, {product} FROM {model._meta.db_table} WHERE upper(key) = ANY(%s)"
        for key, pk, product_id in bulk.select_by_keys(query, folded):
            found[key.upper()] = _Stored(kind, pk, key, product_id)
    return found


def _resolve(
    parsed: list[_Parsed], invalid: dict[str, int], report: ImportReport, products: list[int] | None
) -> tuple[list[_Parsed], dict[str, _Stored]]:
    """Check keys and relations against the file and the database, within
    `products` (None: all; what the importing user may change).

    Returns the records that can be written, and what is stored under the
    keys the file uses or names (by key in upper case; records of other
    products left out, as if not stored). A record naming a record that was
    rejected is rejected too, so `skip_invalid` never writes a dangling
    relation.
    """
    in_file = {p.record.key.upper(): p for p in parsed}
    named = {key for p in parsed for key in p.record.relations().values()}
    stored = stored_by_key(set(in_file) | named)
    allowed = None if products is None else set(products)
    hidden = {key for key, s in stored.items() if allowed is not None and s.product_id not in allowed}

    rejected: set[str] = set()

    def reject(p: _Parsed, problem: str) -> None:
        report.problems.append(Problem(p.line, p.record.key, problem))
        rejected.add(p.record.key.upper())

    for p in parsed:
        folded = p.record.key.upper()
        other = stored.get(folded)
        if products is not None and p.record.kind == "product":
            if folded in hidden or other is None:  # whether the product exists or not: the same words
                reject(p, access.ADDS_PRODUCTS)
        elif folded in hidden or (other and other.kind != p.record.kind):
            # The same words for a record of another kind as for one the user may not see:
            # what holds a taken key is never told (docs/access.md), whoever imports.
            reject(p, key_taken_message(p.record.key).rstrip("."))
        elif other and other.key != p.record.key:
            reject(p, f"the key is stored as {other.key}; keys ignore case, so write it as {other.key}")
    for key in hidden:
        del stored[key]

    stored_product_keys = dict(
        Product.objects.filter(id__in={s.product_id for s in stored.values()}).values_list("id", "key")
    )

    def product_key_of(key: str) -> str | None:
        """The product of a feature or test, from the file or the database."""
        if key in in_file:
            return getattr(in_file[key].record, "product", None)
        if key in stored:
            return stored_product_keys.get(stored[key].product_id)
        return None

    for p in parsed:
        if p.record.key.upper() in rejected:
            continue
        for relation, target in p.record.relations().items():
            folded = target.upper()
            want = interchange.RELATION_KINDS[relation]
            have = (
                in_file[folded].record.kind
                if folded in in_file
                else (stored[folded].kind if folded in stored else None)
            )
            if folded in invalid:
                problem = f"it names {target}, which was rejected (line {invalid[folded]})"
            elif have is None:
                problem = f"{relation} {target} is neither in the file nor stored; import it first or fix the key"
            elif have != want:
                problem = f"{relation} {target} is a {have}, not a {want}"
            elif relation != "product" and (product_key_of(folded) or "").upper() != p.record.product.upper():
                problem = f"{relation} {target} belongs to product {product_key_of(folded)}, not {p.record.product}"
            else:
                continue
            reject(p, problem)

    # A bug moved to another product takes its stored duplicates along, or
    # stays: a link never crosses products (the file's duplicates of it are
    # checked above, with the product the file gives it).
    moved = {
        stored[folded].id: p
        for folded, p in in_file.items()
        if p.record.kind == "bug"
        and folded in stored
        and folded not in rejected
        and stored_product_keys.get(stored[folded].product_id, "").upper() != p.record.product.upper()
    }
    left_behind: dict[int, list[str]] = defaultdict(list)
    if moved:
        query = "SELECT key, duplicate_of_id FROM backlog_bug WHERE duplicate_of_id = ANY(%s) ORDER BY key"
        for key, original in bulk.select_by_keys(query, list(moved)):
            if key.upper() not in in_file:
                left_behind[original].append(key)
    for original, keys in left_behind.items():
        p = moved[original]
        listed = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        was = stored_product_keys[stored[p.record.key.upper()].product_id]
        reject(
            p,
            f"it moves to product {p.record.product}, but its duplicates {listed} stay in {was}; "
            "move them in the same file, or unlink them first",
        )

    for folded, circle in _circles(parsed, in_file, stored, rejected).items():
        p = in_file[folded]
        if len(circle) == 1:
            reject(p, f"duplicate_of {p.record.duplicate_of} is the bug itself; a bug cannot be its own duplicate")
        else:
            path = " → ".join([*circle, circle[0]])
            reject(
                p,
                f"duplicate_of {p.record.duplicate_of} makes a circle ({path}); "
                "a chain of duplicates must end at a bug that is no duplicate",
            )

    # Reject, transitively, what names a rejected record: each record once,
    # however long a chain of duplicates leads to it.
    named_by: dict[str, list[tuple[_Parsed, str]]] = defaultdict(list)
    for p in parsed:
        for target in p.record.relations().values():
            named_by[target.upper()].append((p, target))
    waiting = sorted(rejected)
    while waiting:
        folded = waiting.pop()
        for p, target in named_by.get(folded, ()):
            if p.record.key.upper() not in rejected:
                reject(p, f"it names {target}, which was rejected (line {in_file[folded].line})")
                waiting.append(p.record.key.upper())

    report.problems.sort(key=lambda problem: problem.line or 0)
    return [p for p in parsed if p.record.key.upper() not in rejected], stored


def _circles(
    parsed: list[_Parsed], in_file: dict[str, _Parsed], stored: dict[str, _Stored], rejected: set[str]
) -> dict[str, list[str]]:
    """The bugs of the file that would be duplicates of themselves once
    written: key (upper case) -> the keys of its circle, starting with its
    own. A chain follows the file's duplicate_of where the file has the bug,
    the stored one elsewhere, and stops at a rejected record (what names it
    is rejected anyway). Each bug is walked once."""
    targets = {p.record.duplicate_of.upper() for p in parsed if getattr(p.record, "duplicate_of", None)}
    starts = [stored[key].id for key in targets - set(in_file) if key in stored and stored[key].kind == "bug"]
    chains = bulk.duplicate_chains(starts) if starts else {}
    stored_next = {key.upper(): chains[target][0].upper() for key, target in chains.values() if target in chains}

    def written_as(key: str) -> str:
        return in_file[key].record.key if key in in_file else stored[key].key if key in stored else key

    def next_of(key: str) -> str | None:
        if key in in_file:
            target = None if key in rejected else getattr(in_file[key].record, "duplicate_of", None)
            return target and target.upper()
        return stored_next.get(key)

    circles: dict[str, list[str]] = {}
    walked: set[str] = set()
    for p in parsed:
        path: list[str] = []
        key = p.record.key.upper()
        while key is not None and key not in walked:
            walked.add(key)
            path.append(key)
            key = next_of(key)
        if key in path:  # came back to a bug of this walk
            circle = path[path.index(key) :]
            for at, member in enumerate(circle):
                if member in in_file:
                    circles[member] = [written_as(k) for k in circle[at:] + circle[:at]]
    return circles


@dataclass
class _Plan:
    writes: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    # Relations to records created in this same import, filled in by key
    # once those rows have ids (a bug's duplicate_of: see _write).
    pending: dict[str, list[tuple[dict, str, str]]] = field(default_factory=lambda: defaultdict(list))


def _plan(resolved: list[_Parsed], stored: dict[str, _Stored], report: ImportReport) -> _Plan:
    by_kind: dict[str, list[_Parsed]] = defaultdict(list)
    for p in resolved:
        by_kind[p.record.kind].append(p)

    ids = {key: s.id for key, s in stored.items()}
    now = timezone.now()
    plan = _Plan()

    for kind in KIND_ORDER:
        model = RECORD_MODELS[kind]
        records = by_kind.get(kind, [])
        current = _current_values(model, kind, [p.record.key for p in records])
        for p in records:
            values = _values(kind, p.record)
            before = current.get(p.record.key)
            if before is not None:
                content_same = all(
                    _same(name, before[name], values[name])
                    for name in FIELDS[kind]
                    if name not in ("created_at", "updated_at")
                )
                if p.record.created_at is None:
                    values["created_at"] = before["created_at"]
                if p.record.updated_at is None:
                    values["updated_at"] = before["updated_at"] if content_same else now
                if (
                    content_same
                    and values["created_at"] == before["created_at"]
                    and values["updated_at"] == before["updated_at"]
                ):
                    report.unchanged[kind] += 1
                    continue
                report.updated[kind] += 1
            else:
                values["created_at"] = values["created_at"] or now
                values["updated_at"] = values["updated_at"] or values["created_at"]
                report.created[kind] += 1
            row = {"key": p.record.key}
            for name in FIELDS[kind]:
                if name in RELATIONS:
                    target = values[name]
                    if target is None:
                        row[f"{name}_id"] = None
                    elif target.upper() in ids:
                        row[f"{name}_id"] = ids[target.upper()]
                    else:  # created earlier in this import; its id comes later
                        row[f"{name}_id"] = None
                        plan.pending[kind].append((row, name, target))
                else:
                    row[name] = values[name]
            plan.writes[kind].append(row)
    return plan


def _same(name: str, stored, given) -> bool:
    """Whether a field is unchanged; a relation's key is compared case aside."""
    if name in RELATIONS and isinstance(stored, str) and isinstance(given, str):
        return stored.upper() == given.upper()
    return stored == given


def _values(kind: str, record) -> dict:
    return {name: getattr(record, name) for name in FIELDS[kind]}


def _current_values(model, kind: str, keys: list[str]) -> dict[str, dict]:
    """Stored values of `keys`, with relations as keys, to compare with the file."""
    columns, joins = [], []
    for name in FIELDS[kind]:
        if name in RELATIONS:
            related = model._meta.get_field(name).related_model._meta.db_table
            joins.append(f"LEFT JOIN {related} r_{name} ON r_{name}.id = t.{name}_id")
            columns.append(f"r_{name}.key")
        else:
            columns.append(f"t.{name}")
    query = f"SELECT t.key, {', '.join(columns)} FROM {model._meta.db_table} t {' '.join(joins)} WHERE t.key = ANY(%s)"
    current = {}
    for key, *values in bulk.select_by_keys(query, keys):
        row = dict(zip(FIELDS[kind], values, strict=True))
        if "raw_data" in row:  # Django's connection hands jsonb over as text
            row["raw_data"] = json.loads(row["raw_data"])
        current[key] = row
    return current


def _write(plan: _Plan, progress: Progress) -> ImportReport:
    """Write the plan; what was created and updated, as the database did it."""
    done = ImportReport()
    written_ids: dict[str, int] = {}
    bar = progress("writing", sum(len(rows) for rows in plan.writes.values()))
    for kind in KIND_ORDER:
        rows = plan.writes.get(kind)
        if not rows:
            continue
        originals = {}  # a bug's key -> the key of the bug of this import it is a duplicate of
        for row, name, target in plan.pending.get(kind, ()):
            if name == "duplicate_of":
                originals[row["key"].upper()] = target.upper()
            else:
                row[f"{name}_id"] = written_ids[target.upper()]
        columns = list(rows[0])
        table = RECORD_MODELS[kind]._meta.db_table
        unlinked = []  # (key, original's key) of links whose original is not written yet
        for batch in _batches(rows, BATCH_SIZE):
            for row in batch:
                if (original := originals.get(row["key"].upper())) is None:
                    continue
                if original in written_ids:
                    row["duplicate_of_id"] = written_ids[original]
                else:
                    unlinked.append((row["key"].upper(), original))
            written = bulk.upsert(table, columns, (row.values() for row in batch), json_columns=("raw_data",))
            written_ids.update((key.upper(), pk) for key, (pk, _) in written.items())
            inserted = sum(new for _, new in written.values())
            done.created[kind] += inserted
            done.updated[kind] += len(written) - inserted
            bar.update(len(batch))
        # Links to an original later in the file (or in the same batch): a
        # second statement, once every bug has its id. Rows are written in the
        # file's order, so ids, and the order of an export, follow the file.
        for batch in _batches(unlinked, BATCH_SIZE):
            bulk.set_links(table, "duplicate_of_id", [(written_ids[key], written_ids[to]) for key, to in batch])
    bar.close()
    done.created, done.updated = +done.created, +done.updated  # without the kinds at 0
    return done


def _batches(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


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
