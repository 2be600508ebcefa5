"""Judged query sets: the folder format (shared FORMAT.md, "Judged query sets"), read and checked,
or built from a database's own duplicate links."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import get_args

from search.contract import Kind

QUERY_FIELDS = {"id", "query", "similar_to", "entities", "exclude"}


class JudgedSetError(ValueError):
    """The folder is not a valid judged set; the message names the file and line."""


class QueryFailed(Exception):
    """The ranking could not answer a query; it counts as an empty result list."""


@dataclass(frozen=True)
class Query:
    id: str
    text: str | None = None
    similar_to: str | None = None
    entities: list[str] | None = None
    exclude: frozenset[str] = frozenset()
    # Ranked among the records created before this moment only (a team's own links: never the future).
    before: datetime | None = None


@dataclass
class JudgedSet:
    name: str
    records: list[bytes]  # the lines of records.jsonl, for import_records
    queries: list[Query]
    grades: dict[str, dict[str, int]]  # query id -> record key -> grade
    types: dict[str, str] = field(default_factory=dict)  # query id -> type

    def is_judged(self, query: Query) -> bool:
        return any(grade >= 1 for grade in self.grades.get(query.id, {}).values())

    def first(self, count: int) -> "JudgedSet":
        return replace(self, queries=self.queries[:count])


LINKED_BUGS_SQL = """
    SELECT b.id, b.key, b.title, b.created_at FROM backlog_bug b JOIN backlog_product p ON p.id = b.product_id
    WHERE b.duplicate_of_id IS NOT NULL AND (%(products)s::text[] IS NULL OR p.key = ANY(%(products)s))
    ORDER BY b.id
"""


def judged_set_from_links(products: list[str] | None = None) -> JudgedSet:
    """A judged set from the database's own duplicate links (search_eval
    --from-links), time-ordered as a team met them: each bug linked as a
    duplicate is a query, its title the text, ranked among the records
    created before it; relevant, the bugs of its cluster (the original its
    links lead to and that one's other duplicates) filed before it. A bug
    filed before every other of its cluster asks nothing (its duplicate came
    later) and is left out. Only bugs of `products` (keys) are queries, when
    given."""
    from django.db import connection

    from backlog.bulk import duplicate_chains

    with connection.cursor() as cursor:
        cursor.execute(LINKED_BUGS_SQL, {"products": products})
        linked = cursor.fetchall()
    links = duplicate_chains([row[0] for row in linked])  # id -> (key, the id it duplicates)

    def root(pk: int) -> str:
        """The key of the bug the chain from `pk` ends at (where it repeats, on a stored circle)."""
        seen = set()
        while links[pk][1] in links and pk not in seen:
            seen.add(pk)
            pk = links[pk][1]
        return links[pk][0]

    rows = [(key, title, created, root(pk)) for pk, key, title, created in linked]
    clusters: dict[str, set[str]] = {}
    for key, _, _, original in rows:
        clusters.setdefault(original, {original}).add(key)
    filed = _created({key for members in clusters.values() for key in members})
    queries, grades, types = [], {}, {}
    for key, title, created, original in rows:
        earlier = {other: 1 for other in clusters[original] if other != key and filed.get(other, created) < created}
        if not earlier:
            continue
        query = Query(f"link-{key}", title, exclude=frozenset({key}), before=created)
        queries.append(query)
        grades[query.id] = earlier
        types[query.id] = "title"
    name = "duplicate links" + (f" of {', '.join(products)}" if products else "")
    return JudgedSet(name, [], queries, grades, types)


def _created(keys: set[str]) -> dict[str, datetime]:
    from backlog.models import Bug

    return dict(Bug.objects.filter(key__in=keys).values_list("key", "created_at"))


def load_judged_set(path: str | Path) -> JudgedSet:
    folder = Path(path)
    if not folder.is_dir():
        raise JudgedSetError(f"{folder}: no such folder")
    records, keys = [], set()
    for number, line in _lines(folder / "records.jsonl"):
        keys.add(_json_object(folder / "records.jsonl", number, line).get("key"))
        records.append(line.encode())

    queries = [
        _query(folder / "queries.jsonl", number, line, keys) for number, line in _lines(folder / "queries.jsonl")
    ]
    ids = {query.id for query in queries}
    if len(ids) < len(queries):
        raise JudgedSetError(f"{folder / 'queries.jsonl'}: query ids must be unique")

    grades: dict[str, dict[str, int]] = {}
    qrels = folder / "qrels.tsv"
    for number, (query_id, key, grade) in _tsv(qrels, "query_id<TAB>record_key<TAB>grade", ids):
        if key not in keys:
            raise JudgedSetError(f"{qrels} line {number}: {key} is not in records.jsonl")
        if grade not in ("0", "1", "2", "3"):
            raise JudgedSetError(f"{qrels} line {number}: the grade must be 0, 1, 2 or 3, not {grade!r}")
        if key in grades.setdefault(query_id, {}):
            raise JudgedSetError(f"{qrels} line {number}: {query_id} judges {key} twice")
        grades[query_id][key] = int(grade)

    types = {}
    if (folder / "query_types.tsv").exists():
        types = dict(row for _, row in _tsv(folder / "query_types.tsv", "query_id<TAB>type", ids))
    return JudgedSet(folder.resolve().name, records, queries, grades, types)


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    """The non-blank lines of a UTF-8 file, numbered from 1."""
    if not path.is_file():
        raise JudgedSetError(f"{path}: no such file")
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if line.strip():
                yield number, line.rstrip("\r\n")


def _json_object(path: Path, number: int, line: str) -> dict:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise JudgedSetError(f"{path} line {number}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise JudgedSetError(f"{path} line {number}: expected a JSON object")
    return data


def _query(path: Path, number: int, line: str, keys: set[str]) -> Query:
    data = _json_object(path, number, line)

    def fail(message: str):
        raise JudgedSetError(f"{path} line {number}: {message}")

    if unknown := set(data) - QUERY_FIELDS:
        fail(f"unknown field(s) {', '.join(sorted(unknown))}; expected {', '.join(sorted(QUERY_FIELDS))}")
    if not isinstance(data.get("id"), str) or not data["id"]:
        fail('"id" must be a non-empty string')
    if ("query" in data) == ("similar_to" in data) or not isinstance(data.get("query", data.get("similar_to")), str):
        fail('give exactly one of "query" (text) and "similar_to" (a record key)')
    if "similar_to" in data and data["similar_to"] not in keys:
        fail(f"similar_to {data['similar_to']} is not in records.jsonl")
    entities = data.get("entities")
    if entities is not None and not (isinstance(entities, list) and set(entities) <= set(get_args(Kind))):
        fail(f'"entities" must be a list of {", ".join(get_args(Kind))}')
    exclude = data.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(key, str) for key in exclude):
        fail('"exclude" must be a list of record keys')
    return Query(data["id"], data.get("query"), data.get("similar_to"), entities, frozenset(exclude))


def _tsv(path: Path, layout: str, query_ids: set[str]) -> Iterable[tuple[int, list[str]]]:
    """Numbered rows of a TSV file whose first column is a query id."""
    columns = layout.count("<TAB>") + 1
    for number, line in _lines(path):
        row = line.split("\t")
        if len(row) != columns or not all(row):
            raise JudgedSetError(f"{path} line {number}: expected {layout}, got {line!r}")
        if row[0] not in query_ids:
            raise JudgedSetError(f"{path} line {number}: query {row[0]} is not in queries.jsonl")
        yield number, row
