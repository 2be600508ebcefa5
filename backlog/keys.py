"""Keys: what is stored under them, and whether a file's keys and relations may be written.

Keys are compared case aside, as everywhere. An import made for a user
(the REST endpoint) writes only into the products that user may change
(backlog.access): a record of another product is "not stored" to them, and
a key that such a record holds is "taken", the words a key that exists
nowhere would never get, and nothing more. A key a record of another kind
holds is "taken" in the same words, naming no kind, for every importer.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from . import access, bulk, interchange
from .interchange import Parsed, Problem
from .models import RECORD_MODELS, Product, key_taken_message


@dataclass
class Stored:
    kind: str
    id: int
    key: str  # as stored (the file may write it in another case)
    product_id: int  # its product (a product's own id), for consistency and access


def stored_by_key(keys) -> dict[str, Stored]:
    """The records already in the database under any of `keys`, of any kind
    and product, by their key in upper case (the importer's, and a sync's
    check of which keys it may write)."""
    found: dict[str, Stored] = {}
    folded = list({key.upper() for key in keys})
    for kind, model in RECORD_MODELS.items():
        product = "id" if kind == "product" else "product_id"
        query = f"SELECT key, id, {product} FROM {model._meta.db_table} WHERE upper(key) = ANY(%s)"
        for key, pk, product_id in bulk.select_by_keys(query, folded):
            found[key.upper()] = Stored(kind, pk, key, product_id)
    return found


def check(
    parsed: list[Parsed], invalid: dict[str, int], problems: list[Problem], products: list[int] | None
) -> tuple[list[Parsed], dict[str, Stored]]:
    """Check keys and relations against the file and the database, within
    `products` (None: all; what the importing user may change), adding
    what is wrong to `problems`.

    Returns the records that can be written, and what is stored under the
    keys the file uses or names (by key in upper case; records of other
    products left out, as if not stored). A record naming a record that was
    rejected is rejected too, so `skip_invalid` never writes a dangling
    relation.
    """
    in_file = {p.record.key.upper(): p for p in parsed}
    named = {key for p in parsed for key in p.record.relations().values()}
    found = _Check(parsed, in_file, stored_by_key(set(in_file) | named), invalid, problems)
    found.own_keys(products)
    found.relations()
    found.moved_bugs()
    found.circles()
    found.what_names_the_rejected()
    return [p for p in parsed if p.record.key.upper() not in found.rejected], found.stored


@dataclass
class _Check:
    """One file's records against what is stored: each step rejects some, saying why."""

    parsed: list[Parsed]
    in_file: dict[str, Parsed]  # by key in upper case
    stored: dict[str, Stored]  # by key in upper case
    invalid: dict[str, int]  # the keys of invalid lines, and their line
    problems: list[Problem]
    rejected: set[str] = field(default_factory=set)
    product_keys: dict[int, str] = field(default_factory=dict)  # a stored record's product id -> its key

    def reject(self, p: Parsed, problem: str) -> None:
        self.problems.append(Problem(p.line, p.record.key, problem))
        self.rejected.add(p.record.key.upper())

    def own_keys(self, products: list[int] | None) -> None:
        """Each record's own key: not held by a record the user may not see or
        of another kind, and spelled as stored. Then what the user may not see
        is left out of `stored`."""
        allowed = None if products is None else set(products)
        hidden = {key for key, s in self.stored.items() if allowed is not None and s.product_id not in allowed}
        for p in self.parsed:
            folded = p.record.key.upper()
            other = self.stored.get(folded)
            if products is not None and p.record.kind == "product":
                if folded in hidden or other is None:  # whether the product exists or not: the same words
                    self.reject(p, access.ADDS_PRODUCTS)
            elif folded in hidden or (other and other.kind != p.record.kind):
                # The same words for a record of another kind as for one the user may not see:
                # what holds a taken key is never told (docs/access.md), whoever imports.
                self.reject(p, key_taken_message(p.record.key).rstrip("."))
            elif other and other.key != p.record.key:
                self.reject(p, f"the key is stored as {other.key}; keys ignore case, so write it as {other.key}")
        for key in hidden:
            del self.stored[key]
        self.product_keys = dict(
            Product.objects.filter(id__in={s.product_id for s in self.stored.values()}).values_list("id", "key")
        )

    def product_key_of(self, key: str) -> str | None:
        """The product of a feature or test, from the file or the database."""
        if key in self.in_file:
            return getattr(self.in_file[key].record, "product", None)
        if key in self.stored:
            return self.product_keys.get(self.stored[key].product_id)
        return None

    def relations(self) -> None:
        """What each record names: valid, in the file or stored, of the right
        kind, and of the record's own product."""
        for p in self.parsed:
            if p.record.key.upper() in self.rejected:
                continue
            for relation, target in p.record.relations().items():
                if problem := self._relation_problem(p, relation, target):
                    self.reject(p, problem)

    def _relation_problem(self, p: Parsed, relation: str, target: str) -> str | None:
        folded = target.upper()
        want = interchange.RELATION_KINDS[relation]
        have = (
            self.in_file[folded].record.kind
            if folded in self.in_file
            else (self.stored[folded].kind if folded in self.stored else None)
        )
        if folded in self.invalid:
            return f"it names {target}, which was rejected (line {self.invalid[folded]})"
        if have is None:
            return f"{relation} {target} is neither in the file nor stored; import it first or fix the key"
        if have != want:
            return f"{relation} {target} is a {have}, not a {want}"
        if relation != "product" and (self.product_key_of(folded) or "").upper() != p.record.product.upper():
            return f"{relation} {target} belongs to product {self.product_key_of(folded)}, not {p.record.product}"
        return None

    def moved_bugs(self) -> None:
        """A bug moved to another product takes its stored duplicates along, or
        stays: a link never crosses products (the file's duplicates of it are
        checked by `relations`, with the product the file gives it)."""
        moved = {
            self.stored[folded].id: p
            for folded, p in self.in_file.items()
            if p.record.kind == "bug"
            and folded in self.stored
            and folded not in self.rejected
            and self.product_keys.get(self.stored[folded].product_id, "").upper() != p.record.product.upper()
        }
        left_behind: dict[int, list[str]] = defaultdict(list)
        if moved:
            query = "SELECT key, duplicate_of_id FROM backlog_bug WHERE duplicate_of_id = ANY(%s) ORDER BY key"
            for key, original in bulk.select_by_keys(query, list(moved)):
                if key.upper() not in self.in_file:
                    left_behind[original].append(key)
        for original, keys in left_behind.items():
            p = moved[original]
            listed = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
            was = self.product_keys[self.stored[p.record.key.upper()].product_id]
            self.reject(
                p,
                f"it moves to product {p.record.product}, but its duplicates {listed} stay in {was}; "
                "move them in the same file, or unlink them first",
            )

    def circles(self) -> None:
        """No bug ends up a duplicate of itself, directly or along a chain."""
        for folded, circle in _circles(self.parsed, self.in_file, self.stored, self.rejected).items():
            p = self.in_file[folded]
            if len(circle) == 1:
                self.reject(
                    p, f"duplicate_of {p.record.duplicate_of} is the bug itself; a bug cannot be its own duplicate"
                )
            else:
                path = " → ".join([*circle, circle[0]])
                self.reject(
                    p,
                    f"duplicate_of {p.record.duplicate_of} makes a circle ({path}); "
                    "a chain of duplicates must end at a bug that is no duplicate",
                )

    def what_names_the_rejected(self) -> None:
        """Reject, transitively, what names a rejected record: each record once,
        however long a chain of duplicates leads to it."""
        named_by: dict[str, list[tuple[Parsed, str]]] = defaultdict(list)
        for p in self.parsed:
            for target in p.record.relations().values():
                named_by[target.upper()].append((p, target))
        waiting = sorted(self.rejected)
        while waiting:
            folded = waiting.pop()
            for p, target in named_by.get(folded, ()):
                if p.record.key.upper() not in self.rejected:
                    self.reject(p, f"it names {target}, which was rejected (line {self.in_file[folded].line})")
                    waiting.append(p.record.key.upper())


def _circles(
    parsed: list[Parsed], in_file: dict[str, Parsed], stored: dict[str, Stored], rejected: set[str]
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
