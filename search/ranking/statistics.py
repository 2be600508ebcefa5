"""Corpus statistics for the keyword arm: N, document frequencies, idf, recent months.

A word's document frequency never depends on how ANALYZE sampled: below
WORDS_SAMPLED_FROM records every word is counted exactly; from there the common
words come from a sample of records chosen by a hash of their ids
(counting.sample_words: all of them up to 20,000), read every
CACHE_SECONDS, and the rest are rare by definition and counted exactly
through the GIN index, capped. So one server and a Citus cluster holding
the same records rank with the same figures. The tokens of filters and
months (search_markers) are few and counted exactly by ANALYZE: their
shares are read from PostgreSQL's column statistics (token_statistics).

For a user who sees only some products, everything is counted over those
products' records, never read from the column statistics (which count every
record): a score, a plan or a spelling correction never depends on records
the user cannot see. Their common words come from a sample of their own
records instead (counting.sample_words, kept as the statistics are), so a
team member's search counts what a superuser's counts: its rare words.
docs/benchmarks.md measures what that costs.

Where Citus distributes search_document (search.ranking.layout), N and
the tokens' shares come from the shards' own statistics
(search.ranking.token_statistics), cached as one server's are. Counting a
word's records, exactly, capped or from a sample: search.ranking.counting.
"""

import math
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from search import db
from search.indexing.sql import MONTH_PREFIX
from search.query.parse import ParsedQuery
from search.query.scope import Scope, words_match
from search.ranking import behind, config, counting, layout, token_statistics
from search.ranking.counting import CACHE_SECONDS

# Per database alias (search.db): a replica's statistics may trail the primary's.
# alias -> {"at": when read, "n": N, "freq": lexeme -> fraction}
_stats_cache: dict[str, dict] = {}
# (alias, products) -> (when counted, N): a restricted user's N, kept as the whole corpus's is.
_scoped_n: dict[tuple[str, tuple[int, ...]], tuple[float, float]] = {}
CACHED_FROM = 10_000  # a corpus this large is counted at most every CACHE_SECONDS; a smaller one always
# From this many records the common words come from their sample (counting.sample_words, kept and
# read again behind the search): counting a word every record holds, every search, took 7 ms at
# 5,000 records (it reads them all); below, every word is counted, a few hundred rows at most.
WORDS_SAMPLED_FROM = 2_000
_LEXEME = re.compile(r"'((?:[^']|'')*)'")
# Within kept(): (alias, products) -> (N, tsquery -> df), each counted once.
_kept: ContextVar[dict | None] = ContextVar("kept", default=None)


@contextmanager
def kept() -> Iterator[None]:
    """Within this block each N and document frequency is counted once, over the
    records as they were at its first count: an operation that ranks many queries
    over one scope (triage: a run's causes share most of their words) counts each
    word once, not once a query. A user who sees only some products has every word
    counted (document_frequencies), so this is most of what triage saves for them."""
    token = _kept.set({})
    try:
        yield
    finally:
        _kept.reset(token)


# One statement: the planner's row estimate; an exact count (N: the sample of words
# is sized from it, and must be the same whatever ANALYZE estimated); the column
# statistics' common tokens of search_markers ("~" first: no word is one),
# as float8: exactly the float4 figures, which JSON would otherwise round; and
# whether Citus is loaded (search.ranking.layout). The statistics are read in a
# CTE of their own: beside the count of a distributed table (a Citus coordinator
# this process has not yet recognised) a subquery over pg_stats cannot run there.
CORPUS_SQL = f"""
    WITH common AS MATERIALIZED (
        SELECT coalesce(json_agg(json_build_array(s.most_common_elems::text,
                                                  s.most_common_elem_freqs::float8[])), '[]') AS elements
        FROM pg_stats s
        WHERE s.tablename = 'search_document' AND s.attname = 'search_markers'
    )
    SELECT c.reltuples, (SELECT count(*) FROM search_document), (SELECT elements FROM common),
           {layout.CITUS_LOADED}
    FROM pg_class c WHERE c.oid = 'search_document'::regclass
"""


def corpus(products: Sequence[int] | None = None) -> tuple[float, dict[str, float]]:
    """(N, lexeme or token -> fraction of documents): the markers' tokens from
    the column statistics, and from WORDS_SAMPLED_FROM records the common words of
    their sample (counting.sample_words); for some `products` only, (their N
    counted, no fractions)."""
    alias = db.alias()
    if products is not None:
        key = _scoped_key(products)
        at, n = _scoped_n.get(key, (0.0, 0.0))
        if time.monotonic() - at >= CACHE_SECONDS:
            with db.cursor() as cursor:
                cursor.execute(
                    f"SELECT count(*), {layout.CITUS_LOADED} FROM search_document WHERE product_id = ANY(%s)",
                    [list(products)],
                )
                count, loaded = cursor.fetchone()
            layout.note_citus(loaded)
            n = float(max(count, 1))
            if n >= CACHED_FROM:
                _scoped_n[key] = (time.monotonic(), n)
        return n, {}
    cached = _stats_cache.get(alias)
    stale = behind.answer_stale(time.monotonic() - cached["at"], CACHE_SECONDS) if cached else False
    if stale:  # read again behind this search (behind.py)
        behind.refresh(("corpus", alias), alias, lambda: _read(alias), lambda: _stats_cache.pop(alias, None))
    if stale is not False:
        return cached["n"], cached["freq"]
    return _read(alias)


def _scoped_key(products: Sequence[int]) -> tuple:
    return (db.alias(), tuple(products))


def _read(alias: str) -> tuple[float, dict[str, float]]:
    """corpus() for everyone, read now (and kept from CACHED_FROM records)."""
    if layout.known():
        return _across_shards(alias)
    with db.cursor() as cursor:
        cursor.execute(CORPUS_SQL)
        reltuples, counted, rows, loaded = cursor.fetchone()
    if layout.note_citus(loaded):
        return _across_shards(alias)
    freq = {}
    # Unless the column statistics describe other rows (a small corpus analyzed
    # before the last writes, or never: its tokens are counted too).
    if counted >= CACHED_FROM or counted == reltuples:
        for elements, freqs in rows:
            freq.update(token_statistics.listed(elements, freqs))
    return _with_words(alias, float(max(counted, 1)), freq, keep=counted >= CACHED_FROM)


def _with_words(alias: str, n: float, freq: dict[str, float], keep: bool) -> tuple[float, dict[str, float]]:
    """corpus()'s answer, with the common words of a sample of all N records (their tokens too)
    from WORDS_SAMPLED_FROM, and kept for CACHE_SECONDS when `keep` (the words are kept by
    sample_words itself otherwise); below, every word is counted, cheaply, every time."""
    if _sampled(n):
        words = counting.sample_words(None, n, keep=not keep)  # one cache for each figure
        freq |= {word: count / n for word, count in words.items()}
    if keep:
        _stats_cache[alias] = {"at": time.monotonic(), "n": n, "freq": freq}
    return n, freq


def _sampled(n: float) -> bool:
    """Whether a corpus of N records reads its common words from a sample (else counts each)."""
    return n >= WORDS_SAMPLED_FROM or n >= CACHED_FROM


def _across_shards(alias: str) -> tuple[float, dict[str, float]]:
    """corpus() for a distributed search_document: N counted and the tokens'
    fractions from the shards' own statistics, cached for CACHE_SECONDS
    whatever the corpus' size (each refresh asks every worker). When the
    statistics describe other rows (a small corpus' shard analyzed before
    the last writes, or a shard never) no token's share is known. The
    words: as corpus()."""
    shards = token_statistics.shard_statistics()
    reltuples = sum(max(rows, 0.0) for rows, _, _ in shards)
    unanalyzed = any(rows < 0 and size > 0 for rows, size, _ in shards)
    with db.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_document")
        counted = cursor.fetchone()[0]
    freq = {}
    if not unanalyzed and (counted >= CACHED_FROM or counted == reltuples):
        freq = token_statistics.combined(shards, float(max(counted, 1)), config.current().exact_limit)
    return _with_words(alias, float(max(counted, 1)), freq, keep=True)  # every refresh asks every worker


def recent_months(fraction: float, products: Sequence[int] | None = None) -> tuple[str, float] | None:
    """The newest months of updated_at that together hold at least
    `fraction` of all records, from the column statistics of the month
    tokens (sql.MONTH_PREFIX): the oldest of them (YYYYMM) and the fraction
    they hold. None when that would be most records anyway, or when the
    statistics do not know the months (a small or unanalyzed corpus, cheap
    to read in full). Over the records of some `products`, from their
    sample's tokens (_sample_words) when they are at hand."""
    if fraction >= 0.5:
        return None
    if products is None:
        _, freq = corpus()
    else:
        n, _ = corpus(products)
        words = _sample_words(products, n)
        if not words:
            return None
        freq = {token: count / n for token, count in words.items()}
    months = sorted(((k[len(MONTH_PREFIX) :], f) for k, f in freq.items() if k.startswith(MONTH_PREFIX)), reverse=True)
    covered = 0.0
    for month, share in months:
        covered += share
        if covered >= fraction:
            return month, covered
    return None


def filter_share(scope: Scope) -> float | None:
    """The share of the records `scope`'s filters keep, estimated from the
    column statistics of their tokens (search.indexing.sql.FILTER_PREFIXES; filters
    taken as independent of each other); None when that cannot be said: a
    filter that is not a token (a feature, a date, a product), or a user
    who sees only some products, whose plans may not depend on the others'
    records (the statistics count every record). A token too rare for the
    statistics counts as none (an exact plan then)."""
    if scope.untokened or scope.products is not None:
        return None
    if not scope.token_groups:
        return 1.0
    _, freq = corpus()
    if not freq:  # a small or unanalyzed corpus: cheap whatever the plan
        return None
    share = 1.0
    for group in scope.token_groups:
        share *= min(1.0, sum(freq.get(token, 0.0) for token in group))
    return share


# The month tokens from %(since)s (YYYYMM) to the newest record's month, as
# one tsquery: months too rare for the statistics count as well.
MONTHS_SINCE_SQL = (
    "(SELECT string_agg(quote_literal(%(month_prefix)s || to_char(m, 'YYYYMM')), ' | ')::tsquery "
    "FROM generate_series(to_date(%(since)s, 'YYYYMM'), "
    "(SELECT max(updated_at) AT TIME ZONE 'UTC' FROM search_document), interval '1 month') AS m)"
)


def document_frequencies(tsqueries: list[str], products: Sequence[int] | None = None) -> tuple[float, dict[str, float]]:
    """N, and the df of each term's tsquery: from the sample's common words
    (corpus) when its lexeme is one, else counted: exactly below
    WORDS_SAMPLED_FROM records, from there capped (past the cap a term is common,
    and its idf small and flat anyway). Over the records of `products` when
    given (None: all). Inside kept(), each once."""
    memo = _kept.get()
    if memo is None:
        return _frequencies(set(tsqueries), products)
    key = (db.alias(), None if products is None else tuple(sorted(products)))
    n, known = memo.get(key, (None, {}))
    missing = set(tsqueries) - known.keys()
    if missing or n is None:
        n, counted = _frequencies(missing, products)
        known.update(counted)
        memo[key] = (n, known)
    return n, {q: known[q] for q in tsqueries}


def _frequencies(tsqueries: set[str], products: Sequence[int] | None) -> tuple[float, dict[str, float]]:
    n, freq = corpus(products)
    df: dict[str, float] = {}
    to_count = []
    for q in tsqueries:
        lexemes = _LEXEME.findall(q)
        if len(set(lexemes)) == 1 and lexemes[0] in freq:
            # A word, or a word and its prefix. Rounded to whole documents: a df
            # read from a fraction must equal the same df counted, not differ in
            # its eighth digit and move a score.
            df[q] = float(max(round(freq[lexemes[0]] * n), 1))
        else:
            to_count.append(q)
    if to_count and products is not None:
        df.update(_common_within(to_count, products, n))
        to_count = [q for q in to_count if q not in df]
    if to_count:  # rare words: through the GIN index, one statement
        # Over some products, as their scope asks: their words' own index (Scope.words).
        within = "" if products is None else "AND d.product_id = ANY(%(products)s) "
        words = words_match("{q}::tsquery", None if products is None else "%(products)s::bigint[]")
        cap = config.current().exact_limit + 1 if _sampled(n) else None  # below, cheap however common
        counted = counting.count_each(to_count, words, within, {"products": list(products or ())}, cap=cap)
        df.update({q: float(count) for q, count in counted.items()})
    return n, df


def _common_within(tsqueries: list[str], products: Sequence[int], n: float) -> dict[str, float]:
    """The df of those of `tsqueries` that are common among the records of
    `products` (N of them), the rest left to be counted exactly (capped).

    Where their sample's words are at hand (_sample_words), a word among them is
    read from them, as a word among the column statistics' common ones is for
    every record, and a term they say may be common (its lexemes together, a
    prefix, a negation) is estimated from a sample of its own (counting.sampled);
    elsewhere every term is."""
    words = _sample_words(products, n)
    if words is None:
        return counting.sampled(tsqueries, products, n)
    limit = config.current().exact_limit
    unseen = limit / counting.WORDS_FROM  # the most records a lexeme left out of the words holds
    df, maybe = {}, []
    for q in tsqueries:
        lexemes = {lexeme.replace("''", "'") for lexeme in _LEXEME.findall(q)}
        counts = [words.get(lexeme, unseen) for lexeme in lexemes] or [0.0]
        if len(lexemes) == 1 and next(iter(lexemes)) in words:  # a word, or a word and its prefix
            df[q] = float(max(round(counts[0]), 1))
        elif "!" in q or ":*" in q or ("|" in q and sum(counts) > limit) or min(counts) > limit:
            maybe.append(q)  # else: all its lexemes at once (&, <->), and one of them is rare
    if maybe:
        df.update(counting.sampled(maybe, products, n))
    return df


def known_words(scope: Scope) -> dict[str, float]:
    """Lexemes known to be in some record of `scope` (an unfiltered one), with their
    document frequencies or fractions: the corpus' common words for one who sees every
    product, a team member's own sample's where they are at hand; else none."""
    if scope.filtered:
        return {}
    if scope.products is None:
        return corpus()[1]
    n, _ = corpus(scope.products)
    return (_sample_words(scope.products, n) or {}) if _sampled(n) else {}  # a smaller scope keeps none


def _sample_words(products: Sequence[int], n: float) -> dict[str, float] | None:
    """counting.sample_words for a scope large enough to keep them (WORDS_SAMPLED_FROM
    records, as everyone's are), or inside kept() for the block; else None (reading
    them would cost a search more than it saves)."""
    memo = _kept.get()
    key = ("words", db.alias(), tuple(sorted(products)))
    if memo is not None and key in memo:
        return memo[key]
    if memo is None and not _sampled(n):
        return None
    words = counting.sample_words(products, n, keep=_sampled(n))
    if memo is not None:
        memo[key] = words
    return words


def idf(n: float, df: float) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def of_query(parsed: ParsedQuery, scope: Scope) -> tuple[float, dict[str, float]]:
    """N and the document frequency of each term (the whole tsquery in raw
    mode), over the records the user may see (scope.products). Settles whether the last word is also a
    prefix (ParsedQuery.settle_prefix) on the way: a word that fills the
    keyword arm's candidate list by itself is taken as typed: counted over
    the records the user may see, and scaled by the share of them the
    filters keep when that is known (filter_share); under other filters
    (a feature, dates, a product) the counts say too little of the records
    in scope, and the word stays a prefix."""
    if parsed.raw is not None:
        return document_frequencies([parsed.raw] if parsed.raw else [], scope.products)
    terms = parsed.terms + parsed.units
    n, df = document_frequencies([t.match for t in terms] + [t.whole for t in parsed.terms if t.whole], scope.products)
    share = filter_share(scope) if scope.filtered else 1.0
    if share:
        parsed.settle_prefix(df, config.current().arm_depth / share)
    # A settled word's match changed with it (and a camel-case word's parts).
    if missing := [t.match for t in terms if t.match not in df]:
        df.update(document_frequencies(missing, scope.products)[1])
    return n, df
