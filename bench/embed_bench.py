"""Local embeddings: how fast `embed_pending` fills in vectors, before and after, and where the time goes.

    .venv/bin/python bench/embed_bench.py [--records 10000] [--rounds 3] [--sample 300] [--threads N]
        [--baseline model|before|graph] [--database NAME]
    .venv/bin/python bench/embed_bench.py --variants [--documents 300] [--rounds 5]
    .venv/bin/python bench/embed_bench.py --graphs [--documents 300] [--rounds 5] [--threads N]

Builds its own database (`test_bench_embed`, dropped at the end unless
--keep-db) with N demo records (bugs carry the longest texts; at 100k one
test in ten repeats another's text), then alternates whole runs over every
record, each from no vectors at all, in one process:

* model (--baseline model, the default): the model alone, no database: the
  provider's embed_documents over every record's text, 64 at a time, with
  the same EMBEDDING_THREADS: what `embed_pending` would reach if the
  pipeline around the model cost nothing;
* before (--baseline before): the loop as it was at 84df4fe, kept below: 64 rows a batch, each
  text embedded one after another on one onnxruntime thread by the graph as
  exported, every row embedded, the batch written after it is embedded;
* graph (--baseline graph): `embed_pending` as it is, its model on the
  int8-dynamic graph of derivation 1 (quantized only, NaN guards dropped at
  load), the one before local_model.DERIVATION 2;
* after: `search.indexing.vectors.embed_pending` as it is, EMBEDDING_THREADS as set
  (or --threads).

Reported per run and as medians with their ratio: records a second, and the
CPU seconds a record costs this process and its PostgreSQL backend. Then how
far the vectors of the two runs differ (they should not), and a breakdown of
one record's time on one thread over --sample records: the text, the
tokenizer, the model, pooling, and the database write.

--variants instead compares the packaged int8 graph with int8-dynamic (no
database): load time, a query's latency, documents a second one at a time,
and how far their vectors agree. --graphs compares the int8-dynamic graph of
derivation 1 with today's, the model alone (no database): --rounds pairs,
alternating, of opening the session and embedding --documents demo texts
(wall and CPU time) with EMBEDDING_THREADS as set (or --threads), and whether
the vectors are the same bits.
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django_setup import ROOT  # sets Django up, DEBUG off: before the project's imports

# isort: split

import numpy as np
import onnxruntime as ort
from django.db import connection
from django.test.utils import override_settings, setup_databases, teardown_databases

from backlog.demo import generate
from backlog.interchange import dumps
from backlog.services import import_records
from search.indexing import embeddings, local_model
from search.indexing.embeddings import VARIANT_DYNAMIC, VARIANT_PACKAGED, clip_text, document_text, get_provider
from search.indexing.local_model import LocalEmbeddingProvider
from search.indexing.vectors import _store, embed_pending
from search.models import Document

sys.path.insert(0, str(ROOT / "bench"))
from search_bench import QUERIES, percentile


def embed_pending_before(provider: LocalEmbeddingProvider, batch_size: int = 64) -> int:
    """search.indexing.vectors.embed_pending as of 84df4fe, with ``provider``."""
    queryset = Document.objects.needing_embedding(provider.model_id).order_by("id")
    written = last_id = 0
    while True:
        batch = list(queryset.filter(id__gt=last_id).values_list("id", "title", "body", "content_hash")[:batch_size])
        if not batch:
            return written
        last_id = batch[-1][0]
        vectors = provider.embed_documents([document_text(title, body) for _, title, body, _ in batch])
        written += _store(batch, vectors, provider.model_id)


def model_alone(provider, texts: list[str], batch_size: int = 64) -> tuple[int, np.ndarray]:
    """The model on ``texts`` in batches as embed_pending hands them over, nothing else: (texts, vectors)."""
    vectors = [provider.embed_documents(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    return len(texts), np.vstack(vectors)


def as_exported(threads: int = 1) -> LocalEmbeddingProvider:
    """The int8-dynamic provider as it was: the graph as exported, ``threads`` onnxruntime threads in
    one text, one text at a time."""
    provider = LocalEmbeddingProvider(threads=1)
    provider._load()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    provider._session = ort.InferenceSession(str(provider.model_path()), options, providers=["CPUExecutionProvider"])
    return provider


def derivation_1(threads: int, folder: str) -> tuple[LocalEmbeddingProvider, Callable[[], object]]:
    """The int8-dynamic provider on the graph as derivation 1 made it (quantized only, into ``folder``;
    its NaN guards dropped when loaded, every fusion left to onnxruntime at each load), and that load."""
    import onnx

    quantized = local_model.quantize_model(local_model.packaged_model_path(), Path(folder) / "q.onnx")

    def load():
        graph = onnx.load(str(quantized))
        local_model.drop_nan_guards(graph)
        return local_model.open_session(graph.SerializeToString())

    provider = LocalEmbeddingProvider(threads=threads)
    provider._load()
    provider._session = load()
    return provider, load


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
    connection.settings_dict["TEST"]["NAME"] = args.database
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=args.keep_db)
    try:
        if Document.objects.count() < args.records:
            report = import_records(dumps(record) for record in generate(args.records, 0))
            assert not report.problems, report.problems[:3]
        records = Document.objects.count()
        distinct = Document.objects.values("content_hash").distinct().count()
        settings = {"EMBEDDING_THREADS": args.threads} if args.threads is not None else {}
        with override_settings(**settings):
            after = get_provider()
            after.embed_query("warm up")
            if args.baseline == "before":
                before = as_exported()
                before.embed_query("warm up")

                def baseline():
                    return embed_pending_before(before)

            elif args.baseline == "graph":
                with tempfile.TemporaryDirectory() as folder:
                    previous, _ = derivation_1(after.threads, folder)
                previous.embed_query("warm up")

                def baseline():
                    embeddings._provider = previous  # what get_provider() hands embed_pending
                    try:
                        return embed_pending()
                    finally:
                        embeddings._provider = after

            else:
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
            results: dict[str, list[dict]] = {args.baseline: [], "after": []}
            vectors = {}
            for _ in range(args.rounds):
                results[args.baseline].append(timed_run(args.baseline, baseline))
                vectors[args.baseline] = alone["vectors"] if args.baseline == "model" else stored_vectors()
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
            pairs = zip(results["after"], results[args.baseline], strict=True)
            ratios = [a["records_s"] / b["records_s"] for a, b in pairs]
            each = ", ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"# after / {args.baseline}, records/s: median {statistics.median(ratios):.2f} (pair by pair {each})")
            # The model's float32 against what the table keeps (halfvec): up to half a float16 step apart.
            cosines = np.sum(vectors[args.baseline] * vectors["after"], axis=1) / (
                np.linalg.norm(vectors[args.baseline], axis=1) * np.linalg.norm(vectors["after"], axis=1)
            )
            largest = np.abs(vectors[args.baseline] - vectors["after"]).max()
            halved = np.abs(vectors[args.baseline].astype(np.float16).astype(np.float32) - vectors["after"]).max()
            print(
                f"# stored vectors, after against {args.baseline}: largest difference {largest:.3g} "
                f"({halved:.3g} once rounded to float16), "
                f"lowest cosine {cosines.min():.7f}"
            )
            breakdown(after, args.sample)
    finally:
        teardown_databases(old_config, verbosity=0, keepdb=args.keep_db)


# -- --variants: the packaged graph against int8-dynamic --------------------------------------------

BODY_FIELDS = ("description", "acceptance_criteria")


def demo_texts(count: int) -> list[str]:
    """The text the worker would embed for the first `count` demo bugs and tests."""
    texts = []
    for record in generate(count * 4, 0):
        if record["kind"] not in ("bug", "test"):
            continue
        raw = record.get("raw_data") or {}
        steps = record.get("steps") or raw.get("steps") or []
        parts = [record.get("description"), raw.get("actual_result"), raw.get("expected_result"), *steps]
        texts.append(document_text(record["title"], *[p for p in parts if isinstance(p, str)]))
        if len(texts) == count:
            break
    return texts


def measure(variant: str, texts: list[str], rounds: int) -> dict:
    provider = LocalEmbeddingProvider(variant=variant, threads=1)
    started = time.perf_counter()
    provider.embed_query("warm up")
    load = time.perf_counter() - started
    query_ms = []
    for _ in range(rounds):
        for query in QUERIES:
            t = time.perf_counter()
            provider.embed_query(query)
            query_ms.append((time.perf_counter() - t) * 1000)
    started = time.perf_counter()
    vectors = provider.embed_documents(texts)
    seconds = time.perf_counter() - started
    return {"load": load, "query": query_ms, "docs_per_s": len(texts) / seconds, "vectors": vectors}


def compare_variants(args) -> None:
    texts = demo_texts(args.documents)
    results = {variant: measure(variant, texts, args.rounds) for variant in (VARIANT_PACKAGED, VARIANT_DYNAMIC)}
    baseline = results[VARIANT_PACKAGED]
    agreement = np.sum(baseline["vectors"] * results[VARIANT_DYNAMIC]["vectors"], axis=1)

    print(f"# local embeddings: {len(texts)} demo documents, {len(QUERIES)} queries x {args.rounds} rounds, one thread")
    print(f"# machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| variant | load s | query p50 ms | query p95 ms | documents/s | speed vs int8 |")
    print("|---|---|---|---|---|---|")
    for variant, r in results.items():
        print(
            f"| {variant} | {r['load']:.2f} | {statistics.median(r['query']):.1f} | {percentile(r['query'], 95):.1f} "
            f"| {r['docs_per_s']:.1f} | {r['docs_per_s'] / baseline['docs_per_s']:.2f} |"
        )
    print(
        f"# cosine of int8-dynamic to int8, per document: mean {agreement.mean():.4f}, "
        f"min {agreement.min():.4f}, 5th percentile {np.percentile(agreement, 5):.4f}"
    )


def compare_graphs(args) -> None:
    """The model alone on the int8-dynamic graph of derivation 1 against today's, alternating: opening the
    session, then embedding (wall time and this process's CPU time, which other jobs disturb less)."""
    texts = demo_texts(args.documents)
    settings = {"EMBEDDING_THREADS": args.threads} if args.threads is not None else {}
    with override_settings(**settings), tempfile.TemporaryDirectory() as folder:
        after = get_provider()
        after.embed_query("warm up")
        before, load_before = derivation_1(after.threads, folder)
        before.embed_query("warm up")
        path = str(after.model_path())
        new = f"derivation {local_model.DERIVATION}"
        runs: dict[str, dict[str, list[float]]] = {
            name: {"load": [], "texts_s": [], "cpu_ms": []} for name in ("derivation 1", new)
        }
        loads = {"derivation 1": load_before, new: lambda: local_model.open_session(path)}
        providers = {"derivation 1": before, new: after}
        vectors = {}
        for round_ in range(args.rounds):
            for name in list(providers)[:: 1 if round_ % 2 == 0 else -1]:
                started = time.perf_counter()
                loads[name]()
                runs[name]["load"].append(time.perf_counter() - started)
                started, cpu = time.perf_counter(), time.process_time()
                vectors[name] = providers[name].embed_documents(texts)
                runs[name]["cpu_ms"].append(1000 * (time.process_time() - cpu) / len(texts))
                runs[name]["texts_s"].append(len(texts) / (time.perf_counter() - started))
    print(f"# the model alone, int8-dynamic: {len(texts)} demo texts x {args.rounds} rounds, alternating")
    print(
        f"# machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"onnxruntime {ort.__version__}; EMBEDDING_THREADS={after.threads}; load {os.getloadavg()[0]:.1f}"
    )
    print("| graph | session load s | texts/s | CPU ms a text |")
    print("|---|---|---|---|")
    for name, measured in runs.items():
        print(
            f"| {name} | {statistics.median(measured['load']):.2f} | {statistics.median(measured['texts_s']):.1f} "
            f"| {statistics.median(measured['cpu_ms']):.1f} |"
        )
    old, now = runs.values()
    for key, label, better in (("load", "session load", -1), ("texts_s", "texts/s", 1), ("cpu_ms", "CPU ms", -1)):
        ratios = [(b / a) ** better for a, b in zip(old[key], now[key], strict=True)]
        each = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        print(f"# speed-up, {label}: median {statistics.median(ratios):.3f} (pair by pair {each})")
    first, second = vectors.values()
    print(f"# vectors: the same bits {np.array_equal(first, second)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="demo records in the database")
    parser.add_argument("--rounds", type=int, default=3, help="before/after pairs (with --variants: query rounds)")
    parser.add_argument("--sample", type=int, default=300, help="records in the one-thread breakdown")
    parser.add_argument("--threads", type=int, default=None, help="EMBEDDING_THREADS for the after runs")
    parser.add_argument(
        "--baseline", choices=("model", "before", "graph"), default="model", help="embed_pending against"
    )
    parser.add_argument("--database", default="test_bench_embed", help="the database it builds (and drops)")
    parser.add_argument("--keep-db", action="store_true", help="keep the database (and reuse it next time)")
    parser.add_argument("--variants", action="store_true", help="compare the two local variants instead (no database)")
    parser.add_argument("--graphs", action="store_true", help="derivation 1 against today's, the model alone")
    parser.add_argument("--documents", type=int, default=300, help="with --variants, --graphs: demo texts embedded")
    args = parser.parse_args()
    if args.variants:
        compare_variants(args)
    elif args.graphs:
        compare_graphs(args)
    else:
        compare_runs(args)


if __name__ == "__main__":
    main()
