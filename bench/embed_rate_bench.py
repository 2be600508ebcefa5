"""End to end, how fast new records get their vectors: embed_pending's records/s
with EMBEDDING_THREADS=1 (one text at a time) against 0 (one per core), interleaved.

    .venv/bin/python bench/embed_rate_bench.py [RECORDS]   (default 1500)

Imports RECORDS demo records into a scratch test database, then, twice in
turn for each setting, clears every vector and times embed_pending over all
of them (reads, the model, the writes). Dropped at the end.
"""

import statistics
import sys
import time

import django_setup  # noqa: F401  (sets Django up)

# isort: split

from django.conf import settings
from django.db import connection
from django.test.utils import setup_databases, teardown_databases

from backlog.demo import generate
from backlog.interchange import dumps
from backlog.services import import_records
from search.embeddings import reset_provider
from search.indexing import embed_pending

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
connection.settings_dict["TEST"]["NAME"] = "test_embed_rate"
old = setup_databases(verbosity=0, interactive=False, serialized_aliases=set())
try:
    import_records(dumps(r) for r in generate(N, 3))
    rates = {1: [], 0: []}
    for round_ in range(2):
        for threads in (1, 0):
            settings.EMBEDDING_THREADS = threads
            reset_provider()
            with connection.cursor() as c:
                c.execute("UPDATE search_document SET embedding = NULL, embedding_model = NULL, embedding_hash = NULL")
            t = time.perf_counter()
            n = embed_pending(batch_size=64)
            s = time.perf_counter() - t
            rates[threads].append(n / s)
            print(f"round {round_} threads {threads}: {n} records in {s:.1f} s = {n / s:.1f} records/s", flush=True)
    print({k: statistics.median(v) for k, v in rates.items()})
finally:
    teardown_databases(old, verbosity=0)
