"""check_duplicates latency, beside search, on a kept bench database.

    .venv/bin/python bench/duplicates_bench.py [--records 100000] [--drafts 100] [--rounds 3]

Runs on the database of that size that `bench/search_bench.py --keep-db`
keeps (bench/corpus.py; built first if it is missing).
The drafts are bugs of the database read back as drafts (title, and title +
their text after it: description, results, steps, environment), the stored
bug left out of the candidates as a new report is in no corpus. Every
draft's vector is computed untimed first and served from memory, as
search_bench does for its queries, unless --with-embedding: the figures are
then the ranking's alone, and the model's time (per draft, on this CPU) is
printed on its own line. Printed: p50 and p95 per kind of draft, with a
hybrid search() of the same titles in the same process as the baseline,
and the time of each part (the arms, the statistics, the page).
"""

import argparse
import statistics
import time
from collections import defaultdict

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

import corpus
from django.db import connection
from timing import percentile

from search.contract import DuplicateCheckRequest, SearchRequest
from search.indexing.embeddings import document_text, get_provider
from search.operations import duplicates
from search.operations import search as engine
from search.query.scope import leaving_out
from search.ranking import more_like_this, semantic
from search.ranking import statistics as corpus_statistics


def timed(parts: dict, name: str, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            parts[name].append((time.perf_counter() - start) * 1000)

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--drafts", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--with-embedding", action="store_true", help="time the model's embedding too")
    args = parser.parse_args()
    with corpus.database(args.records):
        measure(args)


def measure(args) -> None:
    print(f"# {corpus.prewarm()}")
    with connection.cursor() as cursor:
        # Bugs spread over the table, by a fixed stride (997 from 100,000 records up): the same drafts every run.
        stride = min(997, max(2, corpus.count() // 100))
        cursor.execute(
            "SELECT key, title, body FROM search_document WHERE kind = 'bug' AND id %% %s = 1 ORDER BY id LIMIT %s",
            [stride, args.drafts],
        )
        drafts = cursor.fetchall()
    provider = get_provider()
    texts = [document_text(title, body or "") for _, title, body in drafts] + [title for _, title, _ in drafts]
    start = time.perf_counter()
    vectors = {text: provider.embed_query(text) for text in texts}
    embedding_ms = (time.perf_counter() - start) * 1000 / len(texts)
    if not args.with_embedding:
        original = provider.embed_query
        provider.embed_query = lambda text: vectors[text] if text in vectors else original(text)
    parts = defaultdict(list)
    more_like_this.arm = timed(parts, "keyword arm", more_like_this.arm)
    semantic.query_vector = timed(parts, "embedding (a thread beside the keyword arm)", semantic.query_vector)
    semantic.for_vector = timed(parts, "semantic arm", semantic.for_vector)
    more_like_this.statistics.document_frequencies = timed(parts, "statistics", corpus_statistics.document_frequencies)
    duplicates._page_rows = timed(parts, "page (why)", duplicates._page_rows)

    kinds = {
        "check_duplicates, title": lambda key, title, body: DuplicateCheckRequest(title=title),
        "check_duplicates, title + text": lambda key, title, body: DuplicateCheckRequest(
            title=title, description=body or None
        ),
        "search, title (baseline)": lambda key, title, body: SearchRequest(query=title[:500]),
    }
    times = defaultdict(list)
    for round_ in range(args.rounds + 1):  # the first round warms, untimed
        for key, title, body in drafts:
            for kind, request in kinds.items():
                if args.with_embedding:
                    semantic._query_vectors.clear()  # no draft is embedded twice: the model runs in every call
                with leaving_out([key]):
                    start = time.perf_counter()
                    if kind.startswith("search"):
                        engine.search(request(key, title, body))
                    else:
                        duplicates.check_duplicates(request(key, title, body))
                    elapsed = (time.perf_counter() - start) * 1000
                if round_:
                    times[kind].append(elapsed)
        if not round_:
            parts.clear()
    baseline = statistics.median(times["search, title (baseline)"])
    print(f"records: {args.records:,}, drafts: {len(drafts)}, rounds: {args.rounds}")
    print(f"{'':32} {'p50 ms':>7} {'p95 ms':>7} {'p50 / search':>13}")
    for kind, values in times.items():
        p50 = statistics.median(values)
        print(f"{kind:32} {p50:7.1f} {percentile(values, 95):7.1f} {p50 / baseline:13.2f}")
    print("parts, over both kinds of draft and the baseline's semantic arm (p50 / p95 ms):")
    for name, values in parts.items():
        print(f"  {name:30} {statistics.median(values):7.1f} {percentile(values, 95):7.1f}")
    included = "included above" if args.with_embedding else "not included above"
    print(f"embedding a draft's text, mean ({included}): {embedding_ms:.1f} ms")


if __name__ == "__main__":
    main()
