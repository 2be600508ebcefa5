"""Cost as the work grows: p95 latency against corpus size, one line per mode.

    .venv/bin/python bench/growth_chart.py OUT.png FIGURES.json [FIGURES.json ...]

Reads the files `bench/search_bench.py --json` writes (one per corpus size,
for example 10k, 100k, 300k and 1M records) and draws p95 against the
number of records on log-log axes: a line that rises with slope 1 costs as
much more as the corpus grows; a flat one does not grow at all. The peers
(with --peers) are drawn dashed. Also prints the table the chart shows.
"""

import argparse
import json
from pathlib import Path

OURS = ("keyword", "hybrid", "semantic", "keyword, filtered", "hybrid, filtered")
PEERS = ("SQLite FTS5 bm25", "SQLite FTS5 bm25, filtered", "Django icontains", "Django icontains, filtered")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("figures", nargs="+", help="JSON files from search_bench.py --json")
    args = parser.parse_args()

    runs = sorted((json.loads(Path(f).read_text()) for f in args.figures), key=lambda run: run["records"])
    sizes = [run["records"] for run in runs]
    names = [n for n in (*OURS, *PEERS) if all(n in run["latency"] for run in runs)]
    print("| mode | " + " | ".join(f"{size:,}" for size in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{run['latency'][name]['p95']:.1f}" for run in runs) + " |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name in names:
        ax.plot(
            sizes,
            [run["latency"][name]["p95"] for run in runs],
            marker="o",
            linestyle="--" if name in PEERS else "-",
            label=name,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes, [f"{size // 1000:,}k" if size < 1_000_000 else f"{size / 1e6:g}M" for size in sizes])
    ax.set_xlabel("records")
    ax.set_ylabel("p95 latency, ms (log scale)")
    machine = runs[-1].get("machine", "")
    ax.set_title(f"search p95 as the corpus grows ({machine})", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"# chart: {args.out}")


if __name__ == "__main__":
    main()
