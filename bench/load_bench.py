"""Throughput and latency under load: the production server beside runserver, in one run.

    .venv/bin/python bench/load_bench.py [--clients 4] [--seconds 30] [--database test_bench_search]
    .venv/bin/python bench/load_bench.py --servers gunicorn,gunicorn+pool,gunicorn+pgbouncer

Serves the database kept by `bench/search_bench.py --keep-db` (100,000
demo records) twice on loopback, one server at a time: Django's runserver
and gunicorn as `manage.py serve` starts it (runtime/supervisor.py's
gunicorn_command; SERVE_WORKERS and SERVE_THREADS apply). For
each, `--clients` threads, each with its own keep-alive connection and a
token, send a fixed mix for `--seconds` after a warm-up: hybrid search
(the default mode) 40%, keyword search 30%, similar 10%, batch get 10%,
timeline 10%, keys and queries drawn from the corpus with one seed.
Bounded: every server is stopped at the end, every request has a timeout.

Connection pooling (docs/deploy.md): `gunicorn+pool` serves with Django's
psycopg pool in each worker (DATABASE_POOL, `--pool`), `gunicorn+pgbouncer`
through a PgBouncer in transaction mode with `--pgbouncer-size` server
connections (tests/pgbouncer.py; Debian's package).

Reported per server: requests, throughput, p50/p95/p99 latency, errors
(anything but 200), the server connections open to the database (most and
mean, from pg_stat_activity every 0.2 s while measuring), and the ratio of
throughputs.
"""

import argparse
import collections
import contextlib
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

from processes import ROOT, free_port
from timing import machine

sys.path.insert(0, str(ROOT))

QUERIES = [
    "renewal",
    "checkout spinner",
    "login session expired",
    "payment sheet does not open",
    "crash on start",
    "export pdf",
    "invoice total",
    "how do I reset my password",
    "sync",
    "android",
]
MIX = [("hybrid", 40), ("keyword", 30), ("similar", 10), ("records", 10), ("timeline", 10)]


def prepare(database: str) -> tuple[str, list[str], list[str]]:
    """A token, some record keys and 3,000 queries (the first words of bug
    titles: few repeat, so the servers' query-vector caches rarely help) of
    the bench database."""
    os.environ["EMBEDDED_PG_DATABASE"] = database
    sys.path.insert(0, str(ROOT / "bench"))
    import django_setup  # noqa: F401  (sets Django up)

    # isort: split

    from django.contrib.auth.models import User

    from accounts.tokens import issue
    from backlog.models import Bug

    user, _ = User.objects.get_or_create(username="load-bench", defaults={"is_superuser": True})
    user.is_superuser = True
    user.save()
    _, key = issue(user, "load bench", "write")
    keys = list(Bug.objects.order_by("id").values_list("key", flat=True)[:: max(1, Bug.objects.count() // 500)])
    titles = Bug.objects.order_by("id").values_list("title", flat=True)[:: max(1, Bug.objects.count() // 3000)]
    queries = [" ".join(title.split()[: random.Random(title).randint(2, 5)]) for title in titles]
    from django.db import connections

    connections.close_all()
    return key, keys, queries


def start(server: str, port: int, env: dict) -> subprocess.Popen:
    if server == "runserver":
        command = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    else:
        from runtime.supervisor import gunicorn_command

        command = gunicorn_command(f"127.0.0.1:{port}")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise SystemExit(f"{server} exited with status {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"{server} did not answer within 120 s")
        time.sleep(0.3)


def request_path(kind: str, rng: random.Random, keys: list[str], queries: list[str]) -> str:
    if kind in ("hybrid", "keyword"):
        return "/api/search?" + urlencode({"query": rng.choice(queries), "mode": kind})
    if kind == "similar":
        return f"/api/similar/{rng.choice(keys)}"
    if kind == "records":
        return "/api/records?" + urlencode({"keys": ",".join(rng.sample(keys, 5))})
    return f"/api/timeline/{rng.choice(keys)}"


def upstream() -> dict:
    """The bench database's server (this process set Django up in prepare())."""
    from django.db import connection

    from tests.pgbouncer import upstream

    return upstream(connection)


def count_connections(server: dict, database: str, until: threading.Event, counts: list[int]) -> None:
    """Append the number of server processes serving `database`, every 0.2 s until `until` is set."""
    import psycopg

    # Connected to another database, so that this connection is not counted.
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as conn:
        while not until.wait(0.2):
            counts.append(
                conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'",
                    [database],
                ).fetchone()[0]
            )


def load(
    port: int,
    token: str,
    keys: list[str],
    queries: list[str],
    clients: int,
    seconds: float,
    warmup: float,
    database: str,
) -> dict:
    kinds = [kind for kind, weight in MIX for _ in range(weight)]
    times: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    begin = time.monotonic() + warmup
    end = begin + seconds

    def client(seed: int) -> None:
        rng = random.Random(seed)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Authorization": f"Token {token}"}
        while (now := time.monotonic()) < end:
            path = request_path(rng.choice(kinds), rng, keys, queries)
            started = time.perf_counter()
            try:
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as exc:
                status = type(exc).__name__
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            elapsed = (time.perf_counter() - started) * 1000
            if now >= begin:
                with lock:
                    if status == 200:
                        times.append(elapsed)
                    else:
                        errors.append(f"{status} {path}")
        connection.close()

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, begin - time.monotonic()))
    measured, connections = threading.Event(), []
    counter = threading.Thread(target=count_connections, args=(upstream(), database, measured, connections))
    counter.start()
    for thread in threads:
        thread.join()
    measured.set()
    counter.join()
    times.sort()

    def pct(p: float) -> float:
        return times[min(len(times) - 1, int(p / 100 * len(times)))] if times else float("nan")

    return {
        "requests": len(times) + len(errors),
        "throughput": (len(times) + len(errors)) / seconds,
        "p50": statistics.median(times) if times else float("nan"),
        "p95": pct(95),
        "p99": pct(99),
        "errors": errors,
        "connections_max": max(connections, default=0),
        "connections_mean": statistics.fmean(connections) if connections else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--database", default="test_bench_search")
    parser.add_argument(
        "--servers", default="runserver,gunicorn", help="of runserver, gunicorn, gunicorn+pool, gunicorn+pgbouncer"
    )
    parser.add_argument("--pool", default="1,2", help="DATABASE_POOL (MIN,MAX a worker) for gunicorn+pool")
    parser.add_argument("--pgbouncer-size", type=int, default=4, help="server connections for gunicorn+pgbouncer")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    token, keys, queries = prepare(args.database)
    queries += QUERIES
    env = {**os.environ, "EMBEDDED_PG_DATABASE": args.database, "DEBUG": "false", "LOG_LEVEL": "ERROR"}
    env.setdefault("SECRET_KEY", "load-bench-only")
    # One user sends thousands of searches a minute here: the rate limit would answer 429.
    env.setdefault("SEARCH_RATE_LIMIT", "off")
    results, runs = {}, collections.Counter()
    for setup in args.servers.split(","):
        server, _, pooling = setup.partition("+")
        port = free_port()
        with contextlib.ExitStack() as stack:
            served = dict(env)
            if pooling == "pool":
                served["DATABASE_POOL"] = args.pool
            elif pooling == "pgbouncer":
                from tests.pgbouncer import PgBouncer

                bouncer = stack.enter_context(PgBouncer(upstream(), args.pgbouncer_size))
                served.update(DATABASE_URL=bouncer.url(args.database), DATABASE_POOLER="pgbouncer-transaction")
            elif pooling:
                raise SystemExit(f"--servers: {setup}? pooling is pool or pgbouncer")
            process = start(server, port, served)
            runs[setup] += 1  # a setup named twice (to see the noise between runs) is reported twice
            name = setup if runs[setup] == 1 else f"{setup} ({runs[setup]})"
            try:
                results[name] = load(port, token, keys, queries, args.clients, args.seconds, args.warmup, args.database)
            finally:
                process.terminate()
                process.wait(60)

    print(f"# load: {args.clients} clients x {args.seconds:.0f} s (after {args.warmup:.0f} s warm-up), mix {MIX}")
    print(
        f"# database {args.database}; machine: {machine()}; gunicorn workers {env.get('SERVE_WORKERS', 'default')}, "
        f"threads {env.get('SERVE_THREADS', 'default')}"
    )
    print(f"# DATABASE_POOL for +pool: {args.pool}; PgBouncer server connections for +pgbouncer: {args.pgbouncer_size}")
    print("| server | requests | req/s | p50 ms | p95 ms | p99 ms | errors | connections most | mean |")
    print("|---|---|---|---|---|---|---|---|---|")
    for server, r in results.items():
        print(
            f"| {server} | {r['requests']:,} | {r['throughput']:.1f} | {r['p50']:.1f} | {r['p95']:.1f} | "
            f"{r['p99']:.1f} | {len(r['errors'])} | {r['connections_max']} | {r['connections_mean']:.1f} |"
        )
    if "runserver" in results and "gunicorn" in results:
        print(
            "throughput gunicorn / runserver: "
            f"{results['gunicorn']['throughput'] / results['runserver']['throughput']:.2f}"
        )
    for server, r in results.items():
        for error in r["errors"][:3]:
            print(f"  {server} error: {error}")
    if args.json:
        Path(args.json).write_text(json.dumps({s: {**r, "errors": r["errors"][:20]} for s, r in results.items()}))


if __name__ == "__main__":
    main()
