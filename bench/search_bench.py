"""Search latency at scale: keyword, hybrid and semantic, against a naive baseline and the peers.

    .venv/bin/python bench/search_bench.py [--records 100000] [--rounds 5] [--peers] [--restricted]

Builds its own database of N demo records (bench/corpus.py: fast-path
vectors unless --real-vectors; dropped at the end unless --keep-db, and then
read by the other harnesses). Every record's description ends with a word
every record holds (queries.UNIVERSAL), so "a word in every record" is a
real case; the queries (bench/queries.py) mix words of every frequency,
phrases, prefixes, keys and questions.

Timing excludes the query embedding (queries are embedded once, before
timing) and includes everything else search() does: both arms, fusion,
boosts, facets, totals, the page and its snippets. Reported: p50 and p95
over all queries x rounds, per mode, with the ratio to the baseline
(ts_rank over every match + RRF of two top-100 lists) timed in turns with
them; --peers adds SQLite FTS5 and Django icontains (bench/peers.py) and
every query again with a filter; the semantic arm's recall@10 against an
exact scan.
"""

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

import corpus
import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import override_settings
from peers import Filters, Fts5, icontains
from queries import QUERIES
from timing import alternated, flat, machine, ms, percentile

from search.contract import SearchRequest
from search.indexing.embeddings import get_provider
from search.operations.search import search
from search.query.scope import Scope
from search.ranking import semantic

# The filtered queries' filter (--peers): critical and high bugs, about a
# tenth of the records, a common triage view.
FILTER = Filters(entities=("bug",), severity=("critical", "high"))


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


def block_counts() -> tuple[int, int]:
    """Blocks this database found in shared_buffers, and those it had to read."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()


def semantic_recall(vectors: list[np.ndarray], rounds: int) -> tuple[list[float], float, float]:
    """Top-20 times of the semantic arm, and its recall@10 against an exact
    scan: strictly by record, and counting ties. One demo record in ten
    repeats another's text, so the exact top 10 often ends inside a group of
    equally distant records, of which the scan keeps an arbitrary few; a
    neighbour as near as the exact tenth is as right as the one it replaces
    (ann-benchmarks counts recall the same way)."""
    provider = get_provider()
    times, strict, tied = [], [], []
    scope = Scope()
    for _ in range(rounds):
        for vector in vectors:
            times.append(ms(lambda v=vector: semantic.nearest(v, provider.model_id, scope, 20)))
    for vector in vectors:
        approximate = semantic.nearest(vector, provider.model_id, scope, 20).ranked[:10]
        literal = "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")
            cursor.execute(
                "SELECT id, embedding <=> %s::halfvec FROM search_document WHERE embedding_model = %s "
                "ORDER BY embedding <=> %s::halfvec LIMIT 10",
                [literal, provider.model_id, literal],
            )
            exact = cursor.fetchall()
        strict.append(len({doc for doc, _ in approximate} & {doc for doc, _ in exact}) / len(exact))
        tenth = exact[-1][1]
        tied.append(sum(1 - similarity <= tenth + 1e-6 for _, similarity in approximate) / len(exact))
    return times, statistics.mean(strict), statistics.mean(tied)


def ef_sweep(bench_vectors: list[np.ndarray], values: list[int], rounds: int) -> list[tuple]:
    """Recall@10 (ties counted) and top-20 times of the semantic arm at each
    hnsw.ef_search, on the bench queries and on them plus 170 record titles
    embedded as queries (easier: each has its own record nearby)."""
    provider = get_provider()
    with connection.cursor() as cursor:
        cursor.execute("SELECT title FROM search_document ORDER BY md5(id::text) LIMIT 170")
        titles = [provider.embed_query(row[0]) for row in cursor.fetchall()]
    rows = []
    for ef in values:
        with override_settings(SEARCH_RANKING={**settings.SEARCH_RANKING, "hnsw_ef_search": ef}):
            times, _, bench_recall = semantic_recall(bench_vectors, rounds)
            _, _, title_recall = semantic_recall(titles, 1)
        n, m = len(bench_vectors), len(titles)
        rows.append((ef, bench_recall, (bench_recall * n + title_recall * m) / (n + m), times))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--real-vectors", action="store_true", help="embed every record (slow), not the fast path")
    parser.add_argument("--plot", metavar="PNG", help="also draw each query's median latency per mode (matplotlib)")
    parser.add_argument(
        "--restricted",
        action="store_true",
        help="also time keyword and hybrid as a user whose team has half the products (statistics counted "
        "over their records, backlog.access)",
    )
    parser.add_argument(
        "--ef-sweep",
        type=lambda v: [int(x) for x in v.split(",")],
        metavar="EF,EF",
        help="also measure the semantic arm's recall and speed at these hnsw.ef_search values",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also time SQLite FTS5 (bm25) and Django icontains on the same records, and every query again "
        f"with a filter ({', '.join(f'{k}={v}' for k, v in FILTER.request().items())}) on all of them",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON (for bench/growth_chart.py)")
    parser.add_argument(
        "--database",
        metavar="NAME",
        help="the database to build or reuse (default: one per size); two versions of the code compared "
        "each need their own when their schemas differ",
    )
    args = parser.parse_args()

    # A database per size, so the sizes of a growth chart can be kept side by side.
    with corpus.database(
        args.records, seed=args.seed, keep=args.keep_db, real_vectors=args.real_vectors, database=args.database
    ) as built:
        name = corpus.name(args.records, args.real_vectors) if args.database is None else args.database
        figures: dict = {"records": args.records, "build": built}
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            figures["database_bytes"] = cursor.fetchone()[0]
        print(f"# database on disk: {figures['database_bytes'] / 2**30:.2f} GB")
        if args.peers:
            fts5 = Fts5(Path(tempfile.gettempdir()) / f"{name}.fts5.sqlite")
            if fts5.count() != args.records:
                copied, seconds = fts5.build()
                figures["build"]["fts5_s"] = seconds
                print(f"# SQLite FTS5: {copied:,} records copied and indexed in {seconds:.0f} s ({fts5.path})")
        print(f"# {corpus.prewarm()}")
        provider = get_provider()
        vectors = {query: provider.embed_query(query) for query in QUERIES}
        original = provider.embed_query
        provider.embed_query = lambda text: vectors[text] if text in vectors else original(text)
        # In turns (each round, each query: every mode, the peers, the baseline),
        # so all see the same moments of a shared machine. A first round, not
        # timed, warms PostgreSQL's buffer cache, which a server started by
        # this process begins without (a long-running one has it).
        modes = ("keyword", "hybrid", "semantic")
        runs = {mode: lambda q, m=mode: search(SearchRequest(query=q, mode=m)) for mode in modes}
        if args.restricted:
            user, share = corpus.half_the_products()
            for mode in modes:
                runs[f"{mode} ({share:.0%} of records visible)"] = lambda q, m=mode, u=user: search(
                    SearchRequest(query=q, mode=m), u
                )
        if args.peers:
            runs["SQLite FTS5 bm25"] = fts5.search
            runs["Django icontains"] = icontains
            for mode in modes:
                runs[f"{mode}, filtered"] = lambda q, m=mode: search(SearchRequest(query=q, mode=m, **FILTER.request()))
            runs["SQLite FTS5 bm25, filtered"] = lambda q: fts5.search(q, FILTER)
            runs["Django icontains, filtered"] = lambda q: icontains(q, FILTER)
        runs["baseline (naive)"] = lambda q: naive(q, vectors[q])
        alternated(runs, QUERIES, rounds=0, warmup=1)
        blocks = block_counts()
        by_query = alternated(runs, QUERIES, args.rounds, warmup=0)
        hit, read = (now - before for now, before in zip(block_counts(), blocks, strict=True))
        rows = {mode: flat(queries) for mode, queries in by_query.items()}
        slowest = {
            mode: sorted(((statistics.median(times), q) for q, times in by_query[mode].items()), reverse=True)[:3]
            for mode in by_query
            if mode != "baseline (naive)"
        }
        semantic_times, recall, recall_tied = semantic_recall(list(vectors.values()), args.rounds)
        sweep = ef_sweep(list(vectors.values()), args.ef_sweep, args.rounds) if args.ef_sweep else []
        provider.embed_query = original
        with connection.cursor() as cursor:
            cursor.execute("SHOW shared_buffers")
            shared_buffers = cursor.fetchone()[0]

    baseline = statistics.median(rows["baseline (naive)"])
    print(f"# search latency: {args.records:,} demo records, {len(QUERIES)} queries x {args.rounds} rounds")
    ran_on = machine()
    print(f"# machine: {ran_on}, DEBUG {settings.DEBUG}")
    vectors_are = "REAL (all embedded)" if args.real_vectors else "FAST PATH (1,000 embedded, the rest derived)"
    print(f"# vectors: {vectors_are}; query embedding excluded")
    print(
        f"# buffer cache (shared_buffers {shared_buffers}) in the timed rounds: {hit:,} blocks found, "
        f"{read:,} read ({read / max(hit + read, 1):.2%})"
    )
    print("| what | p50 ms | p95 ms | median / baseline |")
    print("|---|---|---|---|")
    for name, times in rows.items():
        print(
            f"| {name} | {statistics.median(times):.1f} | {percentile(times, 95):.1f} | "
            f"{statistics.median(times) / baseline:.2f} |"
        )
    print(
        f"| semantic arm top-20 | {statistics.median(semantic_times):.1f} | {percentile(semantic_times, 95):.1f} "
        f"| recall@10 vs exact scan: {recall_tied:.3f} counting ties ({recall:.3f} by record) |"
    )
    if args.peers:
        p95 = {name: percentile(times, 95) for name, times in rows.items()}
        print("| peer p95 / ours p95 | keyword | hybrid | semantic |")
        print("|---|---|---|---|")
        for peer in ("Django icontains", "SQLite FTS5 bm25"):
            for suffix in ("", ", filtered"):
                print(
                    f"| {peer}{suffix} | "
                    + " | ".join(f"{p95[peer + suffix] / p95[mode + suffix]:.1f}x" for mode in modes)
                    + " |"
                )
    if args.json:
        figures.update(
            machine=ran_on,
            rounds=args.rounds,
            queries=len(QUERIES),
            vectors="real" if args.real_vectors else "fast path",
            latency={
                name: {"p50": statistics.median(t), "p95": percentile(t, 95)}
                for name, t in (*rows.items(), ("semantic arm top-20", semantic_times))
            },
            recall_at_10=recall_tied,
        )
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        print(f"# figures: {args.json}")
    for mode, queries in slowest.items():
        print(f"# slowest {mode} queries (median): " + ", ".join(f"{q!r} {t:.1f} ms" for t, q in queries))
    if sweep:
        print("| hnsw.ef_search | recall@10, bench queries | recall@10, with 170 record titles | p50 ms | p95 ms |")
        print("|---|---|---|---|---|")
        for ef, bench_recall, all_recall, times in sweep:
            print(
                f"| {ef} | {bench_recall:.3f} | {all_recall:.3f} | "
                f"{statistics.median(times):.1f} | {percentile(times, 95):.1f} |"
            )
    if args.plot:
        plot(by_query, args.plot, f"{args.records:,} demo records, {vectors_are.split(' (')[0].lower()} vectors")


def plot(by_query: dict[str, dict[str, list[float]]], path: str, subtitle: str) -> None:
    """One row per query, one bar per mode: the median, on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(by_query)
    fig, ax = plt.subplots(figsize=(9, 10))
    height = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        medians = [statistics.median(by_query[mode][q]) for q in QUERIES]
        ax.barh([y + i * height for y in range(len(QUERIES))], medians, height, label=mode)
    ax.set_yticks([y + height for y in range(len(QUERIES))], [q[:38] for q in QUERIES], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ticks = [t for t in (1, 2, 5, 10, 20, 30, 50, 100, 200, 500) if t <= 2 * max(ax.get_xlim())]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("median latency, ms (log scale)")
    ax.set_title(f"search() per query: {subtitle}", fontsize=10)
    for target, label, side in ((20, "keyword p95 target ", "right"), (30, " hybrid p95 target", "left")):
        ax.axvline(target, color="grey", linestyle=":", linewidth=1)
        ax.text(target, -0.8, label, fontsize=7, color="grey", ha=side)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"# plot: {path}")


if __name__ == "__main__":
    main()
