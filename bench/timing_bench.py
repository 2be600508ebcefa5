"""Does a search take longer when records the caller cannot see match it?

    .venv/bin/python bench/timing_bench.py [--hidden 10000] [--visible 10000] [--runs 150]

Builds its own database (`test_bench_timing`, dropped at the end unless
--keep-db): Carol's product (PRD-1, on her team) and a product she cannot
see (PRD-2), each with the same number of demo bugs, written alternately so
that their rows, and so their entries in every index, lie interleaved. Every
hidden bug's description also holds the word W; no record holds V or V2.
Then Carol's keyword searches for W, V and V2 run through search() in this
process, in a fresh random order each round, after untimed warm-up rounds.

To Carol, W is a word no record has, exactly as V is; if the time of her
search for W differs from V's, the time tells her about records she cannot
see. Printed: median and mean of each, and Welch's t for W - V (the
question) and V2 - V (two absent words, the control: a t-test that finds a
difference there finds noise). With 150 runs a side, |t| < 2 is z < 2.
The machine is shared and noisy: read t, not single timings.
"""

import argparse
import gc
import itertools
import math
import random
import statistics
import time

import django_setup  # sets Django up, DEBUG off: before the project's imports

# isort: split

from django.contrib.auth.models import Group, User
from django.db import connection

from backlog.demo import generate
from backlog.models import Bug, Product
from search.contract import SearchRequest
from search.operations.search import search

# Made-up words: no demo record holds them, none is English (the typo path runs for each
# alike), and they share no trigram with each other or with the demo titles' words.
HIDDEN_WORD, ABSENT_WORD, CONTROL_WORD = "qorvexil", "zumbrakt", "wixdolmy"
BATCH = 2000


def build(hidden: int, visible: int) -> User:
    """The two products, their bugs interleaved, and Carol, who sees only PRD-1."""
    mine = Product.objects.create(key="PRD-1", name="Tramline", description="Carol's product")
    theirs = Product.objects.create(key="PRD-2", name="Ledgerly", description="Another team's product")
    team = Group.objects.create(name="Tramline team")
    mine.teams.add(team)
    carol = User.objects.create_user("carol")
    carol.groups.add(team)
    texts = (r for r in itertools.cycle(generate(4000, seed=1)) if r["kind"] == "bug")
    # Alternately one of theirs and one of Carol's, the rest of the larger side last.
    pairs = itertools.zip_longest([theirs] * hidden, [mine] * visible)
    owners = [product for pair in pairs for product in pair if product is not None]
    bugs = []
    for number, product in enumerate(owners, start=1):
        text = next(texts)
        description = text["description"] + (f" {HIDDEN_WORD}" if product == theirs else "")
        bugs.append(
            Bug(
                key=f"BUG-{number}",
                product=product,
                title=text["title"],
                description=description,
                severity=text["severity"],
                status=text["status"],
            )
        )
    for start in range(0, len(bugs), BATCH):
        Bug.objects.bulk_create(bugs[start : start + BATCH])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE search_document")  # as autovacuum leaves it: no pending GIN list
    return User.objects.get(pk=carol.pk)


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """Welch's t for mean(a) - mean(b), and its degrees of freedom."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb), (va + vb) ** 2 / (
        va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)
    )


def timed(query: str, user) -> float:
    gc.collect()
    gc.disable()  # a collection inside one run and not another is noise
    try:
        started = time.perf_counter()
        search(SearchRequest(query=query, mode="keyword"), user)
        return (time.perf_counter() - started) * 1000
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=10_000, help="hidden bugs holding W")
    parser.add_argument("--visible", type=int, default=10_000, help="Carol's bugs")
    parser.add_argument("--runs", type=int, default=150, help="timed searches per word")
    parser.add_argument("--warmup", type=int, default=20, help="untimed rounds first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with django_setup.database("test_bench_timing", keep=args.keep_db):
        carol = build(args.hidden, args.visible)
        words = [HIDDEN_WORD, ABSENT_WORD, CONTROL_WORD]
        for word in words:  # what Carol gets: nothing, for each
            assert search(SearchRequest(query=word, mode="keyword"), carol).total == 0, word
        times = {word: [] for word in words}
        for round_ in range(args.warmup + args.runs):
            rng.shuffle(words)
            for word in words:
                ms = timed(word, carol)
                if round_ >= args.warmup:
                    times[word].append(ms)
    print(
        f"# {args.hidden:,} hidden bugs hold W ({HIDDEN_WORD}), {args.visible:,} visible bugs; "
        f"no record holds V ({ABSENT_WORD}) or V2 ({CONTROL_WORD}); keyword search as Carol, "
        f"{args.runs} runs a word in shuffled rounds after {args.warmup} untimed"
    )
    print("| word | median ms | mean ms | sd ms |")
    print("|---|---|---|---|")
    labels = {HIDDEN_WORD: "W (hidden matches)", ABSENT_WORD: "V (absent)", CONTROL_WORD: "V2 (absent)"}
    for word, label in labels.items():
        values = times[word]
        print(
            f"| {label} | {statistics.median(values):.2f} | {statistics.fmean(values):.2f} | "
            f"{statistics.stdev(values):.2f} |"
        )
    for label, a, b in (("W - V", HIDDEN_WORD, ABSENT_WORD), ("V2 - V (control)", CONTROL_WORD, ABSENT_WORD)):
        t, df = welch(times[a], times[b])
        median = statistics.median(times[a]) - statistics.median(times[b])
        mean = statistics.fmean(times[a]) - statistics.fmean(times[b])
        print(f"# {label}: median {median:+.2f} ms, mean {mean:+.2f} ms, Welch t = {t:+.2f} (df {df:.0f})")


if __name__ == "__main__":
    main()
