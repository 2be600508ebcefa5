"""Search on a Citus cluster answers as one server does.

The story: a host moved its QA records onto a Citus cluster (a coordinator
and two workers, tests/citus.py); migrate distributed the index by product.
The same 300 demo records, with the same vectors, are in this process's
plain test database too. Dana runs the host and sees every product; Rita's
team has half of them. They search both servers, and:

- every keyword search finds the same top 20, in the same order, and the
  same total, on the cluster as on one server: N and the common words'
  document frequencies come from the shards' own statistics, gathered
  once and cached (search.ranking.statistics), never counted per search;
- hybrid and semantic searches share at least 95 % of their top 20 (each
  shard walks its own HNSW graph, and the coordinator merges their lists);
- Rita's searches stay inside her products, and match one server's;
- every vector statement walks each shard's HNSW index, with the search's
  hnsw.ef_search and hnsw.iterative_scan on the workers.

exact_limit is 40 on both (SEARCH_RANKING): a few hundred records then have
common words that the keyword arm never counts, as tens of thousands do at
the default of 3,000; one server reads their frequencies from its column
statistics, the cluster from its shards'. The records are small enough
that ANALYZE reads all of them, on the one server and on every shard, so
both know every frequency exactly: "the same" is exact here (beyond
30,000 rows a table both read samples; statistics.py says what then).

Vectors are the bench's fast path (bench/corpus.py): 40 records
embedded for real, every other one a random embedded record of its product
plus noise; made once on the cluster's side and written to both.

Django in this process is bound to the plain test database, so the
cluster's side runs in a child process (`manage.py shell`, DATABASE_URL at
a database of the cluster), as an operator's app server would.
"""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from backlog.access import visible_product_ids
from backlog.demo import generate
from backlog.imports import import_records
from backlog.interchange import dumps
from backlog.models import Bug, Feature, Product, QATest
from search.contract import SearchRequest
from search.operations.search import search
from search.ranking import counting, statistics

from .conftest import forget_history

ROOT = Path(__file__).resolve().parent.parent
RECORDS, EMBEDDED, SEED, NOISE = 300, 40, 0, 0.02
RANKING = {"exact_limit": 40}
COMMON = 60  # words whose document frequencies are compared
QUERIES = [
    "crash",
    "payment fails",
    "app crashes on startup",
    "season pass renewal",
    '"payment sheet"',
    "checko",
    "offline ticket wallet",
    "dark mode contrast",
    "memory leak map",
    "duplicate charge card",
    "login session expired",
    "invoice total does not match the breakdown",
    "crash or freeze",
    "screen",
    "open -android",
    "BUG-14",
]
FILTERS = {"status": ["open", "accepted", "active"], "entities": ["bug", "test"]}
CASES = {  # name: (who, the request's fields)
    "keyword, Dana": ("dana", {"mode": "keyword"}),
    "keyword, Dana, one product": ("dana", {"mode": "keyword", "products": ["PRD-1"]}),
    "keyword, Rita, filtered": ("rita", {"mode": "keyword", **FILTERS}),
    "hybrid, Dana": ("dana", {"mode": "hybrid"}),
    "semantic, Dana": ("dana", {"mode": "semantic"}),
    "hybrid, Rita": ("rita", {"mode": "hybrid"}),
}


# -- what both sides do: load the records, search, say what came back ----------------------------


def load(vectors: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """The demo's records through the importer, Rita and her team (every
    other product), the records' vectors (these, or the fast path's, made
    here), and fresh statistics. The vectors, by key."""
    import_records(dumps(record) for record in generate(RECORDS, SEED))
    team = Group.objects.create(name="Half the products")
    for product in list(Product.objects.order_by("key"))[::2]:
        product.teams.add(team)
    User.objects.create_user("rita").groups.add(team)
    from search.indexing.embeddings import document_text, get_provider

    provider = get_provider()
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, product_id, title, body FROM search_document ORDER BY key")
        rows = cursor.fetchall()
        if vectors is None:
            vectors = fast_path(rows, provider, document_text)
        cursor.executemany(
            "UPDATE search_document SET embedding = %s::halfvec, embedding_model = %s, embedding_hash = content_hash "
            "WHERE key = %s AND product_id = %s",
            [(str(vectors[key]), provider.model_id, key, product) for key, product, _, _ in rows],
        )
        cursor.execute("ANALYZE search_document")  # on a coordinator: every shard
    return vectors


def fast_path(rows, provider, document_text) -> dict[str, list[float]]:
    """EMBEDDED records embedded for real; each other one the vector of a random
    embedded record of its product plus noise (bench/corpus.py's fast path)."""
    rng = random.Random(SEED)
    chosen = sorted(rng.sample(range(len(rows)), EMBEDDED))
    real = provider.embed_documents([document_text(rows[i][2], rows[i][3]) for i in chosen])
    by_product: dict[int, list[int]] = {}
    for position, i in enumerate(chosen):
        by_product.setdefault(rows[i][1], []).append(position)
    noise = np.random.default_rng(SEED)
    vectors = {}
    for i, (key, product, _, _) in enumerate(rows):
        if i in chosen:
            vector = real[chosen.index(i)]
        else:
            pool = by_product.get(product) or list(range(len(chosen)))
            vector = real[pool[rng.randrange(len(pool))]] + NOISE * noise.standard_normal(real.shape[1])
        vectors[key] = [round(float(x), 5) for x in vector / np.linalg.norm(vector)]
    return vectors


def answers() -> dict:
    """Every case's searches: each query's top 20 keys, their products, the
    total and the product facet, by case and query."""
    users = {"dana": None, "rita": User.objects.get(username="rita")}
    found = {}
    for case, (who, fields) in CASES.items():
        for query in QUERIES:
            response = search(SearchRequest(query=query, limit=20, include_facets=True, **fields), users[who])
            found.setdefault(case, {})[query] = {
                "keys": [hit.key for hit in response.results],
                "products": sorted({hit.product for hit in response.results if hit.product}),
                "total": response.total,
                "facet_products": sorted(f.value for f in response.facets.product) if response.facets else [],
            }
    return found


def corpus_statistics() -> dict:
    """N and the document frequencies the keyword arm uses for Dana, of the corpus'
    COMMON commonest words (statistics.document_frequencies)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT word FROM ts_stat('SELECT search_vector FROM search_document') "
            "WHERE position(chr(39) in word) = 0 ORDER BY ndoc DESC, word LIMIT %s",
            [COMMON],
        )
        words = [word for (word,) in cursor.fetchall()]
    n, df = statistics.document_frequencies([f"'{word}'" for word in words])
    return {"n": n, "df": df}


def member_words() -> dict:
    """Rita's common words, as her statistics read them from her products' records
    (search.ranking.counting.sample_words: ts_stat over a sample of them, here all)."""
    products = sorted(visible_product_ids(User.objects.get(username="rita")))
    n, _ = statistics.corpus(products)
    return counting.sample_words(products, n, keep=False)


def on_the_cluster(out: str) -> None:
    """The cluster's side, run in a child process (`manage.py shell`): load,
    answer, and show the plans and settings of the vector statements."""
    from django.db import transaction

    vectors = load()
    result = {"vectors": vectors, "answers": answers(), "statistics": corpus_statistics(), "words": member_words()}
    with CaptureQueriesContext(connection) as statements:
        search(SearchRequest(query="payment screen", mode="keyword", limit=20), None)
    result["keyword_statements"] = [s["sql"] for s in statements.captured_queries]
    with CaptureQueriesContext(connection) as statements:
        search(SearchRequest(query="payment fails", mode="hybrid", limit=20), None)
    sqls = [s["sql"] for s in statements.captured_queries]
    plans, settings = [], []
    for i, sql in enumerate(sqls):
        if "embedding <=>" not in sql:
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sqls[i - 1])  # its SET LOCAL statement, as the search ran it
            cursor.execute("SET LOCAL citus.explain_all_tasks = on")
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            plans.append(cursor.fetchone()[0])
            # Evaluated with each shard's rows, so on the workers, in this transaction.
            cursor.execute(
                "SELECT DISTINCT current_setting('hnsw.ef_search') || ' ' || current_setting('hnsw.iterative_scan') "
                "|| left(d.key, 0) FROM search_document d"
            )
            settings.append([row[0] for row in cursor.fetchall()])
    result["vector_plans"], result["worker_settings"] = plans, settings
    Path(out).write_text(json.dumps(result))


# -- the two sides ------------------------------------------------------------------------------


def manage(url: str, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "DEBUG": "false", "SEARCH_RANKING": json.dumps(RANKING)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="session")  # once, however pytest orders the tests that share the cluster
def cluster(citus_cluster, tmp_path_factory):
    """The cluster's answers: a database migrated (the index distributed by
    product), the records loaded, the searches run, in a child process."""
    citus_cluster.create_database("searching")
    url = citus_cluster.url(database="searching")
    manage(url, "migrate", "--no-input")
    out = tmp_path_factory.mktemp("citus-search") / "cluster.json"
    manage(url, "shell", "-c", f"from tests.test_citus_search import on_the_cluster; on_the_cluster({str(out)!r})")
    shards = citus_cluster.sql(
        "coordinator",
        "SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'search_document'::regclass "
        "AND shard_size > 0",
        database="searching",
    )
    assert shards == [(2,)]  # the products lie on both workers
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def one_server(cluster, django_db_setup, django_db_blocker):
    """The same records and vectors in this process's plain test database, and its
    answers: loaded once for the module (the tests only read), removed after it."""
    with django_db_blocker.unblock(), override_settings(SEARCH_RANKING=RANKING):
        with connection.cursor() as cursor:  # ANALYZE counts lexemes lossily here, not on the shards
            cursor.execute(LOSSY_STATISTICS)
        load(cluster["vectors"])
        found = {"answers": answers(), "statistics": corpus_statistics(), "words": member_words()}
    yield found
    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute(LOSSY_STATISTICS.replace("STATISTICS 1", "STATISTICS -1"))
        for model in (Bug, QATest, Feature, Product, User, Group):
            model.objects.all().delete()
        forget_history()  # committed, their events would collide with a later test's reset sequences


# On the one server only: its ANALYZE counts the search_vector lexemes lossily past 2,857 of them
# (this corpus has some 20,000; the default target of 100 does so past 144,285, as a corpus of
# 5,909 records did), and undercounts a word it forgot once; a shard's 75 records are within.
LOSSY_STATISTICS = "ALTER TABLE search_document ALTER COLUMN search_vector SET STATISTICS 1"


def overlap(ours: list[str], theirs: list[str]) -> float:
    return len(set(ours) & set(theirs)) / max(len(ours), 1)


# -- the tests ------------------------------------------------------------------------------------


def test_keyword_searches_find_the_same_top_20_and_totals_as_one_server(cluster, one_server):
    for case in ("keyword, Dana", "keyword, Dana, one product", "keyword, Rita, filtered"):
        for query in QUERIES:
            ours, theirs = one_server["answers"][case][query], cluster["answers"][case][query]
            assert (theirs["keys"], theirs["total"]) == (ours["keys"], ours["total"]), (case, query)
    assert any(a["total"] > RANKING["exact_limit"] for a in one_server["answers"]["keyword, Dana"].values())


def test_the_cluster_knows_n_and_every_common_word_s_frequency_as_one_server_does(cluster, one_server):
    """Counted below CACHED_FROM records (from there read from a sample of
    records chosen by their ids), never read from ANALYZE's figures, which
    differ between one server and the shards (LOSSY_STATISTICS; issue 51,
    item 6); and kept: a keyword search of common words after the others
    counts nothing and asks no worker for statistics."""
    ours, theirs = one_server["statistics"], cluster["statistics"]
    assert theirs["n"] == ours["n"] == RECORDS
    assert len(ours["df"]) == COMMON and theirs["df"] == ours["df"]
    assert sum(df > RANKING["exact_limit"] for df in ours["df"].values()) > 20
    assert {"'payment'", "'screen'"} <= set(ours["df"])
    asked = cluster["keyword_statements"]  # "payment screen", after the searches above
    assert not [sql for sql in asked if "count(" in sql or "run_command_on" in sql or "pg_stats" in sql], asked


def test_a_member_s_common_words_are_read_on_the_cluster_as_on_one_server(cluster, one_server):
    """ts_stat over a distributed table: Rita's words, and how many of her records hold each."""
    ours, theirs = one_server["words"], cluster["words"]
    assert len(ours) > 20 and theirs == ours


def test_hybrid_and_semantic_searches_share_at_least_95_percent_of_one_server_s_top_20(cluster, one_server):
    for case in ("hybrid, Dana", "semantic, Dana", "hybrid, Rita"):
        shared = [
            overlap(one_server["answers"][case][query]["keys"], cluster["answers"][case][query]["keys"])
            for query in QUERIES
        ]
        assert sum(shared) / len(shared) >= 0.95, (case, shared)


def test_rita_s_searches_on_the_cluster_stay_inside_her_products(cluster, one_server, db):
    hers = sorted(Product.objects.filter(teams__user__username="rita").values_list("key", flat=True))
    assert 0 < len(hers) < Product.objects.count()
    seen = set()
    for case in ("keyword, Rita, filtered", "hybrid, Rita"):
        for query in QUERIES:
            found = cluster["answers"][case][query]
            assert set(found["products"]) <= set(hers) and set(found["facet_products"]) <= set(hers), (case, query)
            seen.update(found["products"])
            assert found["total"] == one_server["answers"][case][query]["total"] or case.startswith("hybrid")
    assert seen  # she found things


def nodes(tree):
    """Every plan node of an EXPLAIN (FORMAT JSON), the shards' (Citus' "Remote Plan") included."""
    if isinstance(tree, dict):
        if "Node Type" in tree:
            yield tree
        for value in tree.values():
            yield from nodes(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from nodes(value)


def test_every_vector_statement_walks_each_shard_s_hnsw_index_with_the_search_s_settings(cluster):
    """pgvector costs an HNSW scan at ef_search 400 near a sequential scan and
    sort of a few thousand rows, and a shard holds few: without the search's
    settings (enable_seqscan off, on the workers too) each shard would read
    all its vectors. The settings reach the workers: `SET LOCAL` statements
    with citus.propagate_set_commands = 'local' in the same transaction."""
    assert len(cluster["vector_plans"]) == 2  # the semantic arm, then its feedback pass
    for plan in cluster["vector_plans"]:
        scans = [n for n in nodes(plan) if n.get("Relation Name", "").startswith("search_document_")]
        nearest = [n for n in scans if n.get("Alias") == "d"]  # not the feedback's own rows (f, by id)
        assert len({n["Relation Name"] for n in nearest}) == 4, scans  # every shard: the default, two a worker
        assert all(
            n["Node Type"] == "Index Scan" and n["Index Name"].startswith("search_document_hnsw_") for n in nearest
        )
    assert cluster["worker_settings"] == [["400 relaxed_order"], ["400 relaxed_order"]]
