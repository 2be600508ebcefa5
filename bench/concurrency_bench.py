"""Writers and searchers at once: no server error, no lost write, honest import reports.

    .venv/bin/python bench/concurrency_bench.py [--seconds 60] [--searchers 4] [--records 2000]

In one process, against a throwaway database (`test_bench_concurrency`),
threads go through the REST API (Django's WSGI handler, each thread with
its own client and database connection) for `--seconds`:

- two importers send overlapping files of the same 500 bugs again and
  again, each round with new titles (POST /api/import);
- a curator creates bugs, renames them and deletes every other one
  (POST, PATCH, DELETE /api/bugs);
- a cleaner deletes the demo's bugs one by one;
- `--searchers` agents search (keyword), ask for similar records, batch
  gets and timelines of keys that may be gone by the time they arrive.

Reported: requests by surface and status, server errors (any 5xx: must be
0), and the checks after the run: every bug the curator was told it
created and did not delete exists under its last title; every imported
key exists once; across all imports each key was reported created exactly
once (two imports that race must not both say "created").
"""

import argparse
import json
import logging
import random
import threading
import time
from collections import Counter

import django_setup  # sets Django up, DEBUG off: before the project's imports

# isort: split

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from timing import machine

from backlog.demo import generate
from backlog.imports import import_records
from backlog.interchange import dumps
from backlog.models import Bug

QUERIES = ["renewal", "checkout spinner", "login fails", "payment", "crash on start", "export pdf", "BUG-1"]
IMPORTED = 500


def imported_file(round_: int, who: str) -> str:
    bugs = [
        {"kind": "bug", "key": f"IMP-{i}", "product": "PRD-1", "title": f"Imported bug {i}, round {round_} by {who}"}
        for i in range(IMPORTED)
    ]
    return "".join(json.dumps(bug) + "\n" for bug in bugs)


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.statuses: Counter = Counter()
        self.errors: list[str] = []

    def add(self, surface: str, response) -> None:
        with self.lock:
            self.statuses[(surface, response.status_code)] += 1
            if response.status_code >= 500:
                self.errors.append(f"{surface} {response.status_code} {response.content[:200]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--searchers", type=int, default=4)
    parser.add_argument("--records", type=int, default=2000)
    args = parser.parse_args()

    logging.getLogger("django.request").setLevel(logging.ERROR)  # 404s of deleted keys are expected
    settings.ALLOWED_HOSTS.append("testserver")  # Django's test client's host name
    # One user imports 500 records a round and searches thousands of times a
    # minute: the rate limit (an import counts one search per record) would answer 429.
    settings.SEARCH_RATE_LIMIT = "off"
    with django_setup.database("test_bench_concurrency"):
        report = import_records(dumps(record) for record in generate(args.records, seed=0))
        assert report.written, report.problems
        root = User.objects.create_superuser("root", "root@example.com", "a-long-passphrase")
        demo_bugs = list(Bug.objects.values_list("key", flat=True))
        stop = time.monotonic() + args.seconds
        tally = Tally()
        outcome = {"imports": [], "kept": {}, "deleted": set()}

        def client() -> Client:
            c = Client()
            c.force_login(root)
            return c

        def thread(body):
            def run():
                try:
                    body(client(), random.Random(threading.get_ident()))
                finally:
                    connection.close()

            return threading.Thread(target=run)

        def importer(who):
            def body(c, rng):
                round_ = 0
                while time.monotonic() < stop:
                    r = c.post("/api/import", imported_file(round_, who), content_type="application/x-ndjson")
                    tally.add("import", r)
                    if r.status_code == 200:
                        with tally.lock:
                            outcome["imports"].append(r.json())
                    round_ += 1

            return body

        def curator(c, rng):
            n = 0
            while time.monotonic() < stop:
                key = f"CUR-{n}"
                r = c.post("/api/bugs", {"key": key, "product": "PRD-1", "title": f"Curated {n}"}, "application/json")
                tally.add("create", r)
                if r.status_code == 201:
                    outcome["kept"][key] = f"Curated {n}"
                    r = c.patch(f"/api/bugs/{key}", {"title": f"Curated {n}, renamed"}, "application/json")
                    tally.add("update", r)
                    if r.status_code == 200:
                        outcome["kept"][key] = f"Curated {n}, renamed"
                    if n % 2:
                        r = c.delete(f"/api/bugs/{key}")
                        tally.add("delete", r)
                        if r.status_code == 204:
                            outcome["kept"].pop(key)
                n += 1

        def cleaner(c, rng):
            for key in demo_bugs:
                if time.monotonic() >= stop:
                    break
                r = c.delete(f"/api/bugs/{key}")
                tally.add("delete", r)
                if r.status_code == 204:
                    outcome["deleted"].add(key)

        def searcher(c, rng):
            while time.monotonic() < stop:
                key = rng.choice(demo_bugs)
                asks = [
                    ("search", "/api/search", {"query": rng.choice(QUERIES), "mode": "keyword", "detail": "full"}),
                    ("similar", f"/api/similar/{key}", {"mode": "keyword"}),
                    ("records", "/api/records", {"keys": ",".join(rng.sample(demo_bugs, 5))}),
                    ("timeline", f"/api/timeline/{key}", {}),
                ]
                surface, path, params = rng.choice(asks)
                tally.add(surface, c.get(path, params))

        threads = [thread(importer("first")), thread(importer("second")), thread(curator), thread(cleaner)]
        threads += [thread(searcher) for _ in range(args.searchers)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started

        lost = [key for key, title in outcome["kept"].items() if not Bug.objects.filter(key=key, title=title).exists()]
        imported = Bug.objects.filter(key__startswith="IMP-").count()
        created = sum(report["created"].get("bug", 0) for report in outcome["imports"])
        back = Bug.objects.filter(key__in=outcome["deleted"]).count()

    writers = 4
    print(
        f"# concurrency: {writers} writers x {args.searchers} searchers for {elapsed:.0f} s, "
        f"{args.records:,} demo records"
    )
    print(f"# machine: {machine()}")
    print("| surface | requests | by status |")
    print("|---|---|---|")
    for surface in sorted({s for s, _ in tally.statuses}):
        by_status = {code: n for (s, code), n in sorted(tally.statuses.items()) if s == surface}
        total = sum(by_status.values())
        print(f"| {surface} | {total:,} | {', '.join(f'{code}: {n:,}' for code, n in by_status.items())} |")
    print(f"server errors (5xx): {len(tally.errors)}")
    for error in tally.errors[:5]:
        print(f"  {error}")
    print(f"curator's kept bugs: {len(outcome['kept'])}, lost or stale: {len(lost)} {lost[:5]}")
    print(
        f"imports: {len(outcome['imports'])} answered; keys stored {imported} of {IMPORTED}; "
        f"reported created {created} (must be {IMPORTED})"
    )
    print(f"deleted demo bugs back again: {back}")


if __name__ == "__main__":
    main()
