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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import django_setup  # noqa: E402, F401  (sets Django up: the judged-set reader is the project's)

from search.evaluation.sets import load_judged_set  # noqa: E402

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
        words = len(WORD.findall(sentence))
        if words >= MIN_WORDS:
            return sentence if words <= MAX_WORDS else None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "eval" / "gitbugs-hadoop")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "sentence-hadoop")
    args = parser.parse_args()

    source = load_judged_set(args.source)
    records = (json.loads(line) for line in source.records)
    descriptions = {record["key"]: record.get("description") or "" for record in records if record["kind"] == "bug"}
    titles = [query for query in source.queries if source.types.get(query.id) == "title"]

    queries, qrels, kinds = [], [], []
    for query in titles:
        (key,) = query.exclude
        if (sentence := first_sentence(descriptions.get(key, ""))) is None:
            continue
        query_id = "w" + query.id[1:]
        queries.append(json.dumps({"id": query_id, "query": sentence, "exclude": [key]}, ensure_ascii=False))
        qrels += [f"{query_id}\t{judged}\t{grade}" for judged, grade in source.grades[query.id].items()]
        kinds.append(f"{query_id}\tsentence")

    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.source / "records.jsonl", args.out / "records.jsonl")
    (args.out / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (args.out / "qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    (args.out / "query_types.tsv").write_text("\n".join(kinds) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(queries)} queries, {len(qrels)} judgments, from {len(titles)} title queries")


if __name__ == "__main__":
    main()
