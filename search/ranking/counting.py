"""Counting the records each of several words matches: exactly, capped, or
from a sample of the records; in one statement, on one server or a distributed table.
"""

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

from search import db
from search.indexing.sql import SAMPLE_BUCKETS, SAMPLE_PREFIX
from search.query.scope import words_match
from search.ranking import behind, config, layout

# How long a count on a distributed table is kept, and the corpus statistics too (search.ranking.statistics).
CACHE_SECONDS = 30


def count_each(tsqueries: list[str], match: str, condition: str, params: dict, cap: int | None = None):
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


def _keep(cache: OrderedDict, key: tuple, value, most: int) -> None:
    """`value` in `cache` under `key`, the newest; the oldest dropped past `most`. Under _counts_lock."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > most:
        cache.popitem(last=False)


def _count_on_shards(tsqueries: list[str], match: str, condition: str, params: dict, cap: int | None):
    """count_each on a distributed table. Citus would plan each subquery
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
                _keep(_counts, (*what, q), (now, found[q]), COUNTS_KEPT)
    return found


SAMPLED_DOCUMENTS = 2000
# sample_words reads this many records, as ANALYZE reads 30,000 rows for the column
# statistics, and keeps a lexeme whose records, scaled, are above exact_limit / WORDS_FROM.
WORDS_SAMPLED = 20_000
WORDS_FROM = 16
WORDS_KEPT = 256  # product sets whose sample's words are kept
# (alias, products, N, buckets) -> (when read, lexeme -> the sample's records holding it, scaled)
_words: OrderedDict[tuple, tuple[float, dict[str, float]]] = OrderedDict()


def _buckets(n: float, documents: int = SAMPLED_DOCUMENTS) -> int:
    """The first sample buckets that hold about `documents` of N records."""
    return max(1, min(SAMPLE_BUCKETS, math.ceil(SAMPLE_BUCKETS * documents / max(n, 1))))


def _bucket_query(buckets: int) -> str:
    return " | ".join(f"'{SAMPLE_PREFIX}{i}'" for i in range(buckets))


def sampled(tsqueries: list[str], products: Sequence[int], n: float) -> dict[str, float]:
    """The df of those of `tsqueries` that are common (over the cap) among
    the records of `products` (N of them), estimated from the records of the
    first few sample buckets (search.indexing.sql: a hash of each record's own id, so
    the sample is the same whatever other products hold). Counting a common
    word exactly reads much of the table, and a capped count would put every
    common word at the cap, where the keyword arm's plans cannot tell them apart."""
    buckets = _buckets(n)
    counted = count_each(
        tsqueries,
        words_match("{q}::tsquery", "%(products)s::bigint[]"),
        "AND d.search_markers @@ %(buckets)s::tsquery AND d.product_id = ANY(%(products)s)",
        {"products": list(products), "buckets": _bucket_query(buckets)},
    )
    scale = SAMPLE_BUCKETS / buckets
    return {q: count * scale for q, count in counted.items() if count * scale > config.current().exact_limit}


def sample_words(products: Sequence[int] | None, n: float, keep: bool) -> dict[str, float]:
    """The common lexemes of the records of `products` (None: every record; N of them), each with
    the records of a sample of about WORDS_SAMPLED of them that hold it, scaled
    to N (all of them: exact); all read at once (ts_stat), and, when `keep`, kept
    for CACHE_SECONDS, then read again behind the search that finds them stale. To a user who sees only
    some products they are what the statistics' common words are to one who
    sees all (search.ranking.statistics), read from their own records only."""
    buckets = _buckets(n, WORDS_SAMPLED)
    # N in the key: records added or deleted are read at once, and another corpus's words (a
    # test's, an evaluation's) are never taken for these.
    key = (db.alias(), None if products is None else tuple(sorted(products)), round(n), buckets)
    with _counts_lock:
        kept = _words.get(key)
    stale = behind.answer_stale(time.monotonic() - kept[0], CACHE_SECONDS) if keep and kept else False
    if stale:  # read again behind this search (behind.py)
        behind.refresh(("words", key), key[0], lambda: _read_words(key, products, buckets), lambda: _forget(key))
    if stale is not False:
        return kept[1]
    return _read_words(key if keep else None, products, buckets)


def _read_words(key: tuple | None, products: Sequence[int] | None, buckets: int) -> dict[str, float]:
    """sample_words read now from the first `buckets` sample buckets; kept under `key` if given."""
    scale = SAMPLE_BUCKETS / buckets
    # Its words and its tokens (the months of search_markers: statistics.recent_months).
    rows = "SELECT d.search_vector || d.search_markers FROM search_document d WHERE TRUE"
    if products is not None:
        ids = ",".join(str(int(p)) for p in products)  # ts_stat takes its rows as the text of a query
        rows += f" AND d.product_id = ANY('{{{ids}}}'::bigint[])"
    if buckets < SAMPLE_BUCKETS:
        rows += f" AND d.search_markers @@ '{_bucket_query(buckets).replace(chr(39), chr(39) * 2)}'::tsquery"
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT word, ndoc FROM ts_stat(%s) WHERE ndoc * %s > %s AND left(word, %s) <> %s",  # no bucket
            [rows, scale, config.current().exact_limit / WORDS_FROM, len(SAMPLE_PREFIX), SAMPLE_PREFIX],
        )
        words = {word: ndoc * scale for word, ndoc in cursor.fetchall()}
    if key is not None:
        with _counts_lock:
            _keep(_words, key, (time.monotonic(), words), WORDS_KEPT)
    return words


def _forget(key: tuple) -> None:
    with _counts_lock:
        _words.pop(key, None)
