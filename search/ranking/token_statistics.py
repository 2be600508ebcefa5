"""The common tokens of search_markers as ANALYZE lists them (pg_stats.most_common_elems),
on one server or across a distributed table's shards.

Those tokens are a record's kind, status, severity and month of update
(search.indexing.sql): the shares of records that filters keep
(statistics.filter_share) and the newest months (statistics.recent_months)
are read from them. A few dozen distinct tokens, a handful a record, so
ANALYZE counts them exactly up to its sample (30,000 rows, or a shard's).
No word's document frequency is read from here: ANALYZE counts a table's
lexemes lossily once its rows hold more than about 144,000 of them (some
thousands of records), and one server and a cluster's shards then differ
in what they undercount (statistics.py counts words instead).

Where Citus distributes search_document (search.ranking.layout), the
coordinator's table is an empty shell without statistics: the shards' own
are gathered in one round trip to the workers and cached as one server's
are (statistics.corpus).
"""

import json

import numpy as np

from search import db


def listed(elements: str | None, freqs: list[float]) -> dict[str, float]:
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
      AND st.attname = 'search_markers'))"""

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


def shard_statistics() -> list[tuple[float, int, list | None]]:
    """(reltuples, bytes, [["search_markers", elements, freqs, target]] or None) of every shard."""
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


def combined(shards: list, n: float, cap: int) -> dict[str, float]:
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

    A shard with rows but no statistics leaves them all out, as one server
    without them does."""
    freq: dict[str, float] = {}
    lower: dict[str, float] = {}
    listed_bound: dict[str, float] = {}
    total_bound = 0.0
    for rows, _, columns in shards:
        if rows <= 0:
            continue
        stats = next((c[1:] for c in columns or [] if c[0] == "search_markers"), None)
        if not stats or not stats[0]:
            return {}
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
    for lexeme, count in lower.items():
        slack = total_bound - listed_bound[lexeme]
        if slack > 0.5:
            if count + slack <= cap:
                continue
            count += slack / 2
        freq[lexeme] = float(np.float32(round(count) / n))
    return freq
