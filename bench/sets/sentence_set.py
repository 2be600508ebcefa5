"""Build eval/sentence-hadoop: gitbugs-hadoop's duplicates asked for in a reporter's words, not a title.

    .venv/bin/python bench/sets/sentence_set.py [--source ../shared/eval/gitbugs-hadoop] [--out eval/sentence-hadoop]

gitbugs-hadoop asks for each bug's labelled duplicates by its title (type
`title`) and by the whole bug (`similar`). A QA person who has not found
the report yet describes the problem instead; this set asks the same
questions by the first sentence of the bug's own description: the first
run of text up to a full stop, question mark or exclamation mark before a
space, or a line end, with Jira markup
and links removed, that holds MIN_WORDS to MAX_WORDS words and no code
(a stack frame, a path, `=`, braces), starting with a letter. A bug whose description opens with
no such sentence is left out. The bug itself is excluded, as for its title
query, and the judgments are its title query's, unchanged. One query type,
`sentence`. records.jsonl is the source's, copied in (and git-ignored).
"""

import argparse
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIN_WORDS, MAX_WORDS = 6, 40
MARKUP = re.compile(r"\{[a-z]+(?::[^}]*)?\}|\{\{|\}\}|\[~?[^\]\s]*\]|\*|_|h\d\.\s*")
LINK = re.compile(r"\bhttps?://\S+")
CODE = re.compile(r"\bat\s+[\w$.]+\(|[/\\]\w+[/\\]|[={}<>;]|\w+\.\w+\(|^\s*[$#>]")
SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\n")  # a full stop before a space: not in 4.1.45 or java.io
WORD = re.compile(r"[^\W\d_][\w'-]*")


def first_sentence(description: str) -> str | None:
    """The description's first sentence in words, or None."""
    text = LINK.sub(" ", MARKUP.sub(" ", description or ""))
    for piece in SENTENCE_END.split(text):
        sentence = " ".join(piece.split())
        if not sentence:
            continue
        if not sentence[0].isalpha():
            return None  # a table, a list of numbers, a quoted log: not a reporter's sentence
        if CODE.search(sentence):
            return None  # the description opens with code or a trace: no reporter's sentence
        if MIN_WORDS <= len(WORD.findall(sentence)) <= MAX_WORDS:
            return sentence
        if len(WORD.findall(sentence)) > MAX_WORDS:
            return None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "eval" / "gitbugs-hadoop")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "sentence-hadoop")
    args = parser.parse_args()

    descriptions = {}
    for line in (args.source / "records.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "bug":
            descriptions[record["key"]] = record.get("description") or ""
    types = dict(line.split("\t") for line in (args.source / "query_types.tsv").read_text().splitlines() if line)
    judged: dict[str, list[str]] = {}
    for line in (args.source / "qrels.tsv").read_text().splitlines():
        if line:
            query_id = line.split("\t", 1)[0]
            judged.setdefault(query_id, []).append(line.split("\t", 1)[1])

    queries, qrels, kinds = [], [], []
    for line in (args.source / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        query = json.loads(line)
        if types.get(query["id"]) != "title":
            continue
        (key,) = query["exclude"]
        if (sentence := first_sentence(descriptions.get(key, ""))) is None:
            continue
        query_id = "w" + query["id"][1:]
        queries.append(json.dumps({"id": query_id, "query": sentence, "exclude": [key]}, ensure_ascii=False))
        qrels += [f"{query_id}\t{rest}" for rest in judged[query["id"]]]
        kinds.append(f"{query_id}\tsentence")

    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.source / "records.jsonl", args.out / "records.jsonl")
    (args.out / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (args.out / "qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    (args.out / "query_types.tsv").write_text("\n".join(kinds) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(queries)} queries, {len(qrels)} judgments, from {len(types) // 2} title queries")


if __name__ == "__main__":
    main()
