"""Slow clients and refused deliveries: a team member's searches while strangers hold sockets or flood a webhook.

    .venv/bin/python bench/slow_clients_bench.py [--records 5000] [--slow 200] [--flood-rate 30]
        [--seconds 20] [--rounds 3] [--server front|gunicorn|both] [--json FILE]

A database of N demo records (bench/corpus.py, kept) with an enabled GitHub
source whose webhook secret is set, served as a team runs it: `manage.py
serve --no-embed` (the front, runtime/front.py, before gunicorn on its
private socket; the searches are keyword ones). "Before", for contrast:
gunicorn alone on TCP (runtime.supervisor.gunicorn_command; the same
environment, workers and threads). The user is on a team that sees every
other product (corpus.half_the_products), with a read token of their own,
and searches by keyword (bench/queries.py) every INTERVAL s at most (the
rate limit stays on), each given SEARCH_TIMEOUT s (a failure counts as that).

Scenarios, a window of --seconds each, in turns each round (the order
rotated), so that the machine's other work weighs on them alike: baseline
(nobody else); slow (--slow sockets from one asyncio loop: half send GET
/healthz's headers a byte a second, never their end, half a POST
/hooks/github's headers with Content-Length 10000 and then its body a byte
a second; one the server answers or closes connects again); flood (SENDERS
threads POST unsigned GitHub `issues` deliveries to /hooks/github,
--flood-rate a second together, or as fast as they can).

Reported: the user's p50 and p95 and their ratios to the same server's
baseline; the CPU of each part (the front, gunicorn, serve and its helpers,
the database's backends, this harness) in the windows; what the attackers
got (each outcome, how many, how long). Every request has a timeout, every
wait a deadline; every server is stopped at the end.
"""

import argparse
import asyncio
import contextlib
import functools
import http.client
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlencode

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

import corpus
import psutil
from processes import ROOT, free_port, get, serving, stop_tree
from queries import QUERIES
from timing import machine, percentile
from tqdm import tqdm

#: A search every 0.25 s at most: 240 a minute, within SEARCH_RATE_LIMIT's default 600.
INTERVAL = 0.25
SEARCH_TIMEOUT = 10.0
#: Seconds the attackers have to connect and take hold before a window is timed; and a pause after.
SETTLE, PAUSE = 3.0, 2.0
#: Seconds of searches not kept after a server starts: serve's helpers start, connections open, caches fill.
WARMUP = 15.0
SCENARIOS = ("baseline", "slow", "flood")
SENDERS = 4
GROUPS = ("front", "gunicorn", "serve, helpers", "database", "harness")
SECRET = secrets.token_hex(16)
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slow\r\nX-Slow: "
#: An `issues` event as GitHub sends one (about 3 KB), unsigned.
ISSUE = {"number": 7, "title": "Checkout spinner never stops", "state": "open", "labels": [{"name": "bug"}]}
ISSUE["body"] = "Steps: open the cart, pay with a saved card; the spinner turns forever. " * 30
BODY = json.dumps({"action": "opened", "issue": ISSUE, "repository": {"full_name": "acme/app"}}).encode()
HOOK = (
    b"POST /hooks/github HTTP/1.1\r\nHost: localhost\r\nX-GitHub-Event: issues\r\n"
    b"Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
)


def prepare() -> tuple[str, float]:
    """The team member's read token and the share of records they see; the GitHub source that
    deliveries are checked against (a real one's secret set, its schedule by hand only)."""
    from django.db import connections

    from accounts.tokens import issue
    from connectors.models import Source

    user, share = corpus.half_the_products()
    _, key = issue(user, "slow clients bench")
    Source.objects.update_or_create(
        name="bench github",
        defaults={"kind": "github", "url": "https://github.com", "project": "acme/app", "token_env": "GITHUB_TOKEN"}
        | {"schedule_minutes": 0, "enabled": True},
    )
    connections.close_all()  # nothing of this process's is held while the servers run
    return key, share


@contextlib.contextmanager
def server(kind: str, env: dict):
    """(port, process) of `serve --no-embed` (kind "front") or of gunicorn alone on TCP ("gunicorn")."""
    if kind == "front":
        log = Path(tempfile.gettempdir()) / f"slow_clients_serve_{os.getpid()}.log"
        with serving(env, "--no-embed", log=log) as (url, _, process):
            yield int(url.rsplit(":", 1)[1]), process
        log.unlink(missing_ok=True)
        return
    from runtime.supervisor import gunicorn_command

    port, quiet = free_port(), {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    process = subprocess.Popen(gunicorn_command(f"127.0.0.1:{port}"), cwd=ROOT, env={**os.environ, **env}, **quiet)
    try:
        deadline = time.monotonic() + 120
        while get(f"http://127.0.0.1:{port}", "/healthz")[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("gunicorn never answered /healthz")
            time.sleep(0.2)
        yield port, process
    finally:
        stop_tree(process)


def ask(conn, port: int, method: str, path: str, **request) -> tuple[int | str, http.client.HTTPConnection | None]:
    """One request on `conn` (a new connection when None): the status, or the error's name, and
    the connection for the next (None when it was closed)."""
    try:
        conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=SEARCH_TIMEOUT)
        conn.request(method, path, **request)
        response = conn.getresponse()
        response.read()
    except (OSError, http.client.HTTPException) as error:
        conn.close()
        return type(error).__name__, None
    if response.will_close:
        conn.close()
        return response.status, None
    return response.status, conn


def searches(port: int, token: str, seconds: float, rng: random.Random) -> tuple[list[float], Counter]:
    """The team member's keyword searches for `seconds`, on a kept-alive connection: each one's ms
    (one that failed counted as SEARCH_TIMEOUT at least), and their statuses."""
    times, statuses, conn = [], Counter(), None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        path = "/api/search?" + urlencode({"query": rng.choice(QUERIES), "mode": "keyword"})
        began = time.perf_counter()
        status, conn = ask(conn, port, "GET", path, headers={"Authorization": f"Token {token}"})
        took = time.perf_counter() - began
        statuses[status] += 1
        times.append(took * 1000 if status == 200 else max(took, SEARCH_TIMEOUT) * 1000)
        time.sleep(max(0.0, INTERVAL - took))
    if conn is not None:
        conn.close()
    return times, statuses


class Attack:
    """Attackers in threads of their own from __enter__ to __exit__; `tally`: each outcome's
    seconds (a socket held, a delivery answered), by what it was."""

    def __init__(self, workers: list):
        self.tally: dict[str, list[float]] = defaultdict(list)
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=worker, daemon=True) for worker in workers]
        self.began = self.seconds = 0.0

    def __enter__(self):
        self.began = time.monotonic()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(SEARCH_TIMEOUT + 5)
        self.seconds = time.monotonic() - self.began

    def note(self, outcome: str, seconds: float) -> None:
        with self.lock:
            self.tally[outcome].append(seconds)


class Slowloris(Attack):
    """`count` sockets from one asyncio loop: half dribble GET /healthz's headers, half a POST
    /hooks/github's body, a byte a second; each connects again when the server answers or closes it."""

    def __init__(self, port: int, count: int):
        self.port, self.count = port, count
        super().__init__([lambda: asyncio.run(self.main())])

    async def main(self) -> None:
        await asyncio.gather(*(self.socket("body" if n % 2 else "headers") for n in range(self.count)))

    async def socket(self, kind: str) -> None:
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 10)
            except (OSError, TimeoutError):
                self.note(f"{kind}: no connection", time.monotonic() - began)
                await asyncio.sleep(1)
                continue
            try:
                outcome = await self.dribble(reader, writer, kind)
            finally:
                writer.transport.abort()
            self.note(f"{kind}: {outcome}", time.monotonic() - began)

    async def dribble(self, reader, writer, kind: str) -> str:
        """A byte a second until the server answers or closes, or the window ends: which it was."""
        if kind == "body":
            writer.write(HOOK)
        payload = iter(b"" if kind == "body" else HEALTHZ)
        answer = asyncio.ensure_future(reader.read(4096))
        try:
            while not answer.done():
                if self.stop.is_set():
                    return "held to the end"
                with contextlib.suppress(ConnectionError):
                    writer.write(bytes([next(payload, ord("x"))]))
                    await writer.drain()
                await asyncio.wait([answer], timeout=1)
            first = answer.result()
        except ConnectionError:
            return "reset"
        finally:
            answer.cancel()
        return f"answered {first.split(b' ', 2)[1].decode()}" if first.startswith(b"HTTP/") else "closed unanswered"


class Flood(Attack):
    """SENDERS threads POSTing unsigned GitHub `issues` deliveries to /hooks/github, `rate` a second
    together (as fast as they can when they cannot keep up), each on a kept-alive connection."""

    def __init__(self, port: int, rate: float):
        self.port, self.rate = port, rate
        super().__init__([functools.partial(self.send, n) for n in range(SENDERS)])

    def send(self, sender: int) -> None:
        conn, due = None, time.monotonic() + sender / self.rate
        headers = {"X-GitHub-Event": "issues", "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/b"}
        while not self.stop.wait(max(0.0, due - time.monotonic())):
            due = max(due + SENDERS / self.rate, time.monotonic())
            delivery = headers | {"X-GitHub-Delivery": str(uuid.uuid4())}
            began = time.perf_counter()
            status, conn = ask(conn, self.port, "POST", "/hooks/github", body=BODY, headers=delivery)
            self.note(f"delivery: {status}", time.perf_counter() - began)


def parts(process: subprocess.Popen, database: str) -> dict[str, list[psutil.Process]]:
    """The processes of each part, by GROUPS: the server's tree, the database's backends, this one."""
    found: dict[str, list[psutil.Process]] = {group: [] for group in GROUPS}
    found["harness"].append(psutil.Process())
    top = psutil.Process(process.pid)
    for child in [top, *top.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            line = " ".join(child.cmdline())
            part = "front" if "runtime.front" in line else "gunicorn" if "gunicorn" in line else "serve, helpers"
            found[part].append(child)
    for backend in psutil.process_iter(["cmdline"]):
        if f" {database} " in " ".join(backend.info["cmdline"] or []) + " ":
            found["database"].append(backend)
    return found


def cpu(found: dict[str, list[psutil.Process]]) -> dict[tuple[str, int], float]:
    seconds = {}
    for group, members in found.items():
        for member in members:
            with contextlib.suppress(psutil.Error):
                times = member.cpu_times()
                seconds[group, member.pid] = times.user + times.system
    return seconds


def window(scenario: str, port: int, process, token: str, args, rng: random.Random, database: str) -> dict:
    """One scenario's window: its attackers started, SETTLE s, the user's searches timed for --seconds."""
    attack = {"slow": lambda: Slowloris(port, args.slow), "flood": lambda: Flood(port, args.flood_rate)}
    with attack.get(scenario, lambda: Attack([]))() as attackers:
        if scenario != "baseline":
            time.sleep(SETTLE)
        before, began = cpu(parts(process, database)), time.monotonic()
        times, statuses = searches(port, token, args.seconds, rng)
        after, elapsed = cpu(parts(process, database)), time.monotonic() - began
    used = dict.fromkeys(GROUPS, 0.0)
    for (group, pid), seconds in after.items():
        used[group] += (seconds - before.get((group, pid), 0.0)) * 100 / elapsed
    time.sleep(PAUSE)
    statuses = {str(status): n for status, n in statuses.items()}
    found = {"times": times, "statuses": statuses, "cpu_percent": used}
    return found | {"attack": dict(attackers.tally), "attack_seconds": attackers.seconds}


def run(kind: str, env: dict, token: str, args, bar, database: str) -> dict:
    """Every round of every scenario against one server, merged: {scenario: its windows as one}."""
    rng = random.Random(0)
    windows: dict[str, list[dict]] = {scenario: [] for scenario in SCENARIOS}
    with server(kind, env) as (port, process):
        searches(port, token, WARMUP, rng)  # not kept: serve's helpers starting, connections, caches
        for round_ in range(args.rounds):
            for scenario in SCENARIOS[round_ % 3 :] + SCENARIOS[: round_ % 3]:
                bar.set_description(f"{kind} round {round_ + 1} {scenario}")
                windows[scenario].append(window(scenario, port, process, token, args, rng, database))
                bar.set_postfix(p95=f"{percentile(windows[scenario][-1]['times'], 95):.0f} ms")
                bar.update()
    return {scenario: merged(found) for scenario, found in windows.items()}


def merged(windows: list[dict]) -> dict:
    """A scenario's windows as one: the times, statuses and attackers' outcomes added up, the CPU's mean."""
    statuses, tally = Counter(), defaultdict(list)
    for w in windows:
        statuses.update(w["statuses"])
        for outcome, seconds in w["attack"].items():
            tally[outcome] += seconds
    return {
        "times": [t for w in windows for t in w["times"]],
        "statuses": dict(statuses),
        "cpu_percent": {group: statistics.fmean(w["cpu_percent"][group] for w in windows) for group in GROUPS},
        "attack": dict(tally),
        "attack_seconds": sum(w["attack_seconds"] for w in windows),
    }


def span(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def report(results: dict, args, share: float, ran_on: str) -> None:
    from django.conf import settings

    print(
        f"# {args.records:,} demo records, the team member sees {share:.0%} of them; keyword searches, one every "
        f"{INTERVAL} s at most; {args.rounds} rounds x {args.seconds:.0f} s a scenario; {args.slow} slow sockets; "
        f"flood {args.flood_rate:g}/s from {SENDERS} senders"
    )
    print(f"# machine: {ran_on}; gunicorn {settings.SERVE_WORKERS} workers x {settings.SERVE_THREADS} threads")
    print("| scenario | server | searches | failed | p50 ms | p95 ms | p50 / baseline | p95 / baseline | CPU % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, scenarios in results.items():
        base = scenarios["baseline"]["times"]
        for scenario, r in scenarios.items():
            times, failed = r["times"], sum(n for status, n in r["statuses"].items() if status != "200")
            p50, p95 = statistics.median(times), percentile(times, 95)
            used = " / ".join(f"{r['cpu_percent'][group]:.0f}" for group in GROUPS)
            print(
                f"| {scenario} | {kind} | {len(times)} | {failed} | {p50:.1f} | {p95:.1f} | "
                f"{p50 / statistics.median(base):.2f} | {p95 / percentile(base, 95):.2f} | {used} |"
            )
    print(f"\nCPU %: of one core, in the timed windows: {' / '.join(GROUPS)}.")
    print("What the attackers got: outcome, how many, seconds each (a socket held, a delivery answered) p50 / max:")
    for kind, scenarios in results.items():
        for scenario in ("slow", "flood"):
            tally, seconds = scenarios[scenario]["attack"], scenarios[scenario]["attack_seconds"]
            outcomes = "; ".join(
                f"{outcome} {len(s):,} ({span(statistics.median(s))} / {span(max(s))})"
                for outcome, s in sorted(tally.items())
            )
            rate = f", {sum(map(len, tally.values())) / seconds:.1f} a second" if scenario == "flood" else ""
            print(f"- {kind} {scenario}: {outcomes}{rate}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--slow", type=int, default=200, help="slow sockets, half headers and half bodies")
    parser.add_argument("--flood-rate", type=float, default=30.0, help="unsigned deliveries a second")
    parser.add_argument("--seconds", type=float, default=20.0, help="the user's searches timed in each window")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", choices=("front", "gunicorn", "both"), default="both")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args()
    kinds = ("front", "gunicorn") if args.server == "both" else (args.server,)
    database = corpus.name(args.records)
    env = {"EMBEDDED_PG_DATABASE": database, "GITHUB_WEBHOOK_SECRET": SECRET, "LOG_LEVEL": "ERROR"}
    results = {}
    with corpus.database(args.records):
        token, share = prepare()
        with tqdm(total=len(kinds) * args.rounds * len(SCENARIOS), unit="window", file=sys.stderr) as bar:
            for kind in kinds:
                results[kind] = run(kind, env, token, args, bar, database)
    ran_on = machine()
    report(results, args, share, ran_on)
    if args.json:
        args.json.write_text(json.dumps({"machine": ran_on, "args": vars(args) | {"json": str(args.json)}, **results}))


if __name__ == "__main__":
    main()
