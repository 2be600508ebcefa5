"""What an export and a saved search's count cost, on the database in use.

For each query: the rows an export holds, the search's total, the time to
rank (what comes before the first byte), the time to rank and write the
whole file in each format, and the most Python memory the process held while writing
it (tracemalloc); then whether ranking EXPORT_MAX_ROWS deep changes the
first page (the first 20 records against those of the JSON search), and
the time of a saved search's new count (ranking plus one count).

    .venv/bin/python bench/export_bench.py [--queries "renewal" "crash after update" ...] [--mode hybrid]

Run it against a database with demo data (`manage.py seed_demo --records N`, then `embed`).
"""

import argparse
import statistics
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

import django_setup  # noqa: F401  (sets Django up)
from django.conf import settings

from search import service

QUERIES = ["renewal", "crash after update", "payment", "login fails on android", "export pdf"]


def timed(function, repeat: int = 3):
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = function()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), result


def written(params: dict) -> tuple[float, int, int]:
    """Milliseconds to rank and write the whole file, its bytes, and the peak
    Python memory while writing it (a second run: tracemalloc slows it)."""
    began = time.perf_counter()
    size = sum(len(chunk.encode()) for chunk in service.export(params).chunks())
    elapsed = (time.perf_counter() - began) * 1000
    tracemalloc.start()
    for _ in service.export(params).chunks():
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, size, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", nargs="+", default=QUERIES)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args()
    print(f"EXPORT_MAX_ROWS {settings.EXPORT_MAX_ROWS}, mode {args.mode}")
    print("query | rows | total | rank ms | csv ms | csv MB | csv peak MB | jsonl ms | jsonl MB | jsonl peak MB | "
          "first 20 same | count ms")  # fmt: skip
    week_ago = datetime.now(UTC) - timedelta(days=7)
    for query in args.queries:
        params = {"query": query, "mode": args.mode}
        rank_ms, ranked = timed(lambda params=params: service.ranked(params))
        row = [query, len(ranked.ids), ranked.total, f"{rank_ms:.0f}"]
        for format in ("csv", "jsonl"):
            elapsed, size, peak = written({**params, "format": format})
            row += [f"{elapsed:.0f}", f"{size / 1e6:.2f}", f"{peak / 1e6:.1f}"]
        page = [hit["key"] for hit in service.call("search", params)["results"]]
        first = [row["key"] for batch in ranked.documents() for _, row in batch][:20]
        count_ms, _ = timed(lambda params=params: service.ranked(params).count(week_ago))
        row += ["yes" if first == page else f"no ({sum(a != b for a, b in zip(first, page, strict=False))} differ)"]
        row += [f"{count_ms:.0f}"]
        print(" | ".join(str(cell) for cell in row))


if __name__ == "__main__":
    main()
