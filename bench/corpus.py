"""A database of N demo records, built the one way every harness reads it.

    import django_setup  # noqa: F401
    import corpus

    with corpus.database(100_000, keep=True) as name:   # built once, then reused
        ...

The records are `backlog.demo.generate`'s, imported by `import_records`,
each description ending in the word every record holds (queries.UNIVERSAL).
The indexes are then built again on the full table, as a bulk load or a
REINDEX builds them. Vectors: embedding 100k records takes half an hour to
an hour on 2 cores, so by default the FAST PATH: 1,000 records embedded for
real, every other one the vector of a random embedded record of its product
plus Gaussian noise (sigma 0.02 a component), normalised. The HNSW index
then holds clustered vectors as with real data; relevance is not measured
on it (that is search_eval's), only speed and recall against an exact
scan. `real_vectors` embeds every record (`embed_pending`), in a database
of its own.
"""

import contextlib
import random
import time

import django_setup
import numpy as np
from django.db import connection, transaction
from queries import UNIVERSAL

from backlog.demo import generate
from backlog.imports import import_records
from backlog.interchange import KIND_ORDER, dumps
from backlog.models import RECORD_MODELS
from search.indexing.embeddings import document_text, get_provider

# Per component; at 0.05 the noise (norm ~1) swamped the real vectors and made
# the set far harder for HNSW than any text embedding (recall 0.4 at ef 40).
NOISE = 0.02
REBUILT = ("search_document_fts", "search_document_title_trgm", "search_document_hnsw")


def name(records: int, real_vectors: bool = False) -> str:
    """The database kept for a size (100,000 records: `test_bench_search`)."""
    base = "test_bench_search_real" if real_vectors else "test_bench_search"
    return base if records == 100_000 else f"{base}_{records}"


def lines(records: int, seed: int = 0, universal: bool = True):
    """The demo records as JSON Lines; with `universal`, each description ends in UNIVERSAL."""
    for record in generate(records, seed):
        if universal:
            record["description"] = (record.get("description", "") + f" {UNIVERSAL}").strip()
        yield dumps(record)


def load(records: int, seed: int = 0, universal: bool = True) -> None:
    """`import_records` of the demo records into the connected database, then VACUUM ANALYZE."""
    report = import_records(lines(records, seed, universal))
    assert not report.problems, report.problems[:3]
    vacuum()


def vacuum() -> None:
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE search_document")


def count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_document")
        return cursor.fetchone()[0]


def empty_tables(*more_models) -> None:
    """Every record (and the `more_models`' rows) gone, ids from 1 again: a fresh import's start."""
    tables = [RECORD_MODELS[kind]._meta.db_table for kind in KIND_ORDER]
    tables += [model._meta.db_table for model in more_models]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
        cursor.execute("VACUUM ANALYZE")


def fast_path_vectors(sample: int, seed: int) -> None:
    """Embed `sample` records for real; give every other one the vector of a
    random embedded record of its product plus noise. Written with COPY in
    binary: at a million records, formatting vectors as text took longer
    than building the index."""
    from pgvector import HalfVector
    from pgvector.psycopg import register_vector

    provider = get_provider()
    rng = np.random.default_rng(seed)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, product_id FROM search_document ORDER BY id")
        rows = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
        chosen = np.array(sorted(random.Random(seed).sample(range(len(rows)), min(sample, len(rows)))))
        cursor.execute(
            "SELECT id, title, body FROM search_document WHERE id = ANY(%s) ORDER BY id", [rows[chosen, 0].tolist()]
        )
        real = provider.embed_documents([document_text(title, body) for _, title, body in cursor.fetchall()])
    by_product: dict[int, list[int]] = {}
    for position, i in enumerate(chosen):
        by_product.setdefault(int(rows[i, 1]), []).append(position)
    everyone = np.arange(len(chosen))
    base = np.empty(len(rows), dtype=np.int64)
    for product in np.unique(rows[:, 1]):
        members = rows[:, 1] == product
        pool = np.array(by_product.get(int(product), everyone))
        base[members] = pool[rng.integers(len(pool), size=int(members.sum()))]
    vectors = real[base] + NOISE * rng.standard_normal((len(rows), real.shape[1]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[chosen] = real  # the embedded records keep their real vectors
    connection.ensure_connection()
    register_vector(connection.connection)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE fast_path (id bigint, e halfvec) ON COMMIT DROP")
        with cursor.cursor.copy("COPY fast_path (id, e) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "halfvec"])
            for i in range(len(rows)):
                copy.write_row((int(rows[i, 0]), HalfVector(vectors[i])))
        cursor.execute(
            "UPDATE search_document d SET embedding = v.e, embedding_model = %s, embedding_hash = d.content_hash "
            "FROM fast_path v WHERE d.id = v.id",
            [provider.model_id],
        )
    vacuum()


def index_definition(index: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index])
        return cursor.fetchone()[0]


def build_index(index: str, definition: str) -> tuple[float, int]:
    """Drop the index and build it from `definition` on the full table, as a
    bulk load (or REINDEX) does: (seconds, bytes). The HNSW build gets
    maintenance_work_mem for its whole graph, as pgvector's docs advise,
    and one parallel worker beside the leader (two cores)."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {index}")
        cursor.execute("SET maintenance_work_mem = '3GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
        started = time.perf_counter()
        cursor.execute(definition)
        seconds = time.perf_counter() - started
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("RESET max_parallel_maintenance_workers")
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [index])
        return seconds, cursor.fetchone()[0]


def build(records: int, seed: int = 0, real_vectors: bool = False) -> dict:
    """Fill the connected database up to `records` demo records (nothing if
    it has them): import, the indexes built again on the full table, the
    vectors. What each step took, printed and returned."""
    figures: dict = {}
    if count() < records:
        started = time.perf_counter()
        load(records, seed)
        figures["import_s"] = time.perf_counter() - started
        print(f"# imported {records:,} records in {figures['import_s']:.0f} s (indexes kept current)")
        # Dropped first, so that filling in the vectors does not update them row by row.
        definitions = {index: index_definition(index) for index in REBUILT}
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX " + ", ".join(REBUILT))
        if not real_vectors:
            started = time.perf_counter()
            fast_path_vectors(1000, seed)
            print(f"# FAST PATH vectors (1,000 real, the rest derived) in {time.perf_counter() - started:.0f} s")
        for index, definition in definitions.items():
            took, size = figures[index] = build_index(index, definition)
            print(f"# {index} built in {took:.0f} s, {size / 2**20:,.0f} MB")
    if real_vectors:  # resumes where a killed run stopped
        from backlog.management.commands._progress import progress_bars
        from search.indexing.vectors import embed_pending

        started = time.perf_counter()
        if written := embed_pending(batch_size=128, progress=progress_bars(True)):
            vacuum()
            print(f"# embedded {written:,} records in {time.perf_counter() - started:.0f} s")
    return figures


@contextlib.contextmanager
def database(
    records: int, *, seed: int = 0, keep: bool = True, real_vectors: bool = False, database: str | None = None
):
    """A database of `records` demo records (`name(records)`, or `database`),
    built if it has fewer; yields the figures of what was built (empty when
    it was there already). Kept by default: the harnesses read one another's."""
    with django_setup.database(database or name(records, real_vectors), keep=keep):
        yield build(records, seed, real_vectors)


def prewarm() -> str:
    """Read the index table's pages into memory (pg_prewarm), as a server
    that has been running has them: a harness's server may start with the
    process, and the first, untimed round warms only what its queries touch
    (the kernel also reclaims idle page cache, so a later run can find the
    files on disk). TOAST (the text, the tsvectors, the vectors) goes to the
    kernel's cache; the table and its indexes to shared_buffers, the ones
    every search reads last, so that they stay. What it did, in words."""
    with connection.cursor() as cursor:
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        except Exception as exc:  # a server without the extension, or no right to add it
            return f"not prewarmed ({str(exc).splitlines()[0]})"
        cursor.execute(
            """
            SELECT sum(pg_prewarm(c.oid, 'read')) FROM pg_class c
            WHERE c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname = 'search_document')
            """
        )
        toast = cursor.fetchone()[0] or 0
        cursor.execute(
            """
            SELECT sum(pg_prewarm(c.oid, 'buffer')) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
            WHERE i.indrelid = 'search_document'::regclass
              AND c.relname NOT IN ('search_document_fts', 'search_document_hnsw', 'search_document_pkey')
            """
        )
        small = cursor.fetchone()[0] or 0
        blocks = toast + small
        for index in ("search_document", "search_document_pkey", "search_document_hnsw", "search_document_fts"):
            cursor.execute("SELECT pg_prewarm(%s::regclass, 'buffer')", [index])
            blocks += cursor.fetchone()[0]
    return f"prewarmed {blocks * 8 / 1024:,.0f} MB (pg_prewarm)"


def half_the_products():
    """A user whose one team has every other product; (the user, the share of records they see)."""
    from django.contrib.auth.models import Group, User

    from backlog.models import Product

    team, _ = Group.objects.get_or_create(name="bench half")
    products = list(Product.objects.order_by("key"))
    for product in products[::2]:
        product.teams.add(team)
    user, _ = User.objects.get_or_create(username="bench-half")
    user.groups.add(team)
    with connection.cursor() as cursor:
        cursor.execute("SELECT avg((product_id = ANY(%s))::int) FROM search_document", [[p.pk for p in products[::2]]])
        share = float(cursor.fetchone()[0])
    return user, share
