"""From what the user typed to PostgreSQL tsqueries.

`simple` mode reads web-search syntax ("quoted phrase", `or`, `-exclusion`),
like `websearch_to_tsquery`, but keeps each positive term apart so that the
ranking can weigh rare terms above common ones, relax AND to OR when AND
finds little, and treat the last word as a prefix (`checko` finds
`checkout`) while the user is still typing. `raw` mode is PostgreSQL's
tsquery syntax, checked by PostgreSQL itself. A pasted stack trace is
neither: `simple` mode reads it as words (search.query.traces), never as
syntax, and searches its exception, message and top frames.

PostgreSQL does the stemming and stop words: every term is turned into a
tsquery by `plainto_tsquery` / `phraseto_tsquery` / `to_tsquery` in one
round trip, so the query uses exactly the dictionary that built the index,
after the same word splitting (search_words, search_word_parts in sql.py).
"""

import re
from dataclasses import dataclass, field, replace

from django.db import DatabaseError

from search import db
from search.indexing.sql import TEXT_SEARCH_CONFIG
from search.query import traces
from search.ranking import config

CONFIG = TEXT_SEARCH_CONFIG
_TOKEN = re.compile(r'-?"[^"]*"?|\S+')
_PREFIXABLE = re.compile(r"^\w{2,}$")
# What plainto_tsquery makes of one compound word (spotbugs-maven-plugin,
# CVE-2019-20444) once split into words: its lexemes joined by AND.
_COMPOUND = re.compile(r"^'(?:[^']|'')*'(?: & '(?:[^']|'')*')+$")
_LEXEME = re.compile(r"'(?:[^']|'')*'")


class QuerySyntaxError(ValueError):
    """The query cannot be understood; the message says how to fix it."""


@dataclass
class Term:
    text: str  # as typed, for display and typo correction
    tsquery: str = ""  # as PostgreSQL normalized it; "" for a stop word
    # The parts of a camel-case word (BouncyCastle: 'bounci' & 'castl'),
    # which the index holds next to the whole word (search_word_parts).
    parts: str = ""
    # For the last word, read as a prefix too: the word alone, without the
    # prefix ("" otherwise). See ParsedQuery.settle_prefix.
    whole: str = ""
    # Its idf is multiplied by this in the keyword score: 1 but in a pasted trace,
    # whose platform frames weigh less (search.query.traces.Trace.weights).
    weight: float = 1.0

    @property
    def shown(self) -> str:
        """The word as a record may hold it, for a `why`: the piece of what was typed that
        this term's one lexeme was made from (`Distance` of sortsStopsByDistance, `days` of
        "days;"); as typed when its lexemes are several or none is a piece's stem."""
        lexemes = _LEXEME.findall(self.tsquery)
        if len(lexemes) != 1:
            return self.text
        return piece_of(self.text, lexemes[0][1:-1].replace("''", "'")) or self.text

    @property
    def match(self) -> str:
        """What a record must contain to match this term: its words, or,
        for a camel-case word, the words it is made of (`BouncyCastle`
        finds "Bouncy Castle")."""
        return f"({self.tsquery}) | ({self.parts})" if self.parts else self.tsquery


_RUNS = re.compile(r"\w+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def piece_of(text: str, lexeme: str) -> str | None:
    """The part of `text` whose stem `lexeme` is: a camel-case piece first, then a run of
    letters and digits, then the whole without its punctuation; None when none begins with it."""
    runs = _RUNS.findall(text)
    for candidate in [*(piece for run in runs for piece in _CAMEL.findall(run)), *runs, text.strip(".,;:!?()[]{}\"'")]:
        if candidate.lower().startswith(lexeme):
            return candidate
    return None


def distinct_words(words) -> list[str]:
    """`words` once each, in order, without those a longer one holds (`array` beside
    `NegativeArraySizeException`: a compound's parts say nothing its whole does not)."""
    unique = list(dict.fromkeys(words))
    return [w for w in unique if not any(w != other and w.lower() in other.lower() for other in unique)]


@dataclass
class ParsedQuery:
    text: str
    # Positive terms grouped by `or`: [[a], [b, c]] means a AND (b OR c).
    groups: list[list[Term]] = field(default_factory=list)
    excluded: list[Term] = field(default_factory=list)
    raw: str | None = None  # raw mode: the whole tsquery
    # A pasted stack trace (search.query.traces): `text` is what it asks, in words.
    trace: bool = False

    @property
    def terms(self) -> list[Term]:
        return [term for group in self.groups for term in group if term.tsquery]

    @property
    def units(self) -> list[Term]:
        """The terms that rank, each weighed by its own rarity: a compound
        word counts as its lexemes (`spotbugs-maven-plugin` as spotbug,
        maven and plugin; `BouncyCastle` as bouncycastl, bounci and castl),
        so a record that says "spotbugs maven plugin" shares all three.
        Matching all of a query (`all_of`) still needs every lexeme. A
        unit several terms share weighs as the weightiest of them."""
        units: dict[str, Term] = {}
        for term in self.terms:
            if _COMPOUND.match(term.tsquery) or term.parts:
                pieces = [
                    (lexeme, Term(text=term.text, tsquery=lexeme, weight=term.weight))
                    for lexeme in _LEXEME.findall(term.tsquery) + _LEXEME.findall(term.parts)
                ]
            else:
                pieces = [(term.tsquery, term)]
            for key, unit in pieces:
                if key not in units:
                    units[key] = unit
                elif unit.weight > units[key].weight:
                    units[key] = replace(units[key], weight=unit.weight)
        return list(units.values())

    def settle_prefix(self, df: dict[str, float], enough: float) -> None:
        """Read the last word as typed when, as a whole word, it already
        matches `enough` records: its completions would only compete for
        the places it fills, and a common prefix is costly to expand
        (`fail:*` reads every word that starts with fail). A rarer word
        stays a prefix too, so `checko` finds checkout."""
        for term in self.terms:
            if term.whole and df.get(term.whole, 0) >= enough:
                term.tsquery, term.whole = term.whole, ""

    def all_of(self) -> str:
        """Every group must match (AND), none of the exclusions."""
        if self.raw is not None:
            return self.raw
        parts = [_any(group) for group in self.groups]
        parts = [part for part in parts if part]
        parts += [f"!({term.tsquery})" for term in self.excluded if term.tsquery]
        return " & ".join(f"({part})" for part in parts)

    def any_of(self) -> str:
        """Any positive term may match (OR), none of the exclusions."""
        if self.raw is not None:
            return self.raw
        positive = _any(self.units)
        if not positive:
            return ""
        excluded = [f"!({term.tsquery})" for term in self.excluded if term.tsquery]
        return " & ".join([f"({positive})", *excluded])


def _any(terms: list[Term]) -> str:
    return " | ".join(f"({term.match})" for term in terms if term.tsquery)


def parse(text: str, match_mode: str) -> ParsedQuery:
    if match_mode == "raw":
        return ParsedQuery(text=text, raw=_normalize_raw(text))
    if trace := traces.read(text):
        return _trace_query(trace)
    query = ParsedQuery(text=text)
    tokens = _TOKEN.findall(text)
    joined = False  # the previous token was `or`
    last_positive: Term | None = None
    last_kind = None
    for position, token in enumerate(tokens):
        if token.lower() == "or" and query.groups and position < len(tokens) - 1:
            joined = True
            continue
        negative = token.startswith("-") and len(token) > 1
        body = token[1:] if negative else token
        phrase = body.startswith('"')
        body = body.strip('"').strip()
        if not body:
            continue
        term = Term(text=body)
        if negative:
            query.excluded.append(term)
            last_positive = None
            continue
        if joined:
            query.groups[-1].append(term)
        else:
            query.groups.append([term])
        joined = False
        last_positive, last_kind = term, ("phrase" if phrase else "word")
    ends_in_space = text != text.rstrip()
    _normalize(query, prefix=last_positive if last_kind == "word" and not ends_in_space else None)
    return query


def _trace_query(trace: traces.Trace) -> ParsedQuery:
    """A trace's words, any of which may match, the rarest ranking first: no
    record holds all of a long trace but the one it came from. The platform's
    frames weigh less (the ranking constant trace_platform_weight)."""
    weights = trace.weights(platform=config.current().trace_platform_weight)
    terms = [Term(text=word, weight=weight) for word, weight in weights.items()]
    query = ParsedQuery(text=trace.text, groups=[terms], trace=True)
    _normalize(query, prefix=None)
    return query


def _normalize(query: ParsedQuery, prefix: Term | None) -> None:
    """Let PostgreSQL turn each term into a tsquery (stemmed, stop words out)."""
    terms = [term for group in query.groups for term in group] + query.excluded
    if not terms:
        return
    expressions, params = [], []
    for term in terms:
        whole = "''"  # the word alone, when it is also read as a prefix
        if term is prefix and _PREFIXABLE.match(term.text):
            # The word as typed, and as a prefix: "checko" finds "checkout".
            expressions.append(f"(plainto_tsquery('{CONFIG}', search_words(%s)) || to_tsquery('{CONFIG}', %s))::text")
            params += [term.text, term.text.lower() + ":*"]
            whole = f"plainto_tsquery('{CONFIG}', search_words(%s))::text"
            params.append(term.text)
        elif " " in term.text:
            expressions.append(f"phraseto_tsquery('{CONFIG}', search_words(%s))::text")
            params.append(term.text)
        else:
            expressions.append(f"plainto_tsquery('{CONFIG}', search_words(%s))::text")
            params.append(term.text)
        expressions.append(whole)
        expressions.append(f"plainto_tsquery('{CONFIG}', search_word_parts(%s))::text")
        params.append("" if " " in term.text else term.text)
    with db.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(expressions)}", params)
        row = cursor.fetchone()
        for position, term in enumerate(terms):
            term.tsquery, term.whole, term.parts = row[3 * position : 3 * position + 3]


def _normalize_raw(text: str) -> str:
    try:
        with db.atomic(), db.cursor() as cursor:
            cursor.execute(f"SELECT to_tsquery('{CONFIG}', %s)::text", [text])
            return cursor.fetchone()[0]
    except DatabaseError as exc:
        detail = str(exc).splitlines()[0]
        raise QuerySyntaxError(
            f"not a valid tsquery ({detail}). In raw mode use PostgreSQL tsquery syntax, like "
            "renew & (android | ios) & !tablet, or send match_mode=simple for plain words."
        ) from exc
