"""Local embeddings: how fast `embed_pending` fills in vectors, against the model alone, and where the time goes.

    .venv/bin/python bench/embed_bench.py [--records 10000] [--rounds 3] [--sample 300] [--threads N]
        [--database NAME] [--keep-db]

Builds its own database (`test_bench_embed`, dropped at the end unless
--keep-db) with N demo records (bugs carry the longest texts; at 100k one
test in ten repeats another's text), then alternates whole runs over every
record, each from no vectors at all, in one process:

* the model alone (the baseline), no database: the provider's
  embed_documents over every record's text, 64 at a time, with the same
  EMBEDDING_THREADS: what `embed_pending` would reach if the pipeline
  around the model cost nothing;
* `search.indexing.vectors.embed_pending` as it is, EMBEDDING_THREADS as
  set (or --threads).

Reported per run and as medians with their ratio: records a second, and the
CPU milliseconds a record costs this process and its PostgreSQL backend.
Then how far the vectors of the two runs differ (they should not), and a
breakdown of one record's time on one thread over --sample records: the
text, the tokenizer, the model, pooling, and the database write.

The runs behind today's model variant and graph (the packaged int8 graph
against int8-dynamic; derivation 1 against 2; the loop before 84df4fe)
were this file's --variants, --graphs and --baseline before|graph: `git
log -S compare_graphs -- bench/embed_bench.py`.
"""

import argparse
import os
import platform
import statistics
import time

from django_setup import database  # sets Django up, DEBUG off: before the project's imports

# isort: split

import corpus
import numpy as np
import onnxruntime as ort
from django.db import connection
from django.test.utils import override_settings

from search.indexing.embeddings import document_text, get_provider
from search.indexing.local_model import LocalEmbeddingProvider
from search.indexing.provider import clip_text
from search.indexing.vectors import _store, embed_pending
from search.models import Document


def model_alone(provider, texts: list[str], batch_size: int = 64) -> tuple[int, np.ndarray]:
    """The model on ``texts`` in batches as embed_pending hands them over, nothing else: (texts, vectors)."""
    vectors = [provider.embed_documents(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    return len(texts), np.vstack(vectors)


def backend_cpu_seconds() -> float | None:
    """CPU time of this connection's PostgreSQL backend so far (a server on this machine only)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forget_vectors() -> None:
    """Every row back to no vector, the HNSW graph empty, as after an import."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE search_document SET embedding = NULL, embedding_model = NULL, embedding_hash = NULL")
        cursor.execute("VACUUM ANALYZE search_document")
        cursor.execute("REINDEX INDEX search_document_hnsw")


def stored_vectors() -> np.ndarray:
    with connection.cursor() as cursor:
        cursor.execute("SELECT embedding::real[] FROM search_document ORDER BY id")
        return np.array([row[0] for row in cursor.fetchall()], dtype=np.float32)


def timed_run(label: str, run) -> dict:
    forget_vectors()
    backend, started, cpu = backend_cpu_seconds(), time.perf_counter(), time.process_time()
    written = run()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    backend = backend_cpu_seconds() - backend if backend is not None else float("nan")
    result = {"records_s": written / seconds, "cpu_ms": 1000 * cpu / written, "db_ms": 1000 * backend / written}
    print(
        f"#   {label}: {written:,} records in {seconds:.0f} s, {result['records_s']:.1f}/s, "
        f"CPU ms a record: this process {result['cpu_ms']:.1f}, database {result['db_ms']:.1f}; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return result


def breakdown(provider: LocalEmbeddingProvider, sample: int) -> None:
    """One record's time on one thread, step by step, over ``sample`` records spread over the table (median of 3)."""
    rows = list(Document.objects.order_by("id").values_list("id", "title", "body", "content_hash"))
    rows = rows[:: max(1, len(rows) // sample)][:sample]
    steps: dict[str, list[float]] = {}

    def step(name, work):
        started = time.perf_counter()
        result = work()
        steps.setdefault(name, []).append((time.perf_counter() - started) * 1000 / len(rows))
        return result

    provider._load()
    session, tokenizer, outputs = provider._session, provider._tokenizer, [provider._output_name]
    for _ in range(3):
        texts = step("document_text", lambda: [clip_text(document_text(title, body)) for _, title, body, _ in rows])
        encodings = step("tokenize", lambda texts=texts: [tokenizer.encode(text) for text in texts])
        feeds = [
            {
                "input_ids": np.array([e.ids], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask], dtype=np.int64),
                "token_type_ids": np.zeros((1, len(e.ids)), dtype=np.int64),
            }
            for e in encodings
        ]
        hidden = step("model", lambda feeds=feeds: [session.run(outputs, feed)[0] for feed in feeds])
        vectors = step("pooling", lambda hidden=hidden: np.vstack([h.mean(axis=1) for h in hidden]))
        step(
            "write (64 a batch)",
            lambda vectors=vectors: [
                _store(rows[i : i + 64], vectors[i : i + 64], "bench") for i in range(0, len(rows), 64)
            ],
        )
    tokens = np.mean([len(e.ids) for e in encodings])
    total = sum(statistics.median(times) for times in steps.values())
    print(f"\n# one record on one thread, {len(rows)} records ({tokens:.0f} tokens on average), median of 3:")
    print("| step | ms a record | share |")
    print("|---|---|---|")
    for name, times in steps.items():
        print(f"| {name} | {statistics.median(times):.2f} | {statistics.median(times) / total:.0%} |")


def compare_runs(args) -> None:
    with database(args.database, keep=args.keep_db):
        if Document.objects.count() < args.records:
            corpus.load(args.records, universal=False)
        records = Document.objects.count()
        distinct = Document.objects.values("content_hash").distinct().count()
        settings = {"EMBEDDING_THREADS": args.threads} if args.threads is not None else {}
        with override_settings(**settings):
            after = get_provider()
            after.embed_query("warm up")
            rows = Document.objects.order_by("id").values_list("title", "body")
            texts = [document_text(title, body) for title, body in rows]
            alone = {}

            def baseline():
                written, alone["vectors"] = model_alone(after, texts)
                return written

            print(f"# embed_pending over {records:,} demo records ({distinct:,} distinct texts), {args.rounds} rounds")
            print(
                f"# machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                f"onnxruntime {ort.__version__}; after: EMBEDDING_THREADS={after.threads}"
            )
            results: dict[str, list[dict]] = {"model": [], "after": []}
            vectors = {}
            for _ in range(args.rounds):
                results["model"].append(timed_run("model", baseline))
                vectors["model"] = alone["vectors"]
                results["after"].append(timed_run("after", embed_pending))
                vectors["after"] = stored_vectors()
            print("| run | records/s | CPU ms a record, this process | CPU ms a record, database |")
            print("|---|---|---|---|")
            for label, runs in results.items():
                print(
                    f"| {label} | {statistics.median(r['records_s'] for r in runs):.1f} "
                    f"| {statistics.median(r['cpu_ms'] for r in runs):.1f} "
                    f"| {statistics.median(r['db_ms'] for r in runs):.1f} |"
                )
            pairs = zip(results["after"], results["model"], strict=True)
            ratios = [a["records_s"] / b["records_s"] for a, b in pairs]
            each = ", ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"# after / {'model'}, records/s: median {statistics.median(ratios):.2f} (pair by pair {each})")
            # The model's float32 against what the table keeps (halfvec): up to half a float16 step apart.
            cosines = np.sum(vectors["model"] * vectors["after"], axis=1) / (
                np.linalg.norm(vectors["model"], axis=1) * np.linalg.norm(vectors["after"], axis=1)
            )
            largest = np.abs(vectors["model"] - vectors["after"]).max()
            halved = np.abs(vectors["model"].astype(np.float16).astype(np.float32) - vectors["after"]).max()
            print(
                f"# stored vectors, after against {'model'}: largest difference {largest:.3g} "
                f"({halved:.3g} once rounded to float16), "
                f"lowest cosine {cosines.min():.7f}"
            )
            breakdown(after, args.sample)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="demo records in the database")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs (the model alone, embed_pending)")
    parser.add_argument("--sample", type=int, default=300, help="records in the one-thread breakdown")
    parser.add_argument("--threads", type=int, default=None, help="EMBEDDING_THREADS for the after runs")
    parser.add_argument("--database", default="test_bench_embed", help="the database it builds (and drops)")
    parser.add_argument("--keep-db", action="store_true", help="keep the database (and reuse it next time)")
    args = parser.parse_args()
    compare_runs(args)


if __name__ == "__main__":
    main()
