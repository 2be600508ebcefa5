"""Leave-one-set-out: is a ranking setting's gain real, or fitted to one set?

bench/ranking_lab.py scores each variant (a setting of the ranking
constants) on one judged set and keeps every query's nDCG@10 (`--json`).
Given those files for several sets, this chooses, for each set in turn, the
variant that scores best on the OTHER sets (the mean of their means, each
set weighing the same) and reports what it scores on the set left out: the
held-out figure, beside the fitted one (the variant best on that set
itself) and the baseline (the first variant), overall and per query type.

    .venv/bin/python bench/loso.py --mode hybrid \\
        ../shared/eval/qa-public=bench/out/lab_qa-public.json \\
        ../shared/eval/gitbugs-hadoop=bench/out/lab_gitbugs-hadoop.json \\
        ../shared/eval/cranfield=bench/out/lab_cranfield.json

`--grid base,a,b` limits the choice to those variants (the first is the
baseline): one decision at a time, e.g. one constant's values with the
others at their defaults. A setting is kept only if its held-out gain over
the baseline is positive on every set it can act on (docs/benchmarks.md,
"Ranking experiments"); a set on which every variant ranks every query
alike (recency on records that all have one date) is reported and not
counted.
"""

import argparse
import json
from pathlib import Path
from statistics import fmean


def query_types(folder: Path) -> dict[str, str]:
    path = folder / "query_types.tsv"
    if not path.exists():
        return {}
    rows = (line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {row[0]: row[1].strip() for row in rows if len(row) > 1}


def load(pairs: list[str], mode: str) -> dict[str, dict]:
    """Set name -> {"scores": variant -> query -> nDCG@10, "types": query -> type}."""
    sets = {}
    for pair in pairs:
        folder, _, results = pair.partition("=")
        lab = json.loads(Path(results).read_text(encoding="utf-8"))
        sets[Path(folder).name] = {
            "scores": {variant: runs[mode] for variant, runs in lab.items()},
            "types": query_types(Path(folder)),
        }
    return sets


def mean(scores: dict[str, float], types: dict[str, str], kind: str | None = None) -> float:
    chosen = [score for query, score in scores.items() if kind is None or types.get(query) == kind]
    return fmean(chosen) if chosen else float("nan")


def choices(sets: dict[str, dict], grid: list[str] | None = None) -> list[str]:
    """The variants to choose among: `grid`, or every variant each set's file has."""
    variants = [v for v in next(iter(sets.values()))["scores"] if all(v in s["scores"] for s in sets.values())]
    if grid:
        missing = [v for v in grid if v not in variants]
        if missing:
            raise SystemExit(f"--grid names {', '.join(missing)}, which not every set's file has")
        variants = grid
    return variants


def leave_one_out(sets: dict[str, dict], grid: list[str] | None = None) -> dict[str, dict]:
    variants = choices(sets, grid)
    means = {name: {v: mean(s["scores"][v], s["types"]) for v in variants} for name, s in sets.items()}
    # A set the setting cannot act on is a tie for every variant: it says nothing.
    idle = {name for name, s in sets.items() if inert(s, variants)}
    report = {}
    for held_out in sets:
        others = [name for name in sets if name != held_out and name not in idle] or [held_out]
        chosen = max(variants, key=lambda v: (fmean(means[name][v] for name in others), -variants.index(v)))
        fitted = max(variants, key=lambda v: (means[held_out][v], -variants.index(v)))
        report[held_out] = {"baseline": variants[0], "held_out": chosen, "fitted": fitted}
    return report


def inert(judged: dict, variants: list[str]) -> bool:
    """Whether every variant scores every query of this set alike: a setting that cannot act on
    the set (recency on records that all have the same date) learns nothing from it."""
    first = judged["scores"][variants[0]]
    return all(judged["scores"][v] == first for v in variants[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sets", nargs="+", help="FOLDER=LAB_JSON, one per judged set")
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--grid", type=lambda text: text.split(","), help="variants to choose among, baseline first")
    args = parser.parse_args()
    sets = load(args.sets, args.mode)
    report = leave_one_out(sets, args.grid)
    variants = choices(sets, args.grid)
    kept, acted = True, False
    for name, chosen in report.items():
        s = sets[name]
        columns = [chosen["baseline"], chosen["held_out"], chosen["fitted"]]
        if inert(s, variants):
            print(f"\n{name}: every variant ranks every query alike (the setting cannot act here); not counted")
            continue
        acted = True
        print(f"\n{name}: baseline {columns[0]}, held out {columns[1]} (chosen on the others), fitted {columns[2]}")
        kinds = [None, *sorted(set(s["types"].values()))] if len(set(s["types"].values())) > 1 else [None]
        for kind in kinds:
            figures = [mean(s["scores"][v], s["types"], kind) for v in columns]
            label = kind or "all"
            gain = figures[1] - figures[0]
            print(f"  {label:<14}" + "".join(f"{f:>8.3f}" for f in figures) + f"  held-out gain {gain:+.3f}")
        kept = kept and mean(s["scores"][columns[1]], s["types"]) > mean(s["scores"][columns[0]], s["types"])
    kept = kept and acted
    verdict = (
        "kept: held-out gain positive on every set it acts on" if kept else "not kept: a held-out gain is not positive"
    )
    print(f"\n{verdict}")


if __name__ == "__main__":
    main()
