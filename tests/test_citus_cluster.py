"""The Citus cluster the application's Citus tests run on (tests/citus.py):
a coordinator and two workers, with pgvector and pg_trgm on every node.

The story: Tramline's bugs are spread over the workers by product, as the
search index would be; a search for the bugs nearest a query's vector, and
one for a title typed with a typo, are answered from both workers' shards.
"""

import math
import random

import psycopg
import pytest

pytestmark = pytest.mark.slow

PRODUCTS = range(1, 9)


@pytest.fixture
def table(citus_cluster):
    """A name for a table of the test's own, dropped afterwards."""
    yield "tramline_bugs"
    citus_cluster.sql("coordinator", "DROP TABLE IF EXISTS tramline_bugs")


def shard_nodes(cluster, table: str) -> set[str]:
    """The names of the servers that hold a shard of `table`."""
    ports = {port: name for name, port in cluster.ports.items()}
    rows = cluster.sql(
        "coordinator", "SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = %s::regclass", [table]
    )
    return {ports[port] for (port,) in rows}


def test_a_table_distributed_by_product_spreads_over_both_workers(citus_cluster, table):
    assert citus_cluster.sql("coordinator", "SELECT count(*) FROM citus_get_active_worker_nodes()") == [(2,)]
    citus_cluster.sql("coordinator", f"CREATE TABLE {table} (id bigint, product_id int, title text)")
    citus_cluster.sql("coordinator", f"SELECT create_distributed_table('{table}', 'product_id', shard_count := 4)")
    with citus_cluster.connect() as conn, conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} VALUES (%s, %s, %s)",
            [(n, product, f"Bug {n} of product {product}") for n, product in enumerate(PRODUCTS, start=1)],
        )

    rows = citus_cluster.sql("coordinator", f"SELECT id, product_id FROM {table} ORDER BY id")

    assert rows == [(n, product) for n, product in enumerate(PRODUCTS, start=1)]
    assert shard_nodes(citus_cluster, table) == {"worker1", "worker2"}
    # Every row is on a worker; the coordinator holds metadata only.
    on_workers = sum(
        citus_cluster.sql(worker, f"SELECT count(*) FROM {table}_{shard}")[0][0]
        for worker in citus_cluster.workers
        for (shard,) in citus_cluster.sql(
            "coordinator",
            "SELECT shardid FROM citus_shards WHERE table_name = %s::regclass AND nodeport = %s",
            [table, citus_cluster.ports[worker]],
        )
    )
    assert on_workers == len(PRODUCTS)


def cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return 1 - dot / (math.hypot(*a) * math.hypot(*b))


def test_the_nearest_bugs_come_from_the_hnsw_index_on_every_worker(citus_cluster, table):
    draw = random.Random(7)
    bugs = [(n, draw.choice(PRODUCTS), [draw.uniform(-1, 1) for _ in range(3)]) for n in range(1, 121)]
    query = [0.3, -0.2, 0.9]
    citus_cluster.sql("coordinator", f"CREATE TABLE {table} (id bigint, product_id int, embedding vector(3))")
    citus_cluster.sql("coordinator", f"SELECT create_distributed_table('{table}', 'product_id', shard_count := 4)")
    citus_cluster.sql("coordinator", f"CREATE INDEX ON {table} USING hnsw (embedding vector_cosine_ops)")
    with citus_cluster.connect() as conn, conn.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", [(n, p, str(v)) for n, p, v in bugs])
    citus_cluster.sql("coordinator", f"ANALYZE {table}")
    # A literal, not a parameter: Citus cannot EXPLAIN a statement with
    # parameters on the workers ("could not determine data type of parameter $1").
    nearest = f"SELECT id FROM {table} ORDER BY embedding <=> '{query}'::vector LIMIT 5"

    with citus_cluster.connect(autocommit=False) as conn:
        # Analyzed, a shard of 30 rows would be scanned, not searched by its
        # index; SET LOCAL reaches the shards' transactions
        # (citus.propagate_set_commands = 'local', which the fixture sets).
        conn.execute("SET LOCAL enable_seqscan = off")
        found = [key for (key,) in conn.execute(nearest)]
        plan = "\n".join(row for (row,) in conn.execute("EXPLAIN " + nearest))

    assert found == [n for n, _, _ in sorted(bugs, key=lambda bug: cosine_distance(bug[2], query))[:5]]
    assert "Index Scan using" in plan and "_embedding_idx" in plan, plan
    for worker in citus_cluster.workers:
        assert citus_cluster.sql(worker, "SELECT count(*) FROM pg_indexes WHERE indexdef LIKE '%%USING hnsw%%'")[0][0]


def test_a_title_with_a_typo_finds_its_bug_through_pg_trgm_on_the_workers(citus_cluster, table):
    titles = {
        1: "Renewal button does nothing on Android 14",
        2: "Invoice PDF has the wrong VAT total",
        3: "Season pass expires a day early",
        4: "Offline ticket wallet shows an empty list",
    }
    citus_cluster.sql("coordinator", f"CREATE TABLE {table} (id bigint, product_id int, title text)")
    citus_cluster.sql("coordinator", f"SELECT create_distributed_table('{table}', 'product_id', shard_count := 4)")
    citus_cluster.sql("coordinator", f"CREATE INDEX ON {table} USING gin (title gin_trgm_ops)")
    with citus_cluster.connect() as conn, conn.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", [(n, n, t) for n, t in titles.items()])

    rows = citus_cluster.sql(
        "coordinator",
        f"SELECT id FROM {table} WHERE title %% %s ORDER BY similarity(title, %s) DESC",
        ["renewl buton does nothing", "renewl buton does nothing"],
    )

    assert rows == [(1,)]


def test_a_stopped_worker_fails_the_queries_that_need_it_until_it_is_back(citus_cluster, table):
    citus_cluster.sql("coordinator", f"CREATE TABLE {table} (id bigint, product_id int)")
    citus_cluster.sql("coordinator", f"SELECT create_distributed_table('{table}', 'product_id', shard_count := 4)")
    citus_cluster.sql("coordinator", f"INSERT INTO {table} SELECT n, n FROM generate_series(1, 8) n")

    citus_cluster.stop("worker2")
    try:
        assert citus_cluster.running == {"coordinator", "worker1"}
        with pytest.raises(psycopg.OperationalError, match=f"127.0.0.1:{citus_cluster.ports['worker2']}"):
            citus_cluster.sql("coordinator", f"SELECT count(*) FROM {table}")
    finally:
        citus_cluster.start("worker2")

    assert citus_cluster.sql("coordinator", f"SELECT count(*) FROM {table}") == [(8,)]
