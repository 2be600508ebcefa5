"""Fields in a `simple` query: `severity:critical status:open product:PRD-1 updated:<7d crash`.

A power user types filters into the query instead of choosing them: each
`name:value` of a known field (FIELDS) is taken out of the text before its
words are read (search.query.parse), and becomes a filter on top of the request's
own (`severity`, `status`, `products`, ...): the two only narrow, so a field
and a parameter on the same thing keep what both allow. What is left is
searched as words; a query of fields alone lists the records they keep,
newest first (search.ranking.browse). `raw` mode reads no fields, and nor
does a pasted stack trace (search.query.traces): its `status:500` is a log's.

- Several values of one field, comma-separated or repeated
  (`status:open,accepted`, `status:open status:accepted`), are alternatives;
  different fields must all hold. `-status:fixed` leaves those records out.
- Names and values are read case-insensitively. `product:` and `feature:`
  take a key or a name (`product:"Tramline Mobile"`), among the records the
  user may see; `kind:` takes bug(s), test(s), feature(s), product(s).
- `created:` and `updated:` take a day (2025-01-31), a month (2025-01), a
  year (2025) or an ISO time, with `>`, `>=`, `<`, `<=`, or a range
  (`2025-01-01..2025-03-31`, either end may be `*`), or an age: `<7d` is
  "less than 7 days old", `>1y` "older than a year" (h, d, w, m = 30 days,
  y = 365 days); a bare age (`7d`) means within it.
- Anything else with a colon (`foo:bar`, `http://...`, `10:30`) stays words,
  and so does a field inside a quoted phrase. A value a field cannot take is
  a SearchError naming the values it can.

Every field read is echoed in the response (`filters`, contract.QueryFilter)
with the token as typed, so a client can show it and drop it by taking the
token out of the query.
"""

import re
from calendar import monthrange
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from backlog.models import BugStatus, Severity, TestStatus
from backlog.text import one_of
from search.contract import QueryFilter, SearchError
from search.models import Kind
from search.query import filters, traces
from search.query.scope import Scope, named_keys, not_named

# A field, a quoted phrase (whose words stay words, colons and all), or any other word.
_PIECE = re.compile(r'(?P<field>(?P<negated>-?)(?P<name>[A-Za-z]+):(?P<value>"[^"]*"|[^\s"]+))(?=\s|$)|-?"[^"]*"?|\S+')
KINDS = {
    **{kind: kind for kind in Kind.values},
    **{kind + "s": kind for kind in Kind.values},
    "testcase": "test",
    "testcases": "test",
}
STATUSES = tuple(BugStatus.values + TestStatus.values)
SEVERITIES = tuple(Severity.values)
# field name -> the request parameter it sets (dates set two: name_after, name_before)
FIELDS = {spec.field: spec.param if spec.kind in ("token", "key") else spec.field for spec in filters.FILTERS.values()}

_AGE = re.compile(r"^(\d{1,5})([hdwmy])$")
_AGE_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_AGE_UNITS |= {"m": timedelta(days=30), "y": timedelta(days=365)}
_COMPARISON = re.compile(r"^(>=|<=|>|<)?(.+)$")
DATE_HELP = (
    "give a day (2025-01-31), a month (2025-01), a year, an ISO time, with >, >=, <, <= or as a range "
    "(2025-01-01..2025-03-31), or an age (<7d: less than 7 days old; h, d, w, m, y)"
)


@dataclass
class Fielded:
    """A query with its fields taken out: the words left, and the filters."""

    text: str
    filters: list[QueryFilter] = field(default_factory=list)

    def narrowed(self, scope: Scope) -> Scope:
        """`scope` and every filter: values of one field are alternatives, fields all hold."""
        chosen: dict[tuple[str, bool], list[str]] = {}
        for item in self.filters:
            values = chosen.setdefault((item.param, item.exclude), [])
            values.extend(value for value in item.values if value not in values)
        return filters.narrowed(scope, chosen, "scope_field")

    def with_words(self, words: str) -> str:
        """The query with `words` in place of its words (a corrected query): the fields after them."""
        tokens = list(dict.fromkeys(item.token for item in self.filters))
        return " ".join([words, *tokens]) if words else " ".join(tokens)


def read(query: str, match_mode: str, products: tuple[int, ...] | None, now: datetime | None = None) -> Fielded:
    """Take the fields out of `query`; `products`: those the user may see (None: all)."""
    if match_mode != "simple" or traces.read(query):
        return Fielded(query)
    now = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
    words, filters = [], []
    for piece in _PIECE.finditer(query):
        name = (piece["name"] or "").lower()
        if name not in FIELDS:
            words.append(piece[0])
            continue
        token, value, exclude = piece["field"], piece["value"], bool(piece["negated"])
        quoted = value.startswith('"')
        values = [value.strip('"').strip()] if quoted else [part for part in value.split(",") if part]
        values = [value for value in values if value]
        if not values:
            words.append(token)
            continue
        if name in ("created", "updated"):
            if exclude:
                raise _refused(token, f"a date cannot be excluded; turn it round ({name}:< for {name}:>)")
            if len(values) > 1:
                raise _refused(token, f"give one date or a range ({name}:2025-01-01..2025-03-31), not a list")
            try:
                filters += _dates(token, name, values[0], now)
            except OverflowError:
                raise _refused(token, f"the date is out of range; {DATE_HELP}") from None
        else:
            param = FIELDS[name]
            filters.append(
                QueryFilter(token=token, param=param, values=_values(token, name, values, products), exclude=exclude)
            )
    # Without fields the query stays exactly as sent.
    return Fielded(" ".join(words), filters) if filters else Fielded(query)


def _refused(token: str, why: str) -> SearchError:
    return SearchError(f"query: {token}: {why}.")


def _values(token: str, name: str, values: list[str], products) -> list[str]:
    if name == "product":
        return _keys(token, "product", values, products)
    if name == "feature":
        return _keys(token, "feature", values, products)
    allowed = {"kind": KINDS, "status": STATUSES, "severity": SEVERITIES}[name]
    named = {"kind": Kind.values}.get(name, allowed)
    chosen = []
    for value in values:
        lower = value.lower()
        if lower not in allowed:
            raise _refused(token, f'"{value}" is not one of {one_of(named)}')
        chosen.append(KINDS[lower] if name == "kind" else lower)
    return list(dict.fromkeys(chosen))


def _keys(token: str, kind: str, values: list[str], products) -> list[str]:
    """The keys of the products or features named by key or name (either case) that the user may see."""
    keys, unknown = named_keys(kind, values, products)
    if unknown is not None:
        raise _refused(token, not_named(kind, unknown, products))
    return keys


# -- dates -----------------------------------------------------------------------------------


def _dates(token: str, name: str, value: str, now: datetime) -> list[QueryFilter]:
    """The created_/updated_ after and before that one date, comparison, range or age sets."""
    after, before = [], []
    if ".." in value:
        start, _, end = value.partition("..")
        low = _bounds(token, start, now)[0] if start not in ("", "*") else None
        high = _bounds(token, end, now)[1] if end not in ("", "*") else None
        if low and high and low > high:
            raise _refused(token, f"the range starts after it ends; {DATE_HELP}")
        after += [low] if low else []
        before += [high] if high else []
    else:
        operator, text = _COMPARISON.match(value).groups()
        start, end, age = _bounds(token, text, now)
        if age:  # an age compares how old: <7d is newer than 7 days ago
            (before if operator in (">", ">=") else after).append(start)
        elif operator == ">":
            after.append(end + timedelta(microseconds=1))
        elif operator == ">=":
            after.append(start)
        elif operator == "<":
            before.append(start - timedelta(microseconds=1))
        elif operator == "<=":
            before.append(end)
        else:
            after.append(start)
            before.append(end)
    return [
        QueryFilter(token=token, param=f"{name}_{side}", values=[_iso(time) for time in times])
        for side, times in (("after", after), ("before", before))
        if times
    ]


def _bounds(token: str, text: str, now: datetime) -> tuple[datetime, datetime, bool]:
    """The first and last instant `text` names, and whether it is an age."""
    if age := _AGE.match(text.lower()):
        count, unit = age.groups()
        try:
            instant = now - int(count) * _AGE_UNITS[unit]
        except OverflowError:
            raise _refused(token, f'"{text}" reaches back before year 1; {DATE_HELP}') from None
        return instant, instant, True
    try:
        if re.fullmatch(r"\d{4}", text):
            start = datetime(int(text), 1, 1, tzinfo=UTC)
            return start, _last_instant(start.replace(month=12, day=31)), False
        if re.fullmatch(r"\d{4}-\d{2}", text):
            start = datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC)
            return start, _last_instant(start.replace(day=monthrange(start.year, start.month)[1])), False
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            start = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
            return start, _last_instant(start), False
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}T[0-9:.]+(Z|[+-]\d{2}:?\d{2})?", text, re.IGNORECASE):
            instant = datetime.fromisoformat(text.upper())
            instant = (instant if instant.tzinfo else instant.replace(tzinfo=UTC)).astimezone(UTC)
            return instant, instant, False
    except (ValueError, OverflowError):
        pass
    raise _refused(token, f'"{text}" is not a date; {DATE_HELP}')


def _last_instant(day: datetime) -> datetime:
    return day.replace(hour=23, minute=59, second=59, microsecond=999999)


def _iso(time: datetime) -> str:
    return time.isoformat().replace("+00:00", "Z")
