"""The access rule inside the index: a search costs the same whatever matches in products the caller cannot see.

Each record's words are stored a second time with its product in front of
each lexeme (search_document.search_scoped: "12~renew"), in a GIN index of
their own. A user who sees only some products matches words there, asking
for their products' lexemes alone (search.query.scope.words_match), so no
statement walks the posting list of a word in another product's records,
and no plan is chosen by how many of them there are.
bench/timing_bench.py measures the time; here are the column, the rewritten
query, the plans, that the answers are exactly those of search_vector, and
that every statement finding rows by their words goes through it.

The people: Carol is on the Tramline team only: Ledgerly (PRD-2) is hidden
from her. Alice sees everything.
"""

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backlog.imports import import_records
from backlog.models import Bug, Product
from search import service
from search.query.scope import access_scope

from .conftest import LEDGERLY_BUG, TRAMLINE, jsonl, seeing_all_products

pytestmark = pytest.mark.django_db


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


def one(sql: str, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def test_every_record_s_words_are_stored_again_under_its_product_and_a_move_changes_them(story):
    tramline, ledgerly = Product.objects.get(key="PRD-1"), Product.objects.get(key="PRD-2")
    scoped = "SELECT search_scoped::text FROM search_document WHERE key = %s"
    words = one("SELECT search_vector::text FROM search_document WHERE key = 'BUG-30'")

    assert one(scoped, ["BUG-30"]) == words.replace("'", f"'{ledgerly.pk}~", 1).replace(" '", f" '{ledgerly.pk}~")
    assert f"'{ledgerly.pk}~ledger':1A" in one(scoped, ["PRD-2"])  # a product's own record is its product's

    Bug.objects.filter(key="BUG-30").update(product=tramline)

    assert one(scoped, ["BUG-30"]) == words.replace("'", f"'{tramline.pk}~", 1).replace(" '", f" '{tramline.pk}~")


def test_a_lexeme_keeps_its_quotes_backslashes_positions_and_weights(db):
    words = r"""'it''s':1A 'c:\\':2,5B 'nopos'"""

    assert one("SELECT search_scoped(3, %s::tsvector)::text", [words]) == r"""'3~c:\\':2,5B '3~it''s':1A '3~nopos'"""


@pytest.mark.parametrize(
    "query, products, rewritten",
    [
        ("'renew' | 'renew':*", [7, 1], "'1~renew' | '7~renew' | '1~renew':* | '7~renew':*"),
        # Phrases, weights and negations stay.
        ("'renew':A <-> 'pass':*B", [1], "'1~renew':A <-> '1~pass':*B"),
        ("'renew' <-> 'pass'", [1, 7], "( '1~renew' | '7~renew' ) <-> ( '1~pass' | '7~pass' )"),
        ("!'it''s' & 'c:\\\\'", [1], "!'1~it''s' & '1~c:\\\\'"),
        # No product: a lexeme no record has.
        ("'renew'", [], "'~'"),
    ],
)
def test_a_query_asks_for_the_lexemes_of_the_user_s_products(db, query, products, rewritten):
    assert one("SELECT search_scoped_query(%s::tsquery, %s::bigint[])::text", [query, products]) == rewritten


def explained(cursor, sql: str, params: dict) -> list[dict]:
    """The plan's index scans."""
    cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    return [n for n in nodes(cursor.fetchone()[0][0]["Plan"]) if "Index Name" in n]


def test_carol_s_words_are_found_in_her_products_lexemes_never_in_everyone_s(carol):
    """Whichever index the planner takes, it is never the one over every
    product's words: the scoped one (as at 10,000 records,
    bench/timing_bench.py), or a product_id B-tree (as on a handful of rows),
    and either reads only Tramline's rows."""
    scope = access_scope(carol)
    matches = f"SELECT d.key FROM search_document d WHERE {scope.words('%(q)s::tsquery')} AND ({scope.where})"
    params = {**scope.params, "q": "renew | renew:*"}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: the planner would read them all
        scans = explained(cursor, matches, params)
        assert "search_document_fts" not in [scan["Index Name"] for scan in scans]
        # Without the B-trees that hold product_id (rolled back with the test), the scoped index answers.
        cursor.execute("DROP INDEX search_document_product, search_document_product_time")
        cursor.execute("ALTER TABLE search_document DROP CONSTRAINT search_document_record_product")
        scans = explained(cursor, matches, params)

    assert [scan["Index Name"] for scan in scans] == ["search_document_scoped"]
    assert "search_scoped @@" in scans[0]["Index Cond"]


@pytest.mark.parametrize(
    "query", ["renew", "renewal button", '"renewal button"', "renewa", "button -android", "invoice", "title:renew"]
)
def test_carol_finds_exactly_what_alice_finds_in_tramline(carol, query):
    """Phrases, prefixes, exclusions and fields are checked on search_vector
    as before: only the products differ."""
    alice = seeing_all_products(User.objects.create_user("alice"))

    def found(user, **extra):
        answer = service.call("search", {"query": query, "mode": "keyword", **extra}, user)
        return [hit["key"] for hit in answer["results"]], answer["total"]

    assert found(carol) == found(alice, products=["PRD-1"])


def test_who_sees_everything_gets_no_condition_and_who_sees_nothing_finds_nothing(story):
    alice = seeing_all_products(User.objects.create_user("alice"))
    nobody = User.objects.create_user("nobody")

    assert access_scope(alice).where == "TRUE"
    assert access_scope(alice).words("%(q)s::tsquery") == "d.search_vector @@ %(q)s::tsquery"
    assert service.call("search", {"query": "renewal", "mode": "keyword"}, nobody)["results"] == []


def test_every_statement_of_carol_s_search_that_finds_rows_by_words_asks_her_products_lexemes(carol):
    """Her statistics (document frequencies: sampled, then counted), every
    arm, count and facet, and the typo probes: none matches search_vector
    with @@, which the index over every product's words would answer. Only
    the page's own rows (d.id = ...) are checked that way."""
    for query in ("renewal", "invoice reminder", "renewa", "nothingmatchesthis"):
        with CaptureQueriesContext(connection) as statements:
            service.call("search", {"query": query, "mode": "keyword", "include_facets": "true"}, carol)
        words = [s["sql"] for s in statements.captured_queries if "search_scoped @@ search_scoped_query(" in s["sql"]]
        everyone = [
            s["sql"]
            for s in statements.captured_queries
            if "search_vector @@" in s["sql"] and "d.id = " not in s["sql"]
        ]

        assert words, query
        assert everyone == [], query


def test_carol_s_typo_probe_never_walks_her_records_in_product_order(carol):
    """A word being typed ("renewa") is tried by its stems, each an EXISTS. Estimating a few matches,
    the planner would walk the product_id B-tree and test each of Carol's records until one held the
    stem: at 100k records, 0.5 to 1.4 s for a stem none holds. The probe runs on bitmap scans only."""
    with CaptureQueriesContext(connection) as statements:
        service.call("search", {"query": "renewa", "mode": "keyword"}, carol)
    sqls = [s["sql"] for s in statements.captured_queries]
    (probe,) = [i for i, sql in enumerate(sqls) if sql.startswith("SELECT ARRAY[EXISTS")]

    with connection.cursor() as cursor:
        for sql in sqls[:probe]:
            if sql.startswith("SET LOCAL"):
                cursor.execute(sql)  # as the search had them when it probed (rolled back with the test)
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sqls[probe]}")
        plan = cursor.fetchone()[0][0]["Plan"]

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    scans = [n["Node Type"] for n in nodes(plan) if n["Node Type"].endswith("Scan")]
    assert scans and all(scan in ("Bitmap Index Scan", "Bitmap Heap Scan") for scan in scans), scans
