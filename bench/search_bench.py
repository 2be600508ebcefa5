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
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import override_settings, setup_databases, teardown_databases
from peers import Filters, Fts5, icontains
from queries import QUERIES, UNIVERSAL

from backlog.demo import generate
from backlog.interchange import dumps
from backlog.management.commands._progress import progress_bars
from backlog.services import import_records
from search.contract import SearchRequest
from search.indexing.embeddings import document_text, get_provider
from search.indexing.vectors import embed_pending
from search.operations.search import search
from search.query.scope import Scope
from search.ranking import semantic

# Per component; at 0.05 the noise (norm ~1) swamped the real vectors and made
# the set far harder for HNSW than any text embedding (recall 0.4 at ef 40).
NOISE = 0.02
# The filtered queries' filter (--peers): critical and high bugs, about a
# tenth of the records, a common triage view.
FILTER = Filters(entities=("bug",), severity=("critical", "high"))


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
    """Embed `sample` records for real; give every other one the vector of a
    random embedded record of its product plus noise. Written with COPY in
    binary: at a million records, formatting vectors as text took longer
    than building the index."""
    from pgvector import HalfVector
    from pgvector.psycopg import register_vector

    provider = get_provider()
    rng = np.random.default_rng(seed)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, product_id FROM search_document ORDER BY id")
        rows = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
        chosen = np.array(sorted(random.Random(seed).sample(range(len(rows)), min(sample, len(rows)))))
        cursor.execute(
            "SELECT id, title, body FROM search_document WHERE id = ANY(%s) ORDER BY id", [rows[chosen, 0].tolist()]
        )
        real = provider.embed_documents([document_text(title, body) for _, title, body in cursor.fetchall()])
    by_product: dict[int, list[int]] = {}
    for position, i in enumerate(chosen):
        by_product.setdefault(int(rows[i, 1]), []).append(position)
    everyone = np.arange(len(chosen))
    base = np.empty(len(rows), dtype=np.int64)
    for product in np.unique(rows[:, 1]):
        members = rows[:, 1] == product
        pool = np.array(by_product.get(int(product), everyone))
        base[members] = pool[rng.integers(len(pool), size=int(members.sum()))]
    vectors = real[base] + NOISE * rng.standard_normal((len(rows), real.shape[1]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[chosen] = real  # the embedded records keep their real vectors
    connection.ensure_connection()
    register_vector(connection.connection)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE fast_path (id bigint, e halfvec) ON COMMIT DROP")
        with cursor.cursor.copy("COPY fast_path (id, e) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "halfvec"])
            for i in range(len(rows)):
                copy.write_row((int(rows[i, 0]), HalfVector(vectors[i])))
        cursor.execute(
            "UPDATE search_document d SET embedding = v.e, embedding_model = %s, embedding_hash = d.content_hash "
            "FROM fast_path v WHERE d.id = v.id",
            [provider.model_id],
        )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE search_document")


def index_definition(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        return cursor.fetchone()[0]


def build_index(name: str, definition: str) -> tuple[float, int]:
    """Drop the index and build it from `definition` on the full table, as a
    bulk load (or REINDEX) does: (seconds, bytes). The HNSW build gets
    maintenance_work_mem for its whole graph, as pgvector's docs advise,
    and one parallel worker beside the leader (two cores)."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {name}")
        cursor.execute("SET maintenance_work_mem = '3GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
        started = time.perf_counter()
        cursor.execute(definition)
        seconds = time.perf_counter() - started
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("RESET max_parallel_maintenance_workers")
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [name])
        return seconds, cursor.fetchone()[0]


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


def half_the_products():
    """A user whose one team has every other product; (the user, the share of records they see)."""
    from django.contrib.auth.models import Group, User

    from backlog.models import Product

    team, _ = Group.objects.get_or_create(name="bench half")
    products = list(Product.objects.order_by("key"))
    for product in products[::2]:
        product.teams.add(team)
    user, _ = User.objects.get_or_create(username="bench-half")
    user.groups.add(team)
    with connection.cursor() as cursor:
        cursor.execute("SELECT avg((product_id = ANY(%s))::int) FROM search_document", [[p.pk for p in products[::2]]])
        share = float(cursor.fetchone()[0])
    return user, share


def prewarm() -> str:
    """Read the index table's pages into memory (pg_prewarm), as a server
    that has been running has them: this harness's server starts with the
    process, and the first, untimed round warms only what its queries touch
    (this machine's kernel also reclaims idle page cache, so a later run can
    find the files on disk). TOAST (the text, the tsvectors, the vectors)
    goes to the kernel's cache; the table and its indexes to shared_buffers,
    the ones every search reads last, so that they stay. What it did, in words."""
    with connection.cursor() as cursor:
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        except Exception as exc:  # a server without the extension, or no right to add it
            return f"not prewarmed ({str(exc).splitlines()[0]})"
        cursor.execute(
            """
            SELECT sum(pg_prewarm(c.oid, 'read')) FROM pg_class c
            WHERE c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname = 'search_document')
            """
        )
        toast = cursor.fetchone()[0] or 0
        cursor.execute(
            """
            SELECT sum(pg_prewarm(c.oid, 'buffer')) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
            WHERE i.indrelid = 'search_document'::regclass
              AND c.relname NOT IN ('search_document_fts', 'search_document_hnsw', 'search_document_pkey')
            """
        )
        small = cursor.fetchone()[0] or 0
        blocks = toast + small
        for name in ("search_document", "search_document_pkey", "search_document_hnsw", "search_document_fts"):
            cursor.execute("SELECT pg_prewarm(%s::regclass, 'buffer')", [name])
            blocks += cursor.fetchone()[0]
    return f"prewarmed {blocks * 8 / 1024:,.0f} MB (pg_prewarm)"


def block_counts() -> tuple[int, int]:
    """Blocks this database found in shared_buffers, and those it had to read."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


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
            times.append(timed(lambda v=vector: semantic.nearest(v, provider.model_id, scope, 20)))
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


def kept_database(records: int, real_vectors: bool = False) -> str:
    """The database this harness keeps for a size (--keep-db), which the other harnesses read."""
    name = "test_bench_search_real" if real_vectors else "test_bench_search"
    return name if records == 100_000 else f"{name}_{records}"


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
    name = args.database or kept_database(args.records, args.real_vectors)
    connection.settings_dict["TEST"]["NAME"] = name
    # Not serialized: Django copies a test database's every row into memory
    # for TransactionTestCase, gigabytes at a million records.
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=args.keep_db, serialized_aliases=set())
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_document")
            present = cursor.fetchone()[0]
        figures: dict = {"records": args.records, "build": {}}
        if present < args.records:
            started = time.perf_counter()
            load(args.records, args.seed)
            figures["build"]["import_s"] = time.perf_counter() - started
            print(f"# imported {args.records:,} records in {figures['build']['import_s']:.0f} s (indexes kept current)")
            # The indexes, built again on the full table: what a bulk load
            # into an empty table costs. Dropped first, so that filling in the
            # vectors does not update them row by row.
            indexes = ("search_document_fts", "search_document_title_trgm", "search_document_hnsw")
            definitions = {index: index_definition(index) for index in indexes}
            with connection.cursor() as cursor:
                cursor.execute("DROP INDEX " + ", ".join(indexes))
            if not args.real_vectors:
                started = time.perf_counter()
                fast_path_vectors(1000, args.seed)
                print(f"# FAST PATH vectors (1,000 real, the rest derived) in {time.perf_counter() - started:.0f} s")
            for index, definition in definitions.items():
                seconds, size = figures["build"][index] = build_index(index, definition)
                print(f"# {index} built in {seconds:.0f} s, {size / 2**20:,.0f} MB")
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
        if args.real_vectors:  # resumes where a killed run stopped
            started = time.perf_counter()
            if written := embed_pending(batch_size=128, progress=progress_bars(True)):
                with connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE search_document")
                print(f"# embedded {written:,} records in {time.perf_counter() - started:.0f} s")
        warmed = prewarm()
        print(f"# {warmed}")
        provider = get_provider()
        vectors = {query: provider.embed_query(query) for query in QUERIES}
        original = provider.embed_query
        provider.embed_query = lambda text: vectors[text] if text in vectors else original(text)
        # Interleaved (each round, each query: keyword, hybrid, baseline), so
        # the three see the same moments of a shared machine. The first round
        # is not timed: it warms PostgreSQL's buffer cache, which a server
        # started by this process begins without (a long-running one has it).
        modes = ("keyword", "hybrid", "semantic")
        runs = {mode: lambda q, m=mode: search(SearchRequest(query=q, mode=m)) for mode in modes}
        if args.restricted:
            user, share = half_the_products()
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
        by_query = {name: {q: [] for q in QUERIES} for name in runs}
        for round_ in range(args.rounds + 1):
            if round_ == 1:
                blocks = block_counts()
            for q in QUERIES:
                times = [timed(lambda q=q, run=run: run(q)) for run in runs.values()]
                if round_:
                    for name, elapsed in zip(by_query, times, strict=True):
                        by_query[name][q].append(elapsed)
        hit, read = (now - before for now, before in zip(block_counts(), blocks, strict=True))
        rows = {mode: [t for times in queries.values() for t in times] for mode, queries in by_query.items()}
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
    finally:
        teardown_databases(old_config, verbosity=0, keepdb=args.keep_db)

    baseline = statistics.median(rows["baseline (naive)"])
    print(f"# search latency: {args.records:,} demo records, {len(QUERIES)} queries x {args.rounds} rounds")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"# machine: {machine}, DEBUG {settings.DEBUG}")
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
            machine=machine,
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
