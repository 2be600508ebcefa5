"""The service on a Citus cluster: migrate lays the index out, and every write path keeps it.

The story: a host that serves many QA teams outgrew one machine. Its
operator points DATABASE_URL at the coordinator of a Citus cluster (two
workers, tests/citus.py) and runs migrate: the index is distributed by
product, the rest stays on the coordinator, and migrate says so. Then the
records come in every way they do on one server (an import, the demo,
admin-style edits, a product change, deletions, a Jira sync with its
deletions and moves, the embedding worker), and each record has exactly
its one index row, on its product's shard. A second host that grew on one
server moves its database over and distributes it with one command.

Django in this process is bound to the plain test database, so the
service runs against the cluster in child processes (`manage.py`, with
DATABASE_URL at a database of the cluster), as an operator runs it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from psycopg import sql

from tests.conftest import TRAMLINE, VAT_BUG, jsonl
from tests.upstream.hostile import Sink
from tests.upstream.jira import FakeJira

ROOT = Path(__file__).resolve().parent.parent


def manage(url: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "DEBUG": "false", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def shell(url: str, code: str) -> object:
    """Run `code` with Django set up against `url`; what it prints last, as JSON."""
    out = manage(url, "shell", "-c", code).stdout.strip().splitlines()
    return json.loads(out[-1])


IN_STEP = """
import json
from django.db import connection
from backlog.models import Bug, Feature, Product, QATest
with connection.cursor() as c:
    c.execute(
        "SELECT d.kind, d.key, p.key, d.title FROM search_document d JOIN backlog_product p ON p.id = d.product_id"
    )
    indexed = sorted(c.fetchall())
records = [("product", p.key, p.key, p.name) for p in Product.objects.all()]
for kind, model in (("feature", Feature), ("test", QATest), ("bug", Bug)):
    for r in model.objects.select_related("product"):
        records.append((kind, r.key, r.product.key, getattr(r, "name", None) or r.title))
print(json.dumps([indexed, sorted(records)]))
"""


def in_step(url: str) -> list:
    """Every record's one index row, with its product and title: the index as the records say."""
    indexed, records = shell(url, IN_STEP)
    assert indexed == records
    return indexed


@pytest.fixture(scope="module")
def host(citus_cluster):
    """A database of the cluster, migrated: the Citus layout migrate makes."""
    citus_cluster.create_database("host")
    migrated = manage(citus_cluster.url(database="host"), "migrate", "--no-input")
    yield citus_cluster, citus_cluster.url(database="host"), migrated.stdout


def test_migrate_distributes_the_index_by_product_and_says_what_it_did(host):
    cluster, url, said = host

    assert "Citus: " in said and "search_document distributed by product_id: 4 shards on 2 node(s)" in said
    distributed = cluster.sql("coordinator", "SELECT logicalrelid::text FROM pg_dist_partition", database="host")
    assert distributed == [("search_document",)]  # the record tables and the rest stay on the coordinator
    constraints = cluster.sql(
        "coordinator",
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'search_document'::regclass AND contype IN ('p', 'u') ORDER BY conname",
        database="host",
    )
    assert constraints == [
        ("search_document_pkey", "PRIMARY KEY (id, product_id)"),
        ("search_document_record_product", "UNIQUE (kind, record_id, product_id)"),
    ]
    assert "distributed by product_id already" in manage(url, "distribute").stdout  # idempotent


def test_every_write_path_keeps_one_index_row_a_record_on_its_products_shard(host, tmp_path):
    cluster, url, _ = host
    records = tmp_path / "tramline.jsonl"
    records.write_text(jsonl(*TRAMLINE, VAT_BUG))

    manage(url, "seed_demo", "--records", "120", "--no-progress")
    manage(url, "import_records", str(records), "--no-progress")  # over some of the demo's keys: updates
    shell(
        url,
        """
from backlog.models import Bug, Product, QATest
Bug.objects.filter(key="BUG-20").update(title="Invoice PDF has the wrong VAT total on the cluster")
bug = Bug.objects.get(key="BUG-1")  # a record moved to another product: its row changes shard
bug.product = Product.objects.get(key="PRD-2")
bug.feature = None
bug.save()
QATest.objects.filter(product__key="PRD-1").update(status="archived")
Bug.objects.filter(key__in=list(Bug.objects.order_by("-id").values_list("key", flat=True)[:5])).delete()
print(1)
""",
    )

    rows = in_step(url)
    assert ["bug", "BUG-1", "PRD-2"] in [row[:3] for row in rows]
    assert ["bug", "BUG-20", "PRD-2", "Invoice PDF has the wrong VAT total on the cluster"] in rows
    placed = cluster.sql(
        "coordinator",
        "SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'search_document'::regclass "
        "AND shard_size > 0",
        database="host",
    )
    assert placed == [(2,)]  # ten products over both workers
    moved = cluster.sql("coordinator", "SELECT count(*) FROM search_document WHERE key = 'BUG-1'", database="host")
    assert moved == [(1,)]

    manage(url, "embed", "--no-progress")
    missing = cluster.sql(
        "coordinator", "SELECT count(*) FROM search_document WHERE embedding IS NULL", database="host"
    )
    assert missing == [(0,)]


def test_a_jira_sync_with_edits_deletions_and_moves_keeps_the_index_in_step(host, monkeypatch):
    _, url, _ = host
    jira = FakeJira.from_gitbugs(40)
    jira.projects["HDFS"] = {"id": "10020", "key": "HDFS", "name": "HDFS", "description": ""}
    jira.start()
    credentials = {"JIRA_EMAIL": jira.email, "JIRA_API_TOKEN": jira.token}
    try:
        first = manage(url, "sync", "jira", "--url", jira.url, "--project", "HADOOP", "--no-progress", env=credentials)
        keys = sorted((issue["key"] for issue in jira.issues.values()), key=lambda k: int(k.split("-")[1]))
        jira.edit(keys[0], summary="Balancer hangs when a datanode is decommissioned")
        jira.delete(keys[1])
        jira.move(keys[2], "HDFS")
        jira.add("Checksum error after an upgrade to 3.4", "Reading any file fails after the upgrade.")
        second = manage(url, "sync", "jira", "--url", jira.url, "--project", "HADOOP", "--no-progress", env=credentials)
    finally:
        jira.stop()

    assert "created 40" in first.stdout and "created 1, updated 1, deleted 2" in second.stdout
    rows = in_step(url)
    hadoop = {key: title for kind, key, product, title in rows if product == "HADOOP" and kind == "bug"}
    assert len(hadoop) == 39 and hadoop[keys[0]] == "Balancer hangs when a datanode is decommissioned"
    assert keys[1] not in hadoop and keys[2] not in hadoop


def test_a_database_grown_on_one_server_is_distributed_by_one_command(citus_cluster):
    """Migrated and filled before Citus was there (as after a pg_restore onto a new
    coordinator), then `manage.py distribute`: the same rows, now on the shards."""
    cluster, name = citus_cluster, "grown"
    for node in cluster.nodes:
        cluster.sql(node, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)), database="postgres")
        for extension in ("vector", "pg_trgm"):
            cluster.sql(node, sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(extension)), database=name)
    url = cluster.url(database=name)
    said = manage(url, "migrate", "--no-input").stdout
    assert "Citus" not in said  # no citus here yet: a plain server's layout
    manage(url, "seed_demo", "--records", "200", "--no-progress")
    before = in_step(url)
    for node in cluster.nodes:
        cluster.sql(node, "CREATE EXTENSION citus", database=name)
    cluster.sql(
        "coordinator",
        "SELECT citus_set_coordinator_host('127.0.0.1', %s)",
        [cluster.ports["coordinator"]],
        database=name,
    )
    for worker in cluster.workers:
        cluster.sql("coordinator", "SELECT citus_add_node('127.0.0.1', %s)", [cluster.ports[worker]], database=name)

    out = manage(url, "distribute").stdout

    assert "search_document distributed by product_id: 4 shards on 2 node(s)" in out
    assert "200 index rows distributed in" in out
    rebuilt = cluster.sql(
        "coordinator", "SELECT indexdef FROM pg_indexes WHERE indexname = 'search_document_hnsw'", database=name
    )
    assert rebuilt and "USING hnsw (embedding halfvec_cosine_ops)" in rebuilt[0][0]  # built again, on the shards
    assert in_step(url) == before
    local = cluster.sql("coordinator", "SELECT pg_relation_size('search_document')", database=name)
    assert local == [(0,)]  # the rows moved into the shards; the coordinator's own table is an empty shell
    manage(url, "seed_demo", "--records", "240", "--seed", "1", "--no-progress")  # and writes go on
    assert len(in_step(url)) > 200


OUTAGE = """
import json
from django.contrib.auth.models import User
from django.test import Client
from accounts.tokens import issue
user, _ = User.objects.get_or_create(username="operator", defaults={"is_superuser": True})  # sees every product
client = Client(HTTP_AUTHORIZATION=f"Token {issue(user, 'citus test', 'write')[1]}", HTTP_HOST="localhost")
search = client.get("/api/search", {"query": "crash", "mode": "keyword"})
ready = Client(HTTP_HOST="localhost").get("/readyz")
print(json.dumps({
    "status": search.status_code, "retry_after": search.headers.get("Retry-After"), "body": search.json(),
    "ready": ready.status_code, "checks": ready.json()["checks"],
}))
"""


def test_a_worker_down_is_a_503_that_says_the_cluster_is_degraded_and_readyz_names_it(host):
    cluster, url, _ = host
    port = cluster.ports["worker2"]
    cluster.stop("worker2")
    try:
        down = shell(url, OUTAGE)
    finally:
        cluster.start("worker2")
    back = shell(url, OUTAGE)

    assert (down["status"], down["retry_after"], down["body"]["error"]["code"]) == (503, "5", "cluster_degraded")
    assert "Part of the database cluster is not reachable" in down["body"]["error"]["message"]
    assert "Traceback" not in json.dumps(down) and str(port) not in json.dumps(down["body"])
    assert down["ready"] == 200 and down["checks"]["cluster"] == f"degraded: worker 127.0.0.1:{port} not reachable"
    assert back["status"] == 200 and back["checks"]["cluster"] == "ok", back  # by itself, once the worker is back
    assert back["body"]["total"] > 0  # every product's shards answered


class StoppingJira(FakeJira):
    """A Jira that, as it serves its `after`th search, stops the
    worker holding the shard of the product the sync writes (HADOOP's)."""

    cluster = None
    database = ""
    after: int | None = None
    stopped: str | None = None

    def search(self, request, token_paging):
        if self.after is not None:  # every search counts: the sync pages by keyset, a new search a page
            self.after -= 1
            if self.after == 0:
                (port,) = self.cluster.sql(
                    "coordinator",
                    "SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column("
                    "'search_document', (SELECT id FROM backlog_product WHERE key = 'HADOOP'))",
                    database=self.database,
                )[0]
                self.stopped = next(name for name, p in self.cluster.ports.items() if p == port)
                self.cluster.stop(self.stopped)
        return super().search(request, token_paging)


def test_a_sync_cut_off_by_a_worker_down_resumes_with_nothing_lost_or_doubled(citus_cluster, tmp_path):
    cluster = citus_cluster
    cluster.create_database("cut")
    url = cluster.url(database="cut")
    manage(url, "migrate", "--no-input")
    jira = StoppingJira.from_gitbugs(60)
    # Six pages of ten: after the check's search and two pages, the worker stops under the third.
    jira.cluster, jira.database, jira.after, jira.page_cap = cluster, "cut", 4, 10
    jira.start()
    credentials = {"JIRA_EMAIL": jira.email, "JIRA_API_TOKEN": jira.token}
    command = [sys.executable, "manage.py", "sync", "jira", "--url", jira.url, "--project", "HADOOP", "--no-progress"]
    try:
        cut = subprocess.run(
            command, cwd=ROOT, env={**os.environ, "DATABASE_URL": url, **credentials}, capture_output=True, text=True
        )
        cluster.start(jira.stopped)  # back after the third page: the sync died on it
        jira.after = None
        resumed = manage(
            url, "sync", "jira", "--url", jira.url, "--project", "HADOOP", "--no-progress", env=credentials
        )
    finally:
        for worker in set(cluster.workers) - cluster.running:
            cluster.start(worker)
        jira.stop()

    said = cut.stderr.strip().splitlines()[-1]  # the command's own line (the log above it has the database's words)
    assert cut.returncode != 0 and "the database refused a page; nothing of it was written" in said
    assert "created" in resumed.stdout
    rows = in_step(url)
    assert len([row for row in rows if row[0] == "bug"]) == 60  # each issue once, none lost


SAVED = """
import json
from datetime import UTC, datetime
from django.contrib.auth.models import User
from django.core.management import call_command
from backlog.imports import import_records
from saved.models import SavedSearch
owner, _ = User.objects.get_or_create(username="watcher", defaults={"is_superuser": True})
saved = SavedSearch.objects.create(
    owner=owner, name="Quota bugs", query="quota exceeded", mode="keyword", filters={"entities": ["bug"]},
    webhook_url="__HOOK__",
)
call_command("notify_saved_searches")  # nothing new since it was saved: nothing sent
product = {"kind": "product", "key": "QUOTA", "name": "Quota service"}
line = {"kind": "bug", "key": "BUG-88001", "product": "QUOTA", "title": "Quota exceeded when exporting 500 invoices",
        "status": "open", "severity": "high", "created_at": datetime.now(UTC).isoformat()}  # new: after the save
report = import_records([json.dumps(product), json.dumps(line)])
assert report.written, report.problems
call_command("notify_saved_searches")
call_command("notify_saved_searches")  # sent once
print(json.dumps(1))
"""


def test_a_saved_search_posts_its_new_matches_from_the_cluster_once(host):
    _, url, _ = host
    hook = Sink({"ok": True}).start()
    try:
        shell_env = {"SAVED_SEARCH_WEBHOOK_PRIVATE": "true", "SAVED_SEARCH_WEBHOOK_BACKOFF": "0.01"}
        out = manage(url, "shell", "-c", SAVED.replace("__HOOK__", f"{hook.url}/hook"), env=shell_env)
    finally:
        hook.stop()

    assert out.stdout.strip().splitlines()[-1] == "1"
    (delivery,) = hook.requests
    sent = json.loads(delivery.body)
    assert [record["key"] for record in sent["records"]] == ["BUG-88001"] and sent["total"] == 1


def test_the_leak_and_access_tests_hold_on_the_cluster(citus_cluster):
    """tests/test_leaks.py (every surface: REST, MCP over a real client session, the
    staff UI, the admin, import) and tests/test_access_in_index.py, run whole against
    a database of the cluster: pytest-django reuses it (--reuse-db, made here with
    Citus on every node) and migrate distributes its index. The two tests that read
    one server's plans are left out: on the coordinator a plan is Citus' Custom Scan
    (tests/test_citus_search.py reads the shards' plans)."""
    citus_cluster.create_database("test_leaks_citus")
    plans = [
        "tests/test_access_in_index.py::test_carol_s_words_are_found_in_her_products_lexemes_never_in_everyone_s",
        "tests/test_access_in_index.py::test_carol_s_typo_probe_never_walks_her_records_in_product_order",
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--reuse-db",
            "tests/test_leaks.py",
            "tests/test_access_in_index.py",
            *(f"--deselect={test}" for test in plans),
        ],  # fmt: skip
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": citus_cluster.url(), "TEST_DATABASE_NAME": "test_leaks_citus"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in summary and "failed" not in summary, summary
    distributed = citus_cluster.sql(
        "coordinator", "SELECT logicalrelid::text FROM pg_dist_partition", database="test_leaks_citus"
    )
    assert distributed == [("search_document",)]
