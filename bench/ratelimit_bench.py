"""What one rate-limit check costs: search.ratelimit's counter against the DRF
cache throttle it replaced, in the same process, on the same database.

    .venv/bin/python bench/ratelimit_bench.py [--rounds 10] [--checks 500]

On a throwaway database (`test_bench_ratelimit`, made by migrate: both the
counter's table and the cache table), the two take turns, round by round
(which goes first alternates). In a round each makes `--checks` checks for
a user of its own who has not searched yet, at SEARCH_RATE_LIMIT=600/min,
so none is refused and the old throttle's list grows to `--checks`
timestamps, as a busy agent's does. A bare SELECT 1 takes its turn too:
the floor, one round trip. Printed: each round's median µs per check, the
median of those, the ratio of before to now, and the statements one check
runs.
"""

import argparse
import itertools
import os
import platform
import statistics
import time
from types import SimpleNamespace

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)

# isort: split

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext, setup_databases, teardown_databases
from rest_framework.throttling import UserRateThrottle

from search import ratelimit


class CacheThrottle(UserRateThrottle):
    """api/throttles.py before search.ratelimit: DRF's list of timestamps
    (up to the limit's count), read from and written back to Django's
    database cache on every check."""

    scope = "search"

    def get_rate(self):
        return settings.SEARCH_RATE_LIMIT

    def allow_request(self, request, view):
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)


def cache_check(user) -> None:
    """The old `within_search_rate(user)`."""
    if not CacheThrottle().allow_request(SimpleNamespace(user=user), None):
        raise AssertionError("the bench must stay under the limit")


def counter_check(user) -> None:
    ratelimit.charge(user)


def round_trip(user) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


CHECKS = {
    "DRF cache throttle (before)": cache_check,
    "search.ratelimit counter (now)": counter_check,
    "SELECT 1 (the floor: one round trip)": round_trip,
}


def round_median(check, user, checks: int) -> float:
    """Median µs of `checks` checks for `user`."""
    times = []
    for _ in range(checks):
        began = time.perf_counter()
        check(user)
        times.append((time.perf_counter() - began) * 1e6)
    return statistics.median(times)


def statements(check, user) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        check(user)
    return [" ".join(q["sql"].split()[:2]) for q in queries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--checks", type=int, default=500, help="checks per round and kind (under 600)")
    args = parser.parse_args()
    settings.SEARCH_RATE_LIMIT = "600/min"

    connection.settings_dict["TEST"]["NAME"] = "test_bench_ratelimit"
    old_config = setup_databases(verbosity=0, interactive=False)
    try:
        names = itertools.count()

        def new_user():
            return User.objects.create_user(f"agent-{next(names)}")

        for check in CHECKS.values():  # warm up: connection, imports, the sweep of the first window
            round_median(check, new_user(), 20)
        medians = {name: [] for name in CHECKS}
        for round_ in range(args.rounds):
            order = list(CHECKS.items()) if round_ % 2 == 0 else list(reversed(CHECKS.items()))
            for name, check in order:
                medians[name].append(round_median(check, new_user(), args.checks))
        # What one check runs, for a user with `--checks` searches in the last minute.
        busy = new_user()
        for check in CHECKS.values():
            for _ in range(args.checks):
                check(busy)
        seen = {name: statements(check, busy) for name, check in CHECKS.items()}
        with connection.cursor() as cursor:  # the old throttle's commit waits for the WAL flush
            cursor.execute("SELECT version(), current_setting('synchronous_commit')")
            version, synchronous_commit = cursor.fetchone()
    finally:
        teardown_databases(old_config, verbosity=0)

    rounds = f"{args.rounds} alternating rounds of {args.checks} checks each"
    print(f"# rate-limit check: {rounds}, SEARCH_RATE_LIMIT 600/min")
    print(f"# {' '.join(version.split()[:2])}, synchronous_commit {synchronous_commit}")
    print(f"# machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| check | median µs | fastest round | slowest round | statements a check |")
    print("|---|---|---|---|---|")
    overall = {name: statistics.median(values) for name, values in medians.items()}
    for name, values in medians.items():
        print(
            f"| {name} | {overall[name]:.0f} | {min(values):.0f} | {max(values):.0f} | "
            f"{len(seen[name])}: {', '.join(seen[name])} |"
        )
    before, now, _ = overall.values()
    print(f"ratio (before / now): {before / now:.1f}x")


if __name__ == "__main__":
    main()
