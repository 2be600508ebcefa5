"""Import of records: validate a whole file, then write it in one transaction.

`import_records` validates a whole file first and reports every problem with
its line number (the keys and relations against the database: backlog.keys);
only then does it write, in one transaction, upserting by key and touching
only records that differ from what is stored. Re-importing the same file
therefore changes nothing. backlog.exports writes the same format back.
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

from . import access, bulk, interchange, keys
from .bulk import BATCH_SIZE
from .interchange import FIELDS, KIND_ORDER, RELATIONS, Parsed, Problem
from .keys import Stored
from .models import RECORD_MODELS
from .signals import records_imported
from .text import SURROGATE

logger = logging.getLogger(__name__)


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
        resolved, stored = keys.check(parsed, invalid, report.problems, access.visible_product_ids(user))
        report.problems.sort(key=lambda problem: problem.line or 0)
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


def _parse(lines, report, progress, total_lines) -> tuple[list[Parsed], dict[str, int]]:
    """The valid records, and the keys (with lines) of the invalid ones."""
    parsed: list[Parsed] = []
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
        parsed.append(Parsed(number, record))
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
class _Plan:
    writes: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    # Relations to records created in this same import, filled in by key
    # once those rows have ids (a bug's duplicate_of: see _write).
    pending: dict[str, list[tuple[dict, str, str]]] = field(default_factory=lambda: defaultdict(list))


def _plan(resolved: list[Parsed], stored: dict[str, Stored], report: ImportReport) -> _Plan:
    by_kind: dict[str, list[Parsed]] = defaultdict(list)
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


def _current_values(model, kind: str, record_keys: list[str]) -> dict[str, dict]:
    """Stored values of `record_keys`, with relations as keys, to compare with the file."""
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
    for key, *values in bulk.select_by_keys(query, record_keys):
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
