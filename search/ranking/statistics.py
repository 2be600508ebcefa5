"""Corpus statistics for the keyword arm: N, document frequencies, idf, recent months.

Document frequencies of common lexemes come from PostgreSQL's own column
statistics (pg_stats.most_common_elems, kept by ANALYZE); the rest are rare
by definition and are counted exactly through the GIN index, capped.

For a user who sees only some products, everything is counted over those
products' records, never read from the column statistics (which count every
record): a score, a plan or a spelling correction never depends on records
the user cannot see. docs/benchmarks.md measures what the counting costs.

Where Citus distributes search_document (search.ranking.layout), the
coordinator's table is an empty shell without statistics: N and the common
words come from the shards' own (`_across_shards`), gathered in one round
trip to the workers and cached as one server's are. What "the same as one
server" means there: ANALYZE reads every row of a table (or shard) of up
to 300 x default_statistics_target rows (30,000) and lists its most common
lexemes (up to 10 x the target) with their counts. Below that size, on
both layouts, a word's document frequency is its exact count, whether read
from the statistics or counted; so N, every df, every score and every
keyword order are the same (tests/test_citus_search.py). Two limits: ANALYZE
counts lexemes lossily once a table's rows hold more than about 144,000
of them (some thousands of records), which can undercount a word that was
rare in the rows it read first; and past 30,000 rows both read samples,
each figure an estimate (a word in one record in ten within about 3.5 %
of its count, at two standard errors), so scores differ by that much and
near ties may swap.
"""

import json
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from search import db
from search.indexing.sql import MONTH_PREFIX, SAMPLE_BUCKETS, SAMPLE_PREFIX
from search.query.parse import ParsedQuery
from search.query.scope import Scope, words_match
from search.ranking import config, layout

# Per database alias (search.db): a replica's statistics may trail the primary's.
# alias -> {"at": when read, "n": N, "freq": lexeme -> fraction}
_stats_cache: dict[str, dict] = {}
# (alias, products) -> (when counted, N): a restricted user's N, kept as the whole corpus's is.
_scoped_n: dict[tuple[str, tuple[int, ...]], tuple[float, float]] = {}
CACHED_FROM = 10_000  # a corpus this large is counted at most every CACHE_SECONDS; a smaller one always
CACHE_SECONDS = 30
_LEXEME = re.compile(r"'((?:[^']|'')*)'")


# One statement: the planner's row estimate; an exact count when that is below
# %(cached_from)s (the CASE runs the count only then); the column statistics'
# common words of search_vector and tokens of search_markers ("~" first: no word is one),
# as float8: exactly the float4 figures, which JSON would otherwise round; and
# whether Citus is loaded (search.ranking.layout). The statistics are read in a
# CTE of their own: beside the count of a distributed table (a Citus coordinator
# this process has not yet recognised) a subquery over pg_stats cannot run there.
CORPUS_SQL = f"""
    WITH common AS MATERIALIZED (
        SELECT coalesce(json_agg(json_build_array(s.most_common_elems::text,
                                                  s.most_common_elem_freqs::float8[])), '[]') AS elements
        FROM pg_stats s
        WHERE s.tablename = 'search_document' AND s.attname IN ('search_vector', 'search_markers')
    )
    SELECT c.reltuples,
           CASE WHEN c.reltuples IS NULL OR c.reltuples < %(cached_from)s
                THEN (SELECT count(*) FROM search_document) END,
           (SELECT elements FROM common),
           {layout.CITUS_LOADED}
    FROM pg_class c WHERE c.oid = 'search_document'::regclass
"""


def corpus(products: Sequence[int] | None = None) -> tuple[float, dict[str, float]]:
    """(N, lexeme -> fraction of documents) from the planner's statistics; for
    some `products` only, (their N counted, no fractions)."""
    alias = db.alias()
    if products is not None:
        key = (alias, tuple(products))
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
    if cached and time.monotonic() - cached["at"] < CACHE_SECONDS:
        return cached["n"], cached["freq"]
    if layout.known():
        return _across_shards(alias)
    with db.cursor() as cursor:
        cursor.execute(CORPUS_SQL, {"cached_from": CACHED_FROM})
        reltuples, counted, rows, loaded = cursor.fetchone()
    if layout.note_citus(loaded):
        return _across_shards(alias)
    if counted is not None and counted != reltuples:
        # The column statistics describe other rows (analyzed before
        # the last writes, or never): a small corpus counts its words too.
        return float(max(counted, 1)), {}
    freq = {}
    for elements, freqs in rows:
        freq.update(_listed(elements, freqs))
    # Only cache for a large corpus; a small one is counted every time, cheaply.
    if reltuples >= CACHED_FROM:
        _stats_cache[alias] = {"at": time.monotonic(), "n": float(reltuples), "freq": freq}
    return float(max(reltuples, 1)), freq


def _listed(elements: str | None, freqs: list[float]) -> dict[str, float]:
    """most_common_elems (as text) and their most_common_elem_freqs, lexeme -> fraction
    (the two figures ANALYZE adds after them, the least and the greatest, left out)."""
    return dict(zip(_elements(elements), freqs, strict=False))


def _elements(elements: str | None) -> list[str]:
    return [e.strip('"') for e in elements.strip("{}").split(",")] if elements else []


# -- a distributed table: the shards' statistics -----------------------------------------------

# One shard's figures, for a shard `c` (pg_class) in schema `n`: its row
# estimate, its size (a shard never analyzed has reltuples -1 whether or
# not it holds rows: its size tells), and per column the common lexemes,
# their fractions and the statistics target they were listed under.
_SHARD_JSON = """json_build_array(c.reltuples, pg_relation_size(c.oid), (
    SELECT json_agg(json_build_array(st.attname, st.most_common_elems::text, st.most_common_elem_freqs::float8[],
                                     coalesce(nullif(a.attstattarget, -1),
                                              current_setting('default_statistics_target')::int)))
    FROM pg_stats st JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = st.attname
    WHERE st.schemaname = n.nspname AND st.tablename = c.relname
      AND st.attname IN ('search_vector', 'search_markers')))"""

# Each worker reads the shards it holds (one placement each: the metadata Citus
# keeps on every node says which), one round trip for the whole cluster; with the
# shards the coordinator knows, to tell whether every shard answered.
SHARD_STATISTICS_SQL = f"""
    SELECT (SELECT array_agg(shardid) FROM pg_dist_shard WHERE logicalrelid = 'search_document'::regclass),
           array_agg(w.result) FILTER (WHERE w.success)
    FROM run_command_on_workers($$
        SELECT coalesce(json_agg(json_build_array(s.shardid, {_SHARD_JSON})), '[]')
        FROM pg_dist_shard s
        JOIN pg_dist_placement p ON p.shardid = s.shardid AND p.groupid = (SELECT groupid FROM pg_dist_local_group)
        JOIN pg_class c ON c.oid = to_regclass(shard_name(s.logicalrelid, s.shardid))
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE s.logicalrelid = 'search_document'::regclass
    $$) w
"""

# Shard by shard, where the workers cannot say it all (a shard on the coordinator,
# workers without Citus' metadata): a connection to each shard, several times slower.
EACH_SHARD_SQL = f"""
    SELECT shardid, result FROM run_command_on_shards('search_document', $$
        SELECT {_SHARD_JSON} FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.oid = '%1$s'::regclass
    $$) WHERE success
"""

ANALYZED_ROWS_PER_TARGET = 300  # ANALYZE samples 300 x the statistics target rows
LISTED_PER_TARGET = 10  # and lists up to 10 x the target lexemes of a tsvector


def _across_shards(alias: str) -> tuple[float, dict[str, float]]:
    """corpus() for a distributed search_document: N and the common words'
    fractions from the shards' own statistics, cached for CACHE_SECONDS
    whatever the corpus' size (each refresh asks every worker). As one
    server does, a corpus below CACHED_FROM is counted too, and when the
    statistics describe other rows (a shard analyzed before the last
    writes, or never) every word is counted instead."""
    shards = _shard_statistics()
    n = sum(max(rows, 0.0) for rows, _, _ in shards)
    unanalyzed = any(rows < 0 and size > 0 for rows, size, _ in shards)
    counted = n
    if unanalyzed or n < CACHED_FROM:
        with db.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_document")
            counted = cursor.fetchone()[0]
    if unanalyzed or counted != n:
        n, freq = counted, {}
    else:
        freq = _combined(shards, n, config.current().exact_limit)
    n = float(max(n, 1))
    _stats_cache[alias] = {"at": time.monotonic(), "n": n, "freq": freq}
    return n, freq


def _shard_statistics() -> list[tuple[float, int, list | None]]:
    """(reltuples, bytes, [[column, elements, freqs, target], ...] or None) of every shard."""
    with db.cursor() as cursor:
        cursor.execute(SHARD_STATISTICS_SQL)
        shard_ids, results = cursor.fetchone()
        found = {}
        for result in results or []:
            for shard_id, figures in json.loads(result):
                found.setdefault(shard_id, figures)  # a replicated shard: its first placement
        if set(found) != set(shard_ids or ()):
            cursor.execute(EACH_SHARD_SQL)
            found = {shard_id: json.loads(result) for shard_id, result in cursor.fetchall()}
    return [(float(rows), int(size), columns) for rows, size, columns in found.values()]


def _combined(shards: list, n: float, cap: int) -> dict[str, float]:
    """lexeme -> fraction of all `n` documents, from every shard's common
    lexemes weighted by the shard's rows. A shard lists its most common
    lexemes only: one it does not list has there at most what its least
    listed one has (fewer, when the list was not cut at its length; none,
    when the least listed is in one document). So a lexeme's count over the
    shards is its listed counts plus at most that `slack`:

    - no slack (every shard that could hold it lists it): the exact count,
      as one server's statistics have it below ANALYZE's sample size;
    - some slack, and possibly above `cap` (exact_limit: a common word,
      never counted by the keyword arm): the middle of the two, within
      half the slack of the truth, on an idf that is flat there;
    - else: left out, so the keyword arm counts it exactly, as it counts
      every word one server's statistics do not list.

    A shard with rows but no statistics for a column leaves that column out
    altogether (every word counted), as one server without them does."""
    freq: dict[str, float] = {}
    for column in ("search_vector", "search_markers"):  # each column's lexemes are its own ("~" first: markers)
        lower: dict[str, float] = {}
        listed_bound: dict[str, float] = {}
        total_bound = 0.0
        complete = True
        for rows, _, columns in shards:
            if rows <= 0:
                continue
            stats = next((c[1:] for c in columns or [] if c[0] == column), None)
            if not stats or not stats[0]:
                complete = False
                break
            elements, freqs, target = _elements(stats[0]), stats[1], stats[2]
            least = freqs[len(elements)] if len(freqs) > len(elements) else min(freqs)
            sample = min(rows, ANALYZED_ROWS_PER_TARGET * target)
            in_sample = round(least * sample)
            cut = len(elements) >= LISTED_PER_TARGET * target
            bound = (in_sample if cut else max(in_sample - 1, 0)) * rows / sample
            total_bound += bound
            for lexeme, fraction in zip(elements, freqs, strict=False):
                lower[lexeme] = lower.get(lexeme, 0.0) + fraction * rows
                listed_bound[lexeme] = listed_bound.get(lexeme, 0.0) + bound
        if not complete:
            continue
        for lexeme, count in lower.items():
            slack = total_bound - listed_bound[lexeme]
            if slack > 0.5:
                if count + slack <= cap:
                    continue
                count += slack / 2
            freq[lexeme] = float(np.float32(round(count) / n))
    return freq


def recent_months(fraction: float, products: Sequence[int] | None = None) -> tuple[str, float] | None:
    """The newest months of updated_at that together hold at least
    `fraction` of all records, from the column statistics of the month
    tokens (sql.MONTH_PREFIX): the oldest of them (YYYYMM) and the fraction
    they hold. None when that would be most records anyway, or when the
    statistics do not know the months (a small or unanalyzed corpus, cheap
    to read in full, or the records of some `products` only)."""
    if fraction >= 0.5 or products is not None:
        return None
    _, freq = corpus()
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
    """N, and the df of each term's tsquery: from the column statistics when
    PostgreSQL keeps them for its lexeme, else counted (capped: past the cap
    a term is common, and its idf small and flat anyway). Over the records
    of `products` when given (None: all)."""
    n, freq = corpus(products)
    df: dict[str, float] = {}
    to_count = []
    for q in set(tsqueries):
        lexemes = _LEXEME.findall(q)
        if len(set(lexemes)) == 1 and lexemes[0] in freq:
            # A word, or a word and its prefix. Rounded to whole documents:
            # the statistics keep fractions as float4, and a df read from them
            # must equal the same df counted (a small corpus, just analyzed,
            # is counted when its statistics go stale), not differ in its
            # eighth digit and move a score with autovacuum.
            df[q] = float(max(round(freq[lexemes[0]] * n), 1))
        else:
            to_count.append(q)
    if to_count and products is not None:
        # Every word is counted here, common ones too: those a sample finds
        # common are estimated from it, the rest counted exactly (capped).
        df.update(common := _sampled(to_count, products, n))
        to_count = [q for q in to_count if q not in common]
    if to_count:  # rare words: through the GIN index, one statement
        # Over some products, as their scope asks: their words' own index (Scope.words).
        within = "" if products is None else "AND d.product_id = ANY(%(products)s) "
        words = words_match("{q}::tsquery", None if products is None else "%(products)s::bigint[]")
        counted = _count_each(
            to_count, words, within, {"products": list(products or ())}, cap=config.current().exact_limit + 1
        )
        df.update({q: float(count) for q, count in counted.items()})
    return n, df


def _count_each(tsqueries: list[str], match: str, condition: str, params: dict, cap: int | None = None):
    """How many rows `d` of search_document match each of `tsqueries`
    (`match`: SQL with `{q}` where the tsquery goes) and `condition` ("" or
    "AND ..."), at most `cap` each when given; in one statement.

    On one server each tsquery is written out in a subquery of its own, so
    the planner weighs each word by its own frequency, and a capped count
    stops at its cap; no subquery refers to an outer row. On a distributed
    table (search.ranking.layout), `_count_on_shards`."""
    if layout.distributed():
        return _count_on_shards(tsqueries, match, condition, params, cap)
    values = {**params, **{f"q{i}": q for i, q in enumerate(tsqueries)}}
    matches = [match.format(q=f"%(q{i})s") for i in range(len(tsqueries))]
    if cap:
        values["cap"] = cap
        count_sql = "SELECT count(*) FROM (SELECT 1 FROM search_document d WHERE {m} {condition}LIMIT %(cap)s) s"
    else:
        count_sql = "SELECT count(*) FROM search_document d WHERE {m} {condition}"
    parts = [f"SELECT {i}, ({count_sql.format(m=m, condition=condition)})" for i, m in enumerate(matches)]
    with db.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), values)
        return {tsqueries[i]: count for i, count in cursor.fetchall()}


# On a distributed table: (alias, what was counted, tsquery) -> (when, count), the last COUNTS_KEPT.
_counts: OrderedDict[tuple, tuple[float, int]] = OrderedDict()
_counts_lock = threading.Lock()
COUNTS_KEPT = 10_000


def _count_on_shards(tsqueries: list[str], match: str, condition: str, params: dict, cap: int | None):
    """_count_each on a distributed table. Citus would plan each subquery
    apart, and a capped one would gather up to `cap` rows a shard on the
    coordinator: here the tsqueries are rows, each joined to its matches
    (an index probe each, as each subquery is on one server), counted on
    every shard at once and added up; the cap applies after. The same
    figures, in one round trip (4 ms against 50 for the subqueries, at
    20,000 records). As that round trip asks every shard, a count is kept
    for CACHE_SECONDS, as the corpus statistics are: it may trail the
    writes of those seconds, as the statistics trail them until the next
    ANALYZE."""
    what = (db.alias(), match, condition, json.dumps(params, sort_keys=True, default=str), cap)
    now, found = time.monotonic(), {}
    with _counts_lock:
        for q in tsqueries:
            kept = _counts.get((*what, q))
            if kept and now - kept[0] < CACHE_SECONDS:
                found[q] = kept[1]
    missing = [q for q in tsqueries if q not in found]
    if missing:
        with db.cursor() as cursor:
            cursor.execute(
                "SELECT q.i, count(*) FROM unnest(%(tsqueries)s::text[]) WITH ORDINALITY q(t, i) "
                f"JOIN search_document d ON {match.format(q='q.t')} WHERE TRUE {condition} GROUP BY q.i",
                {**params, "tsqueries": missing},
            )
            counted = dict(cursor.fetchall())
        with _counts_lock:
            for i, q in enumerate(missing, start=1):
                found[q] = min(counted.get(i, 0), cap or math.inf)
                _counts[(*what, q)] = (now, found[q])
                _counts.move_to_end((*what, q))
            while len(_counts) > COUNTS_KEPT:
                _counts.popitem(last=False)
    return found


SAMPLED_DOCUMENTS = 2000


def _sampled(tsqueries: list[str], products: Sequence[int], n: float) -> dict[str, float]:
    """The df of those of `tsqueries` that are common (over the cap) among
    the records of `products` (N of them), estimated from the records of the
    first few sample buckets (search.indexing.sql: a hash of each record's own id, so
    the sample is the same whatever other products hold). Counting a common
    word exactly reads much of the table, and a capped count would put every
    common word at the cap, where the keyword arm's plans cannot tell them apart."""
    buckets = max(1, min(SAMPLE_BUCKETS, math.ceil(SAMPLE_BUCKETS * SAMPLED_DOCUMENTS / n)))
    counted = _count_each(
        tsqueries,
        words_match("{q}::tsquery", "%(products)s::bigint[]"),
        "AND d.search_markers @@ %(buckets)s::tsquery AND d.product_id = ANY(%(products)s)",
        {"products": list(products), "buckets": " | ".join(f"'{SAMPLE_PREFIX}{i}'" for i in range(buckets))},
    )
    scale = SAMPLE_BUCKETS / buckets
    return {q: count * scale for q, count in counted.items() if count * scale > config.current().exact_limit}


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
