"""A judged set whose bug reports open the way Bugzilla's do, made from a public one.

A report filed through Bugzilla's form (Firefox's, Thunderbird's) begins with
the reporter's user agent, often a build id, then the steps:

    User Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0
    Build ID: 20231219181341

    Steps to reproduce:

    ...

This writes a copy of a judged set (e.g. gitbugs-hadoop) in which every bug's
description is rewritten so: those lines, then "Steps to reproduce:" and the
description as it was. Titles, the other fields, queries and judgments stay
as they are, so the copy asks the same questions of text that opens with
tracker boilerplate, as a kept-back Bugzilla set does. The user agent and
build id are drawn per record from a seeded generator (browser, platform,
version, date), so the copy is the same on every run:

    .venv/bin/python bench/sets/bugzilla_style.py ../shared/eval/gitbugs-hadoop /tmp/gitbugs-bugzilla
    .venv/bin/python manage.py search_eval /tmp/gitbugs-bugzilla --modes semantic,hybrid
"""

import argparse
import json
import random
import shutil
from pathlib import Path

PLATFORMS = [
    "Windows NT 10.0; Win64; x64",
    "X11; Linux x86_64",
    "X11; Ubuntu; Linux x86_64",
    "Macintosh; Intel Mac OS X 10.15",
    "Android 14; Mobile",
    "Windows NT 6.1; Win64; x64",
]


def user_agent(rng: random.Random) -> str:
    platform = rng.choice(PLATFORMS)
    version = rng.randint(91, 128)
    if rng.random() < 0.8:
        gecko = f"{version}.0" if "Android" in platform else "20100101"
        return f"Mozilla/5.0 ({platform}; rv:{version}.0) Gecko/{gecko} Firefox/{version}.0"
    return (
        f"Mozilla/5.0 ({platform}) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"Chrome/{version}.0.{rng.randint(1000, 6999)}.{rng.randint(10, 199)} Safari/537.36"
    )


def build_id(rng: random.Random) -> str:
    return (
        f"{rng.randint(2019, 2024)}{rng.randint(1, 12):02}{rng.randint(1, 28):02}"
        f"{rng.randint(0, 23):02}{rng.randint(0, 59):02}{rng.randint(0, 59):02}"
    )


def rewrite(record: dict, rng: random.Random) -> dict:
    if record.get("kind") != "bug":
        return record
    lines = [f"User Agent: {user_agent(rng)}"]
    if rng.random() < 0.7:
        lines.append(f"Build ID: {build_id(rng)}")
    description = (record.get("description") or "").strip()
    head = "\n".join(lines) + "\n\nSteps to reproduce:\n\n"
    return {**record, "description": head + description}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a judged set folder")
    parser.add_argument("target", type=Path, help="the folder to write (replaced)")
    parser.add_argument("--seed", type=int, default=20240101)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    shutil.rmtree(args.target, ignore_errors=True)
    shutil.copytree(args.source, args.target, ignore=shutil.ignore_patterns("records.jsonl", "README*"))
    with (args.source / "records.jsonl").open(encoding="utf-8") as src:
        lines = [json.dumps(rewrite(json.loads(line), rng), ensure_ascii=False) for line in src if line.strip()]
    (args.target / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
