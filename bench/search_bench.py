"""Search latency at scale: keyword, hybrid and semantic, against a naive baseline.

    .venv/bin/python bench/search_bench.py [--records 100000] [--rounds 5]

Builds its own database (`test_bench_search`, dropped at the end unless
--keep-db) with N demo records. To make "a word that occurs in every
record" a real case, every record's description ends with the word
"qaeverywhere". The query set mixes single words of every frequency, that
universal word, two- and three-word queries, phrases, prefixes, record keys
and natural-language questions.

Vectors: embedding 100k records takes about half an hour to an hour on 2
cores, so by default this harness uses a FAST PATH, printed in its output: it embeds 1,000 records for
real and gives every other record the vector of a random embedded record of
the same product plus Gaussian noise (sigma 0.02 a component, a noise
vector of norm about 0.4), normalised. The HNSW
index then holds 100k clustered vectors, as with real data; relevance is not
measured here (see search_eval), only speed and recall against an exact scan.
With --real-vectors every record is embedded for real (`embed_pending`, a
progress bar on stderr) in a database of its own (`test_bench_search_real`),
so the semantic arm's recall against an exact scan means something.

Timing excludes the query embedding (queries are embedded once, before
timing) and includes everything else search() does: both arms, fusion,
boosts, facets, totals, the page and its snippets. Reported: p50 and p95
over all queries x rounds, per mode, and the baseline (ts_rank over every
match + RRF of two top-100 lists, run in the same process) with the ratio.
"""

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test.utils import setup_databases, teardown_databases  # noqa: E402

from backlog.demo import generate  # noqa: E402
from backlog.interchange import dumps  # noqa: E402
from backlog.management.commands._progress import progress_bars  # noqa: E402
from backlog.services import import_records  # noqa: E402
from search import ranking  # noqa: E402
from search.contract import SearchRequest  # noqa: E402
from search.embeddings import document_text, get_provider  # noqa: E402
from search.engine import search  # noqa: E402
from search.indexing import embed_pending  # noqa: E402

UNIVERSAL = "qaeverywhere"
# Per component; at 0.05 the noise (norm ~1) swamped the real vectors and made
# the set far harder for HNSW than any text embedding (recall 0.4 at ef 40).
NOISE = 0.02
QUERIES = [
    UNIVERSAL,
    "open",
    "test",
    "crash",
    "spinner",
    "refund",
    "timezone",
    "voiceover",
    "zoom",
    "vat",
    "payment fails",
    "app crashes on startup",
    "wrong total invoice",
    "season pass renewal",
    '"payment sheet"',
    "checko",
    "renewa",
    "offline ticket wallet",
    "dark mode contrast",
    "memory leak map",
    "500 error export",
    "duplicate charge card",
    "login session expired",
    "why does the app close when I renew my pass",
    "invoice total does not match the breakdown",
    "BUG-1432",
    "TEST-208",
    "open -android",
    "crash or freeze",
    f"{UNIVERSAL} crash",
]


def load(records: int, seed: int) -> None:
    def lines():
        for record in generate(records, seed):
            record["description"] = (record.get("description", "") + f" {UNIVERSAL}").strip()
            yield dumps(record)

    report = import_records(lines())
    assert not report.problems, report.problems[:3]
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE search_document")


def fast_path_vectors(sample: int, seed: int) -> None:
    provider = get_provider()
    rng = np.random.default_rng(seed)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, product_id, title, body, content_hash FROM search_document ORDER BY id")
        rows = cursor.fetchall()
    chosen = random.Random(seed).sample(range(len(rows)), min(sample, len(rows)))
    texts = [document_text(rows[i][2], rows[i][3]) for i in chosen]
    real = provider.embed_documents(texts)
    by_product: dict[int, list[int]] = {}
    for position, i in enumerate(chosen):
        by_product.setdefault(rows[i][1], []).append(position)
    all_positions = list(range(len(chosen)))
    vectors = np.empty((len(rows), real.shape[1]), dtype=np.float32)
    for i, row in enumerate(rows):
        pool = by_product.get(row[1]) or all_positions
        base = real[pool[rng.integers(len(pool))]]
        noisy = base + rng.normal(0, NOISE, size=base.shape)
        vectors[i] = noisy / np.linalg.norm(noisy)
    for position, i in enumerate(chosen):  # the embedded records keep their real vectors
        vectors[i] = real[position]
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 5000):
            batch = rows[start : start + 5000]
            cursor.execute(
                """UPDATE search_document d SET embedding = v.e::halfvec, embedding_model = %s,
                   embedding_hash = d.content_hash
                   FROM unnest(%s::bigint[], %s::text[]) AS v(id, e) WHERE d.id = v.id""",
                [
                    provider.model_id,
                    [row[0] for row in batch],
                    ["[" + ",".join(f"{x:.5f}" for x in vectors[start + j]) + "]" for j in range(len(batch))],
                ],
            )
        cursor.execute("VACUUM ANALYZE search_document")


def naive(query: str, vector) -> None:
    """The baseline: ts_rank over every match, RRF of two top-100 lists."""
    provider = get_provider()
    literal = "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """
            WITH kw AS (SELECT id, row_number() OVER (ORDER BY ts_rank(search_vector, q) DESC) AS r
                        FROM search_document, websearch_to_tsquery('english', %s) q
                        WHERE search_vector @@ q ORDER BY ts_rank(search_vector, q) DESC LIMIT 100),
                 sem AS (SELECT id, row_number() OVER (ORDER BY embedding <=> %s::halfvec) AS r
                         FROM search_document WHERE embedding_model = %s
                         ORDER BY embedding <=> %s::halfvec LIMIT 100)
            SELECT coalesce(kw.id, sem.id), coalesce(1.0 / (60 + kw.r), 0) + coalesce(1.0 / (60 + sem.r), 0) AS s
            FROM kw FULL OUTER JOIN sem ON kw.id = sem.id ORDER BY s DESC LIMIT 20
            """,
            [query, literal, provider.model_id, literal],
        )
        cursor.fetchall()


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def semantic_recall(vectors: dict[str, np.ndarray], rounds: int) -> tuple[list[float], float]:
    provider = get_provider()
    times, recalls = [], []
    scope = ranking.Scope()
    for _ in range(rounds):
        for _query, vector in vectors.items():
            times.append(timed(lambda v=vector: ranking.semantic_arm(v, provider.model_id, scope, 20)))
    for vector in vectors.values():
        approximate = [doc for doc, _ in ranking.semantic_arm(vector, provider.model_id, scope, 20).ranked[:10]]
        literal = "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")
            cursor.execute(
                "SELECT id FROM search_document WHERE embedding_model = %s ORDER BY embedding <=> %s::halfvec LIMIT 10",
                [provider.model_id, literal],
            )
            exact = [row[0] for row in cursor.fetchall()]
        recalls.append(len(set(approximate) & set(exact)) / len(exact))
    return times, statistics.mean(recalls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--real-vectors", action="store_true", help="embed every record (slow), not the fast path")
    args = parser.parse_args()

    name = "test_bench_search_real" if args.real_vectors else "test_bench_search"
    connection.settings_dict["TEST"]["NAME"] = name
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=args.keep_db)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_document")
            present = cursor.fetchone()[0]
        if present < args.records:
            started = time.perf_counter()
            load(args.records, args.seed)
            print(f"# loaded {args.records:,} records in {time.perf_counter() - started:.0f} s")
            if not args.real_vectors:
                started = time.perf_counter()
                fast_path_vectors(1000, args.seed)
                print(f"# FAST PATH vectors (1,000 real, the rest derived) in {time.perf_counter() - started:.0f} s")
        if args.real_vectors:  # resumes where a killed run stopped
            started = time.perf_counter()
            if written := embed_pending(batch_size=128, progress=progress_bars(True)):
                with connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE search_document")
                print(f"# embedded {written:,} records in {time.perf_counter() - started:.0f} s")
        provider = get_provider()
        vectors = {query: provider.embed_query(query) for query in QUERIES}
        original = provider.embed_query
        provider.embed_query = lambda text: vectors[text] if text in vectors else original(text)
        for query in QUERIES:  # warm caches and statistics
            search(SearchRequest(query=query, mode="hybrid"))

        rows = {}
        for mode in ("keyword", "hybrid"):
            rows[mode] = [
                timed(lambda q=q, m=mode: search(SearchRequest(query=q, mode=m)))
                for _ in range(args.rounds)
                for q in QUERIES
            ]
        rows["baseline (naive)"] = [
            timed(lambda q=q: naive(q, vectors[q])) for _ in range(args.rounds) for q in QUERIES
        ]
        semantic_times, recall = semantic_recall(vectors, args.rounds)
        slowest = sorted(
            (
                (
                    statistics.median(
                        timed(lambda q=q: search(SearchRequest(query=q, mode="keyword"))) for _ in range(3)
                    ),
                    q,
                )
                for q in QUERIES
            ),
            reverse=True,
        )[:3]
        provider.embed_query = original
    finally:
        teardown_databases(old_config, verbosity=0, keepdb=args.keep_db)

    baseline = statistics.median(rows["baseline (naive)"])
    print(f"# search latency: {args.records:,} demo records, {len(QUERIES)} queries x {args.rounds} rounds")
    print(f"# machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    vectors_are = "REAL (all embedded)" if args.real_vectors else "FAST PATH (1,000 embedded, the rest derived)"
    print(f"# vectors: {vectors_are}; query embedding excluded")
    print("| what | p50 ms | p95 ms | median / baseline |")
    print("|---|---|---|---|")
    for name, times in rows.items():
        print(
            f"| {name} | {statistics.median(times):.1f} | {percentile(times, 95):.1f} | "
            f"{statistics.median(times) / baseline:.2f} |"
        )
    print(
        f"| semantic arm top-20 | {statistics.median(semantic_times):.1f} | {percentile(semantic_times, 95):.1f} "
        f"| recall@10 vs exact scan: {recall:.3f} |"
    )
    print("# slowest keyword queries (median of 3): " + ", ".join(f"{q!r} {t:.1f} ms" for t, q in slowest))


if __name__ == "__main__":
    main()
