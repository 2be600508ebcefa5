"""Fields in the query (docs/search-syntax.md): their cost, against the same filters sent as parameters.

    .venv/bin/python manage.py seed_demo --records 100000 --seed 7    # once, into the database of the settings
    .venv/bin/python bench/fields_bench.py [--rounds 5]

Runs on the database the settings name (EMBEDDED_PG_DATABASE), keyword mode,
as the operator (no access rule). Each case runs as fields in the query
and, where parameters can say the same, as parameters with the words alone;
and the listings (fields and no words). Printed: p50 and p95 of each, and
the total each found (the two ways must agree).
"""

import argparse

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

from timing import ms, percentile

from search import service

# (name, query with fields, the same as words and parameters, or None)
CASES = [
    ("word + severity", "payment severity:critical", {"query": "payment", "severity": "critical"}),
    (
        "words + kind, status",
        "payment fails kind:bug status:open,accepted",
        {"query": "payment fails", "entities": "bug", "status": "open,accepted"},
    ),
    ("word + product", "renewal product:PRD-1", {"query": "renewal", "products": "PRD-1"}),
    (
        "word + created range",
        "crash created:2025-01-01..2025-06-30",
        {"query": "crash", "created_after": "2025-01-01T00:00:00Z", "created_before": "2025-06-30T23:59:59.999999Z"},
    ),
    ("word - status", "crash -status:fixed kind:bug", None),
    ("list: severity", "severity:critical", None),
    ("list: kind, status", "kind:bug status:open", None),
    ("list: product, updated age", "product:PRD-2 updated:<365d", None),
    ("list: feature", "feature:FEAT-3", None),
    ("list: kind, -severity", "kind:test -status:archived", None),
]


def timed(params: dict, rounds: int) -> tuple[list[float], dict]:
    answer = {}

    def call():
        answer.update(service.call("search", {"mode": "keyword", **params}))

    call()  # the first run warms, untimed
    return [ms(call) for _ in range(rounds)], answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'case':28} {'way':10} {'p50 ms':>8} {'p95 ms':>8} {'total':>8} exact")
    for name, query, params in CASES:
        ways = [("fields", {"query": query})] + ([("parameters", params)] if params else [])
        for way, sent in ways:
            times, answer = timed(sent, args.rounds)
            total, exact = answer["total"], answer["total_exact"]
            print(f"{name:28} {way:10} {percentile(times, 50):8.1f} {percentile(times, 95):8.1f} {total:8} {exact}")


if __name__ == "__main__":
    main()
