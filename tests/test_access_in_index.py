"""The access rule inside the index scan: a search costs the same whatever matches in products the caller cannot see.

Each record carries its product as a token in search_markers ('~p' and the
product's id, search.indexing.sql.PRODUCT_PREFIX), and the access scope of a
user who sees only some products asks the words' GIN index for their tokens
(search.query.scope.access_scope): the index hands over no hidden match to
be read and dropped. bench/timing_bench.py measures the time; here are the
tokens, the plan, and that every statement reading a word's matches asks
for them.

The people: Carol is on the Tramline team only: Ledgerly (PRD-2) is hidden
from her. Alice sees everything.
"""

from importlib import import_module

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backlog.models import Bug, Product
from backlog.services import import_records
from search import service
from search.indexing.sql import products_tsquery
from search.query.scope import access_scope

from .conftest import TRAMLINE, jsonl, seeing_all_products

pytestmark = pytest.mark.django_db

LEDGERLY_BUG = {
    "kind": "bug",
    "key": "BUG-30",
    "product": "PRD-2",
    "title": "Invoice renewal reminder button does nothing",
    "severity": "critical",
    "status": "open",
    "created_at": "2026-02-05T10:00:00+00:00",
}


@pytest.fixture
def story(db):
    report = import_records(jsonl(*TRAMLINE, LEDGERLY_BUG).splitlines())
    assert report.written and not report.problems, report.problems


@pytest.fixture
def carol(story):
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    carol = User.objects.create_user("carol")
    carol.groups.add(team)
    return carol


def product_tokens() -> dict[str, list[str]]:
    """Each stored row's product tokens, by key."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, array(SELECT lexeme FROM unnest(search_markers) WHERE lexeme LIKE '~p%%' ORDER BY lexeme) "
            "FROM search_document"
        )
        return dict(cursor.fetchall())


def expected_tokens() -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, product_id FROM search_document")
        return {key: [f"~p{product_id}"] for key, product_id in cursor.fetchall()}


def test_every_record_carries_its_product_and_a_move_changes_it(story):
    tramline, ledgerly = Product.objects.get(key="PRD-1"), Product.objects.get(key="PRD-2")

    tokens = product_tokens()
    assert tokens == expected_tokens()
    assert tokens["PRD-2"] == [f"~p{ledgerly.pk}"]  # a product's own record is its product's
    assert tokens["BUG-30"] == [f"~p{ledgerly.pk}"]

    Bug.objects.filter(key="BUG-30").update(product=tramline)

    assert product_tokens()["BUG-30"] == [f"~p{tramline.pk}"]


def test_the_migration_gives_stored_rows_their_product_token_and_takes_it_back(story):
    """Rows indexed before migration 0015 have no product token; its UPDATE
    adds each row's from its own product_id, and its reverse removes it."""
    update = import_module("search.migrations.0015_product_tokens").Migration.operations[1]
    with connection.cursor() as cursor:
        cursor.execute(update.reverse_sql)
        assert set(map(tuple, product_tokens().values())) == {()}

        cursor.execute(update.sql)

    assert product_tokens() == expected_tokens()


def explained(cursor, sql: str, params: dict) -> list[dict]:
    """The plan's index scans."""
    cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    return [n for n in nodes(cursor.fetchone()[0][0]["Plan"]) if "Index Name" in n]


def test_carol_s_scope_is_her_products_tokens_in_the_words_index_scan(carol):
    """Whichever index the planner takes to find her matches, its own
    condition keeps only her products' rows: the words' GIN index with her
    products' tokens (as at 10,000 records, bench/timing_bench.py), or a
    product_id B-tree (as on a handful of rows): none hands over Ledgerly's."""
    scope = access_scope(carol)
    tramline = Product.objects.get(key="PRD-1").pk
    matches = f"SELECT d.key FROM search_document d WHERE d.search_vector @@ 'renew'::tsquery AND ({scope.where})"

    assert "d.search_markers @@ %(scope_access_tokens)s::tsquery" in scope.where
    assert scope.params["scope_access_tokens"] == f"'~p{tramline}'"
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: the planner would read them all
        scans = explained(cursor, matches, scope.params)
        for scan in scans:
            condition = scan.get("Index Cond", "")
            assert (
                "search_markers @@" in condition
                if scan["Index Name"] == "search_document_fts"
                else ("product_id = ANY" in condition)
            ), scan
        # Without the B-trees (rolled back with the test), the words' index answers both.
        cursor.execute("DROP INDEX search_document_product, search_document_product_time")
        scans = explained(cursor, matches, scope.params)

    assert [scan["Index Name"] for scan in scans] == ["search_document_fts"]
    assert "search_vector @@" in scans[0]["Index Cond"] and "search_markers @@" in scans[0]["Index Cond"]


def test_who_sees_everything_gets_no_condition_and_who_sees_nothing_matches_no_token(story):
    alice = seeing_all_products(User.objects.create_user("alice"))
    nobody = User.objects.create_user("nobody")

    assert access_scope(alice).where == "TRUE"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM search_document WHERE search_markers @@ %s::tsquery", [products_tsquery([])]
        )
        assert cursor.fetchone()[0] == 0
    assert service.call("search", {"query": "renewal", "mode": "keyword"}, nobody)["results"] == []


def test_every_statement_of_carol_s_search_that_reads_a_word_s_matches_asks_for_her_products(carol):
    """Her statistics (document frequencies: sampled, then counted) and every
    arm, count and facet: none reads the matches of Ledgerly's records."""
    tokens = products_tsquery([Product.objects.get(key="PRD-1").pk])

    for query in ("renewal", "invoice reminder", "renewa", "nothingmatchesthis"):
        with CaptureQueriesContext(connection) as statements:
            service.call("search", {"query": query, "mode": "keyword", "include_facets": "true"}, carol)
        reading = [
            s["sql"]
            for s in statements.captured_queries
            if "search_vector @@" in s["sql"] and "search_document" in s["sql"] and "d.id = " not in s["sql"]
        ]
        assert reading, query
        for sql in reading:
            assert tokens.replace("'", "''") in sql or tokens in sql, sql
