"""Typo tolerance: what to search for when the query's words find (almost) nothing.

In order: a quoted phrase that matches no record is offered as plain words;
a word being typed past its stem is cut back to a stem that matches; each
other word that matches no record is corrected to its closest neighbour
among the words of the titles (pg_trgm word similarity finds the titles,
the most frequent of the equally close words wins); failing all that, the
titles closest to the whole query are offered. A word that matches records
is never replaced, and every word that can be corrected is: `logn crsh
andriod` is `login crash android`, not one word of three.
"""

import re
from collections import Counter
from difflib import SequenceMatcher

from search import db
from search.query.parse import ParsedQuery
from search.query.scope import Scope
from search.ranking import facets, layout, statistics
from search.ranking.rows import ArmResult

TYPO_SIMILARITY = 0.5  # pg_trgm word_similarity a title must reach to be like the whole query
# ... to hold a correction of one word: a letter dropped from a short word leaves 2 or 3 of
# its 5 or 6 trigrams ("crsh" in "Crash" is 0.4), so 0.5 missed the commonest typo there is.
WORD_SIMILARITY = 0.4
# Titles read for one word at most: at 0.4 a common stem is like a tenth of all titles, and each
# costs a similarity (20 us); a sample this size still holds every frequent neighbour.
TITLES_READ = 500
CORRECTION_RATIO = 0.7  # how close a title word must be to replace a query word
STEM_PREFIX_MIN = 4  # shortest stem tried for a word being typed
MAX_LENGTH_CHANGE = 2  # letters a correction may add or drop
# A word at least this frequent in English (Zipf scale: log10 of occurrences per billion words;
# 2.0 is once in 100 million) is a word, never a typo, though no record holds it (is_word).
KNOWN_ZIPF = 2.0


def unknown_words(parsed: ParsedQuery, df: dict[str, float]) -> list[str]:
    """The query's words (not phrases) that no record has and that are no
    word of the language either: "paymnt" is a typo; "took" or "mates" in a
    question, "checkout", "logout" or "hover" only words these records do not
    use (correcting them made "took" "too", "checkout" "echeck")."""
    terms = [t for group in parsed.groups for t in group if t.tsquery]
    return [t.text for t in terms if df.get(t.match, 0) == 0 and " " not in t.text and not is_word(t.text)]


def is_word(word: str) -> bool:
    """Whether `word` is a word of English rather than a misspelling: its
    frequency in wordfreq's English list (web, subtitles, books, news) is at
    least KNOWN_ZIPF. Misspellings a search box sees sit below it (orignal
    1.93, andriod 1.75, serch 1.33, logn 1.14, paymnt none) and the words of
    software above (logout 2.14, dropdown 2.19, checkbox 2.39, signup 3.06).
    A misspelling common enough to pass (recieve 2.75) is left as typed: the
    semantic arm reads it as the word it stands for."""
    from wordfreq import zipf_frequency  # its English list loads once, on the first check (0.15 s)

    return zipf_frequency(word.lower(), "en") >= KNOWN_ZIPF


def fallback(parsed: ParsedQuery, scope: Scope, depth: int, df: dict[str, float], found: ArmResult | None = None):
    """(an arm of close titles or None, the corrected query text or None).

    `found`: what the words found when it is plenty. Then an unknown word is
    corrected from the titles of those matches (in memory: the trigram probe
    over every title costs tens of milliseconds at 100,000 records), and the
    matches stand if nothing is close: a word no match's title comes near is
    rather a word being typed or a name than a typo of some other record's
    word (qa-public's `gradeb rubr` is "gradebook rubric", not "upgrade").
    Without `found`, each unknown word is corrected from the index's titles,
    and failing all, the titles closest to the query are offered."""
    terms = [t for group in parsed.groups for t in group if t.tsquery]
    if any(" " in t.text and df.get(t.match, 0) == 0 for t in terms):
        return None, " ".join(parsed.text.replace('"', " ").split())
    unknown = unknown_words(parsed, df)
    if not unknown:
        return None, None
    if found is not None:
        words = _title_words([info.title for info in found.info.values()])
        corrections = {word: best for word in unknown if (best := _closest(word, words))}
        return None, _corrected(parsed.text, corrections)
    typed = [t.text for t in terms if t.text in unknown and ":*" in t.tsquery]
    with db.atomic(), db.cursor() as cursor:
        corrections = _stems(cursor, typed, scope)
        # Every word is tried: one cut back to its stem says nothing of the others.
        corrections |= _close_words(cursor, [word for word in unknown if word not in corrections], scope)
        if corrections:
            return None, _corrected(parsed.text, corrections)
        return _close_titles(cursor, parsed.text, scope, depth), None


def _corrected(text: str, corrections: dict[str, str]) -> str | None:
    return " ".join(corrections.get(word.strip('"-'), word) for word in text.split()) if corrections else None


def _stems(cursor, typed: list[str], scope: Scope) -> dict[str, str]:
    """A word being typed may run past its stem: "renewa" is on the way to
    "renewal", indexed as 'renew'. Its own prefixes, one or two letters
    shorter, are tried as whole words before any fuzzy match."""
    corrections, probed = {}, {}
    # A word the scope's common words list is known to exist there (a team member's too).
    common = statistics.known_words(scope)
    for word in typed:
        stems = [word[:k].lower() for k in (len(word) - 1, len(word) - 2) if k >= STEM_PREFIX_MIN]
        if stem := next((stem for stem in stems if stem in common), None):
            corrections[word] = stem
        elif stems:
            probed[word] = stems
    stems = [stem for word_stems in probed.values() for stem in word_stems]
    if not stems:
        return corrections
    # One subquery per stem, none referring to an outer row (Citus runs those on a distributed table),
    # all in one statement. Through the GIN index: for EXISTS over a common word the planner reads the
    # table in order, expecting a match within a few rows, and at a million records where the word's
    # records lie far into the table that took 0.5 s ('renew'). Nor in product order: for a restricted
    # scope the planner walked the product_id B-tree, reading each of the user's records until one held
    # the stem, 0.5 to 1.4 s at 100k records for a stem none holds ('chec'); bitmap scans only.
    found = ", ".join(
        f"""EXISTS (SELECT 1 FROM search_document d
            WHERE {scope.words(f"to_tsquery('simple', quote_literal(%(stem{i})s))")} AND ({scope.where}))"""
        for i in range(len(stems))
    )
    # Both settings in one round trip (layout.set_local: on Citus, on the shards too).
    layout.set_local(cursor, "enable_seqscan = off", "enable_indexscan = off")
    cursor.execute(f"SELECT ARRAY[{found}]", {**{f"stem{i}": stem for i, stem in enumerate(stems)}, **scope.params})
    there = dict(zip(stems, cursor.fetchone()[0], strict=True))
    layout.set_local(cursor, "enable_seqscan = on", "enable_indexscan = on")
    for word, word_stems in probed.items():
        if stem := next((stem for stem in word_stems if there[stem]), None):
            corrections[word] = stem
    return corrections


def _close_words(cursor, unknown: list[str], scope: Scope) -> dict[str, str]:
    """Each unknown word's closest word among the words of the titles like it, and how many
    of those titles hold each (every title holding a close word is like the unknown one:
    the count is the word's title frequency). One statement for all the words."""
    if not unknown:
        return {}
    _similarity_threshold(cursor, WORD_SIMILARITY)
    # Through the trigram index: at 0.4 the planner expects many matches and would read every
    # title instead (100 ms at 5,000 records). Subqueries that refer to no outer row, as Citus
    # runs them on a distributed table.
    layout.set_local(cursor, "enable_seqscan = off")
    closest = ", ".join(
        f"""(SELECT coalesce(json_object_agg(w.word, w.titles), '{{}}') FROM (
                SELECT word, count(*) AS titles
                FROM (SELECT d.title FROM search_document d WHERE %(word{i})s <%% d.title AND ({scope.where})
                      LIMIT %(titles_read)s) t,
                     regexp_split_to_table(lower(t.title), '[^[:alnum:]]+') AS word
                WHERE length(word) BETWEEN %(shortest{i})s AND %(longest{i})s
                GROUP BY word) w)"""
        for i in range(len(unknown))
    )
    params = {"titles_read": TITLES_READ}
    for i, word in enumerate(unknown):
        params |= {
            f"word{i}": word,
            f"shortest{i}": len(word) - MAX_LENGTH_CHANGE,
            f"longest{i}": len(word) + MAX_LENGTH_CHANGE,
        }
    cursor.execute(f"SELECT {closest}", {**params, **scope.params})
    tallies = cursor.fetchone()
    layout.set_local(cursor, "enable_seqscan = on")
    return {word: best for word, words in zip(unknown, tallies, strict=True) if (best := _closest(word, words))}


def _similarity_threshold(cursor, threshold: float) -> None:
    """pg_trgm's threshold for this transaction. A SET LOCAL statement, not
    set_config(): Citus passes SET LOCAL on to the workers (layout.set_local),
    never a function's effect."""
    layout.set_local(cursor, f"pg_trgm.word_similarity_threshold = {float(threshold)}")


def _title_words(titles: list[str]) -> dict[str, int]:
    """Each word of `titles`, lower case, and how many of them hold it."""
    return Counter(word for title in titles for word in {v.lower() for v in re.findall(r"[^\W_]+", title)})


def _closest(word: str, words: dict[str, int]) -> str | None:
    """The word of `words` (a word: how many titles hold it) closest to `word`, if close
    enough to be what was meant; of equally close ones, the most frequent ("logn" is
    "long" before "logs" where neither "login" nor "log" is). A typo adds, drops or
    swaps a letter or two: "short" is no correction of "shortfall"."""
    vocabulary = [v for v in words if abs(len(v) - len(word)) <= MAX_LENGTH_CHANGE and v != word.lower()]
    best = max(vocabulary, key=lambda v: (_likeness(word, v), words[v], v), default=None)
    return best if best and _likeness(word, best) >= CORRECTION_RATIO else None


def _likeness(word: str, candidate: str) -> float:
    return SequenceMatcher(None, word.lower(), candidate).ratio()


def _close_titles(cursor, text: str, scope: Scope, depth: int) -> ArmResult | None:
    """The titles most like the whole query, as an arm."""
    _similarity_threshold(cursor, TYPO_SIMILARITY)
    cursor.execute(
        f"""SELECT d.id, word_similarity(%(text)s, d.title) AS similarity FROM search_document d
            WHERE %(text)s <%% d.title AND ({scope.where}) ORDER BY similarity DESC, d.id LIMIT %(depth)s""",
        {"text": text, "depth": depth, **scope.params},
    )
    rows = cursor.fetchall()
    if not rows:
        return None
    ids = [row[0] for row in rows]
    return ArmResult([(pk, float(sim)) for pk, sim in rows], len(rows), True, facets.of_rows(ids))
