"""How the harnesses time: a call's milliseconds, percentiles, rounds that
alternate the variants, the ratio table, and the machine it ran on.

The machines are shared and noisy, so every harness times its baseline in
the same process and in turns with what it measures (`alternated`), and
reports the ratio (`ratio_table`), which survives the noise better than
the seconds do.
"""

import contextlib
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ms(function: Callable[[], object]) -> float:
    """Milliseconds `function()` took."""
    started = time.perf_counter()
    function()
    return (time.perf_counter() - started) * 1000


def seconds(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def percentile(values: Iterable[float], p: float) -> float:
    """The nearest-rank `p`th percentile (50: the median of an odd count)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def alternated(runs: dict[str, Callable], items: list, rounds: int, warmup: int = 1) -> dict[str, dict]:
    """{run: {item: [ms]}}: each round, each item, every run in turn, so
    that whatever else the machine does at a moment weighs on them alike.
    The first `warmup` rounds are not kept (caches, connections, imports)."""
    times = {name: {item: [] for item in items} for name in runs}
    for round_ in range(warmup + rounds):
        for item in items:
            for name, run in runs.items():
                took = ms(lambda run=run, item=item: run(item))
                if round_ >= warmup:
                    times[name][item].append(took)
    return times


def flat(by_item: dict) -> list[float]:
    """Every time of one run of `alternated`, over all its items."""
    return [t for times in by_item.values() for t in times]


def ratio_table(
    rows: dict[str, list[float]], baseline: str, *, unit: str = "ms", count: int | None = None, per: str = ""
) -> None:
    """A markdown table: each row's median and p95, and its median over the
    baseline row's. With `count` (records, issues...) also `count` a second
    from the median, labelled `per` (the unit is then seconds)."""
    base = statistics.median(rows[baseline])
    rate = f" {per} |" if count else ""
    print(f"| what | p50 {unit} | p95 {unit} |{rate} / {baseline} |")
    print("|---|---|---|" + ("---|" if count else "") + "---|")
    for name, values in rows.items():
        median = statistics.median(values)
        rate = f" {count / median:,.0f} |" if count else ""
        print(f"| {name} | {median:.2f} | {percentile(values, 95):.2f} |{rate} {median / base:.2f} |")


def machine() -> str:
    """The CPU, cores, memory, Python and commit, for the line above a table."""
    model = ""
    with contextlib.suppress(OSError, StopIteration):
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.machine()} {model}, {os.cpu_count()} cores, {memory:.0f} GiB, Python {platform.python_version()}; "
        f"load {load}; commit {commit.stdout.strip() or '?'}{' (with local changes)' if dirty.stdout.strip() else ''}"
    )
