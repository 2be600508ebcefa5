"""Which known bugs a failure's cause is likely to be, and how likely.

Candidates come from search's own ranking of a pasted trace (the trace as a
`search` query reads it: its exception, message words and top frames, any
word, rarest first; search.operations.search.SearchPlan over the one
pipeline), in keyword mode: a trace's semantic vote is 0 in search
(TRACE_SEMANTIC_WEIGHT, eval/trace-hadoop's README says why), so the model
is not run at all, which is what lets a thousand causes be triaged in
seconds. Only bugs of the run's product that the user may see are ranked
(the access rule is in the scope, inside every statement).

Then each of the top DEPTH is weighed on the evidence a trace gives, and
they are ordered by it (docs/triage.md has the measurements):

- `frames`: the share of the failure's top frames (class and method) that
  the bug's text holds as frames, the i-th from the top weighing
  1 / (1 + i), as TraceSim weighs them; a frame that only carries the code
  to where it runs (a Future, a thread pool: triage.failures' carriers)
  weighs nothing, as it is in unrelated bugs' traces;
- `words`: whether the bug names the exception's type, and the share of
  the message's words it holds.

confidence = 1 - sqrt((1 - frames) * (1 - WORD_WEIGHT * words)), the form of
check_duplicates' (either evidence can make it high, both higher), with
words weighing less: an exception and its message are shared by many bugs,
the frames that threw it by few. A failure that prints no frame has its
words alone, at most NO_FRAMES_CEILING, and so has one of carriers alone:
such a trace is never "high". The bands are check_duplicates'
(search.operations.duplicates.band); `new` is a top candidate in the low band.
"""

import math
import re
from dataclasses import dataclass

from search import db
from search.contract import SearchRequest
from search.operations import duplicates
from search.operations.search import SearchPlan
from search.query import traces
from search.query.parse import QuerySyntaxError, parse
from search.query.scope import Filters, Scope, build_scope
from search.ranking import pipeline, statistics

from .failures import Reading

DEPTH = 10  # candidates weighed per cause
SHOWN = 3  # suggestions a group shows
SUGGEST_FROM = 0.15  # below it a candidate shares too little with the failure to be worth a look
FRAMES_READ = traces.FRAMES  # the failure's top frames compared: as many as search reads
WORD_WEIGHT = 0.5
NO_FRAMES_CEILING = 0.6
KNOWN_FROM = dict(duplicates.BANDS)["medium"]
_WORD = re.compile(r"[^\W\d_][\w$]*")
_SHORT = 3  # message words this short say little ("at", "of", "the")


@dataclass
class Match:
    bug_id: int
    key: str
    title: str
    status: str
    severity: str | None
    confidence: float
    band: str
    frames: tuple[int, int]
    words: list[str]
    decision: str | None = None
    rank: int = 0  # in search's order

    @property
    def why(self) -> dict:
        """What triage.contract.MatchWhy shows: read with the other fields by Suggestion (from_attributes)."""
        return {"frames": self.frames, "words": self.words}


def scope_for(product_key: str, user) -> Scope:
    return build_scope(Filters(entities=("bug",), products=(product_key,)), user)


def match(readings: dict[str, Reading], scope: Scope) -> dict[str, list[Match]]:
    """signature -> its likeliest bugs (at most DEPTH), best first. A run's causes
    share most of their words: each word is counted once for all of them (statistics.kept)."""
    with statistics.kept():
        ranked = {signature: _ranked(reading.query, scope) for signature, reading in readings.items()}
    bugs = _bugs({i for ids in ranked.values() for i in ids})
    return {signature: _weighed(readings[signature], ranked[signature], bugs) for signature in readings}


def _ranked(query: str, scope: Scope) -> list[int]:
    """Search's document ids for a pasted trace (or a message's words), best first."""
    try:
        parsed = parse(query, "simple")
    except QuerySyntaxError:
        parsed = parse(" ".join(_WORD.findall(query)), "simple")
    if not parsed.terms:
        return []
    request = SearchRequest.model_construct(query=query, mode="keyword", match_mode="simple", sort="relevant")
    plan = SearchPlan(request, parsed.text if parsed.trace else query, parsed, None, None, DEPTH)
    return [candidate.id for candidate in pipeline.rank(plan, scope).order()[:DEPTH]]


@dataclass
class _Bug:
    bug_id: int
    key: str
    title: str
    status: str
    severity: str | None
    frames: set[str]
    words: set[str]


def _bugs(ids: set[int]) -> dict[int, _Bug]:
    """The ranked bugs' fields, frames and words, by document id, in one statement."""
    if not ids:
        return {}
    with db.cursor() as cursor:
        cursor.execute(
            """
            SELECT d.id, b.id, b.key, b.title, b.status, b.severity,
                   concat_ws(E'\n', b.title, b.description, b.actual_result, b.expected_result, b.environment)
            FROM search_document d JOIN backlog_bug b ON d.kind = 'bug' AND b.id = d.record_id
            WHERE d.id = ANY(%(ids)s)
            """,
            {"ids": list(ids)},
        )
        rows = cursor.fetchall()
    return {
        row[0]: _Bug(row[1], row[2], row[3], row[4], row[5], set(traces.frame_names(row[6])), _words(row[6]))
        for row in rows
    }


def _words(text: str) -> set[str]:
    """A text's words, lowercased, with each part of a dotted name (java.io.IOException) as well."""
    found = set()
    for word in _WORD.findall(text):
        word = word.lower()
        found.add(word)
        if "." in word or "$" in word:
            found.update(part for part in re.split(r"[.$]", word) if part)
    return found


def _weighed(reading: Reading, ids: list[int], bugs: dict[int, _Bug]) -> list[Match]:
    frames = reading.frames[:FRAMES_READ]
    # A frame that only carries the code (a Future, a thread pool) weighs nothing: it is in
    # unrelated bugs' traces. A trace of them alone is judged by its words, as one without frames.
    weights = [0.0 if frame in reading.carriers else 1 / (1 + i) for i, frame in enumerate(frames)]
    own = sum(weights)
    exception = reading.exception.rsplit(".", 1)[-1].lower()
    message = list(dict.fromkeys(w.lower() for w in reading.message if len(w) > _SHORT))
    matches = []
    for rank, document in enumerate(ids):
        bug = bugs.get(document)
        if bug is None:
            continue
        held = [frame in bug.frames for frame in frames]
        frame_share = sum(w for w, h in zip(weights, held, strict=True) if h) / own if own else 0.0
        named = bool(exception) and exception in bug.words
        shared = [w for w in message if w in bug.words]
        words = (named + (len(shared) / len(message) if message else 0.0)) / 2
        if own:
            confidence = 1 - math.sqrt((1 - frame_share) * (1 - WORD_WEIGHT * words))
        else:
            confidence = NO_FRAMES_CEILING * words
        shown = ([reading.exception] if named else []) + shared
        matches.append(
            Match(
                bug.bug_id,
                bug.key,
                bug.title,
                bug.status,
                bug.severity,
                round(confidence, 3),
                duplicates.band(confidence),
                (sum(held), len(frames)),
                shown[:6],
                rank=rank,
            )
        )
    # The evidence orders them; search's order breaks ties.
    matches.sort(key=lambda m: (-m.confidence, m.rank))
    return matches
