"""Filters as tokens in the words' GIN index, against the same filters as column conditions.

    .venv/bin/python bench/filter_bench.py [--records 1000000] [--rounds 3]

Runs on a database kept by `bench/search_bench.py --keep-db` of that size.
Every query of search_bench, filtered as its "filtered" rows are (bugs,
critical or high), runs through search() twice, interleaved in one
process: as search.query.scope builds it (kind and severity asked of the filter
tokens in search_markers, the keyword arm's plans scaled by the filters'
share, the last word settled as typed when its share fills the candidates)
and as it was built before (`d.kind = ANY(...) AND d.severity = ANY(...)`,
which PostgreSQL answers with a B-tree beside the GIN index, and plans that
know nothing of the filters). Both return the same kind of page; printed:
p50 and p95 of each, per mode, and the ratio.
"""

import argparse
import statistics
import time

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

from django.db import connection
from search_bench import FILTER, QUERIES, kept_database, percentile, prewarm

from search.contract import SearchRequest
from search.indexing.embeddings import get_provider
from search.operations import search as engine
from search.query.scope import access_scope, build_scope

COLUMNS = {"entities": "kind", "status": "status", "severity": "severity"}


def columns_scope(request, user):
    """The filters as column conditions, as search.query.scope wrote them before the filter tokens."""
    scope = access_scope(user)
    for name, column in COLUMNS.items():
        if values := getattr(request, name, None):
            scope = scope.narrowed(f"d.{column} = ANY(%(scope_{name})s)", **{f"scope_{name}": list(values)})
    return scope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="keyword,hybrid")
    args = parser.parse_args()
    connection.settings_dict["NAME"] = kept_database(args.records)
    print(f"# {prewarm()}")
    provider = get_provider()
    vectors = {query: provider.embed_query(query) for query in QUERIES}
    original = provider.embed_query
    provider.embed_query = lambda text: vectors[text] if text in vectors else original(text)
    scopes = {"tokens (now)": build_scope, "columns (before)": columns_scope}
    times = {(mode, way): [] for mode in args.modes.split(",") for way in scopes}
    for round_ in range(args.rounds + 1):  # the first round warms, untimed
        for query in QUERIES:
            for mode, way in times:
                engine.build_scope = scopes[way]
                request = SearchRequest(query=query, mode=mode, **FILTER.request())
                started = time.perf_counter()
                engine.search(request)
                if round_:
                    times[mode, way].append((time.perf_counter() - started) * 1000)
    engine.build_scope = build_scope
    print(f"# {args.records:,} records, {len(QUERIES)} queries x {args.rounds} rounds, filtered: {FILTER.request()}")
    print("| mode | filters as | p50 ms | p95 ms |")
    print("|---|---|---|---|")
    for (mode, way), values in times.items():
        print(f"| {mode} | {way} | {statistics.median(values):.1f} | {percentile(values, 95):.1f} |")
    for mode in args.modes.split(","):
        now, before = times[mode, "tokens (now)"], times[mode, "columns (before)"]
        print(
            f"# {mode}: before / now, p50 {statistics.median(before) / statistics.median(now):.2f}x, "
            f"p95 {percentile(before, 95) / percentile(now, 95):.2f}x"
        )


if __name__ == "__main__":
    main()
