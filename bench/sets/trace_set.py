"""Build eval/trace-hadoop: each gitbugs-hadoop bug with a Java stack trace, asked for by its own trace.

    .venv/bin/python bench/sets/trace_set.py [--source ../shared/eval/gitbugs-hadoop] [--out eval/trace-hadoop]

A bug qualifies when its description holds at least MIN_FRAMES Java frames
(`at a.b.C.m(C.java:12)`, `(Native Method)`, `(Unknown Source)`) and a line
of text before the first one. Three queries a bug, as a QA person pastes it:

- `trace`: the exception line (the last line with text before the first
  frame, as found) and the first FRAMES frames, one a line after a tab as
  Java prints them;
- `trace_shifted`: the same with every frame's line number + SHIFT, as
  after the code moved;
- `exception`: the exception line alone, cut to QUERY_MAX characters at a
  word (a longer one is no trace, and search refuses it).

The bug itself is the one relevant record (grade 1). Its labelled
duplicates in the source set are not: none of them shares a frame of its
top frames (README.md). The frames are read here with a pattern of
their own, not search.query.traces, so that the set does not share the
code it measures. records.jsonl is the source's, copied in (and
git-ignored there).
"""

import argparse
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIN_FRAMES = 3
FRAMES = 5
SHIFT = 7
FRAME = re.compile(r"\bat\s+[\w$.<>/]+\((?:[\w$-]+\.java(?::(\d+))?|Native Method|Unknown Source)\)")
# Jira's markup ({code:java}, {noformat}, {{monospace}}, {color}, table bars) and log tags ([info]) around the text.
MARKUP = re.compile(r"\{[a-z]+(?::[^}]*)?\}|\{\{|\}\}|^\s*\[\w+\]\s*$|^[\s|*]+|[\s|*]+$")
QUERY_MAX = 500  # search.contract.types.QUERY_MAX: an exception line alone is no trace, so it keeps that limit


def queries_of(key: str, description: str) -> list[tuple[str, str, str]]:
    """(id, query, type) for one bug; none when it has no trace."""
    frames = list(FRAME.finditer(description))
    if len(frames) < MIN_FRAMES:
        return []
    lines = [MARKUP.sub("", line).strip() for line in description[: frames[0].start()].split("\n")]
    exception = next((line for line in reversed(lines) if re.search(r"[^\W\d_]", line)), "")
    if not exception:
        return []
    top = frames[:FRAMES]
    number = key.split("-")[-1]
    return [
        (f"trace-{number}", _trace(exception, top, 0), "trace"),
        (f"shifted-{number}", _trace(exception, top, SHIFT), "trace_shifted"),
        (f"exception-{number}", _cut(exception), "exception"),
    ]


def _trace(exception: str, frames: list[re.Match], shift: int) -> str:
    def shifted(frame: re.Match) -> str:
        if frame[1] is None:
            return frame[0]
        start, end = frame.span(1)
        text, offset = frame[0], frame.start()
        return text[: start - offset] + str(int(frame[1]) + shift) + text[end - offset :]

    return "\n".join([exception, *(f"\t{shifted(frame)}" for frame in frames)])


def _cut(text: str) -> str:
    """At most QUERY_MAX characters, ending at a word."""
    return text if len(text) <= QUERY_MAX else text[: text.rfind(" ", 0, QUERY_MAX + 1)].rstrip()


def build(source: Path, out: Path) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "records.jsonl", out / "records.jsonl")
    (out / ".gitignore").write_text("# gitbugs-hadoop's, copied in by bench/sets/trace_set.py\nrecords.jsonl\n")
    counts: dict[str, int] = {}
    with (
        (source / "records.jsonl").open(encoding="utf-8") as records,
        (out / "queries.jsonl").open("w", encoding="utf-8") as queries,
        (out / "qrels.tsv").open("w", encoding="utf-8") as qrels,
        (out / "query_types.tsv").open("w", encoding="utf-8") as types,
    ):
        for line in records:
            record = json.loads(line)
            if record["kind"] != "bug":
                continue
            for query_id, text, kind in queries_of(record["key"], record.get("description") or ""):
                queries.write(json.dumps({"id": query_id, "query": text}, ensure_ascii=False) + "\n")
                qrels.write(f"{query_id}\t{record['key']}\t1\n")
                types.write(f"{query_id}\t{kind}\n")
                counts[kind] = counts.get(kind, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "eval" / "gitbugs-hadoop")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "trace-hadoop")
    args = parser.parse_args()
    if not (args.source / "records.jsonl").is_file():
        parser.error(f"{args.source} holds no records.jsonl: give gitbugs-hadoop's folder with --source")
    counts = build(args.source, args.out)
    print(", ".join(f"{kind}: {count}" for kind, count in counts.items()), "queries in", args.out)


if __name__ == "__main__":
    main()
