"""The lexical index is kept fresh by PostgreSQL on every write path, in the
same transaction as the write."""

import pytest
from django.db import connection, transaction

from backlog.imports import import_records
from backlog.models import Bug, Feature, Product, QATest
from search.models import Document

from .conftest import jsonl

pytestmark = pytest.mark.django_db


def matches(word: str) -> list[str]:
    """Keys whose search vector matches `word`, via the GIN index."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key FROM search_document WHERE search_vector @@ plainto_tsquery('english', %s) ORDER BY key",
            [word],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def product():
    return Product.objects.create(key="PRD-1", name="Tramline Mobile", description="Ticketing for city transit")


def test_every_kind_is_indexed_with_its_fields(product):
    feature = Feature.objects.create(
        key="FEAT-1", product=product, name="Season pass renewal", acceptance_criteria="The payment sheet opens"
    )
    QATest.objects.create(
        key="TEST-1",
        product=product,
        feature=feature,
        title="Renew with a saved card",
        steps=["Open Passes", "Tap Renew"],
    )
    Bug.objects.create(
        key="BUG-1",
        product=product,
        feature=feature,
        title="Spinner forever",
        raw_data={"actual_result": "Nothing happens", "environment": "Pixel 7"},
    )

    assert matches("ticketing") == ["PRD-1"]
    assert matches("payment sheet") == ["FEAT-1"]
    assert matches("tap") == ["TEST-1"]  # from the steps
    assert matches("pixel") == ["BUG-1"]  # environment, from raw_data
    assert matches("renewal") == ["FEAT-1", "TEST-1"]  # stemmed: renew
    bug = Document.objects.get(key="BUG-1")
    assert (bug.kind, bug.product_id, bug.feature_id, bug.status) == ("bug", product.id, feature.id, "open")


def test_weights_title_above_body_above_environment(product):
    Bug.objects.create(key="BUG-1", product=product, title="Android crash", raw_data={})
    Bug.objects.create(key="BUG-2", product=product, title="Crash", description="Seen on android only")
    Bug.objects.create(key="BUG-3", product=product, title="Crash", raw_data={"environment": "Android 14"})

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key FROM search_document WHERE search_vector @@ to_tsquery('english', 'android') "
            "ORDER BY ts_rank(search_vector, to_tsquery('english', 'android')) DESC"
        )
        assert [row[0] for row in cursor.fetchall()] == ["BUG-1", "BUG-2", "BUG-3"]


def test_model_save_updates_the_index(product):
    bug = Bug.objects.create(key="BUG-1", product=product, title="Spinner forever")
    bug.title = "Payment sheet is blank"
    bug.save()

    assert matches("spinner") == []
    assert matches("blank") == ["BUG-1"]


def test_bulk_create(product):
    Bug.objects.bulk_create([Bug(key=f"BUG-{n}", product=product, title=f"Checkout fails {n}") for n in range(3)])

    assert matches("checkout") == ["BUG-0", "BUG-1", "BUG-2"]


def test_queryset_update(product):
    Bug.objects.create(key="BUG-1", product=product, title="t", raw_data={"actual_result": "old"})

    Bug.objects.filter(key="BUG-1").update(raw_data={"actual_result": "Voucher rejected"}, status="fixed")

    assert matches("voucher") == ["BUG-1"]
    assert Document.objects.get(key="BUG-1").status == "fixed"


def test_raw_sql(product):
    Bug.objects.create(key="BUG-1", product=product, title="t")

    with connection.cursor() as cursor:
        cursor.execute("UPDATE backlog_bug SET description = 'Refund lands twice' WHERE key = 'BUG-1'")

    assert matches("refund") == ["BUG-1"]


def test_import(product):
    record = {"kind": "bug", "key": "BUG-1", "product": "PRD-1", "title": "Invoice total off by a cent"}
    import_records(jsonl(record).splitlines())
    assert matches("invoice") == ["BUG-1"]

    import_records(jsonl(dict(record, title="Rounding error in VAT")).splitlines())

    assert matches("invoice") == []
    assert matches("vat") == ["BUG-1"]


def test_delete_and_truncate(product):
    Bug.objects.create(key="BUG-1", product=product, title="Crash")
    QATest.objects.create(key="TEST-1", product=product, title="Crash test")

    Bug.objects.filter(key="BUG-1").delete()
    assert matches("crash") == ["TEST-1"]

    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's transaction holds deferred FK checks
        cursor.execute("TRUNCATE backlog_test CASCADE")
    assert matches("crash") == []


def test_the_index_changes_in_the_same_transaction(product):
    with pytest.raises(RuntimeError), transaction.atomic():
        Bug.objects.create(key="BUG-1", product=product, title="Rolled back")
        assert matches("rolled") == ["BUG-1"]  # visible inside the transaction
        raise RuntimeError

    assert matches("rolled") == []
    assert not Document.objects.filter(key="BUG-1").exists()


def test_a_key_is_unique_across_kinds_in_the_database(product):
    Feature.objects.create(key="DUP-1", product=product, name="Feature")

    with pytest.raises(Exception, match="search_document_key"), transaction.atomic():
        Bug.objects.create(key="DUP-1", product=product, title="Bug")


def test_content_hash_changes_with_the_text_only(product):
    bug = Bug.objects.create(key="BUG-1", product=product, title="Crash", raw_data={"actual_result": "Closes"})
    before = Document.objects.get(key="BUG-1").content_hash

    Bug.objects.filter(pk=bug.pk).update(status="fixed")
    unchanged = Document.objects.get(key="BUG-1").content_hash
    Bug.objects.filter(pk=bug.pk).update(raw_data={"actual_result": "Freezes"})
    changed = Document.objects.get(key="BUG-1").content_hash

    assert before == unchanged != changed


def test_the_search_vector_and_short_columns_stay_in_the_row(product):
    """A long record with an embedding passes PostgreSQL's TOAST threshold:
    the body and the embedding go out of line; the tsvector (migration 0006),
    the title, key, hashes and markers (0009) stay in the row, so ranking a
    candidate never reads the TOAST table."""
    import random

    from search.models import EMBEDDING_DIMENSIONS

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8)) for _ in range(300)]
    title = "A long report whose title is long enough to be worth moving out of line, " * 2
    Bug.objects.create(key="BUG-1", product=product, title=title, description=" ".join(words))
    Document.objects.filter(key="BUG-1").update(
        embedding=[rng.random() for _ in range(EMBEDDING_DIMENSIONS)], embedding_model="m" * 40
    )

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_toast_chunk_id(body) IS NOT NULL, pg_column_toast_chunk_id(embedding) IS NOT NULL, "
            "ARRAY[pg_column_toast_chunk_id(search_vector), pg_column_toast_chunk_id(title), "
            "pg_column_toast_chunk_id(key), pg_column_toast_chunk_id(content_hash), "
            "pg_column_toast_chunk_id(embedding_model), pg_column_toast_chunk_id(search_markers)] "
            "FROM search_document WHERE key = 'BUG-1'"
        )
        body_out, embedding_out, kept = cursor.fetchone()

    assert (body_out, embedding_out) == (True, True)  # the row was over the threshold
    assert kept == [None] * 6


def filter_tokens(key: str) -> list[str]:
    """The record's kind, status and severity tokens in search_markers (search.indexing.sql.FILTER_PREFIXES)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT array(SELECT lexeme FROM unnest(search_markers) WHERE lexeme ~ '^~[ktv]' ORDER BY lexeme) "
            "FROM search_document WHERE key = %s",
            [key],
        )
        return cursor.fetchone()[0]


def test_kind_status_and_severity_are_tokens_that_follow_every_change(product):
    feature = Feature.objects.create(key="FEAT-1", product=product, name="Season pass renewal")
    QATest.objects.create(key="TEST-1", product=product, feature=feature, title="Renew", status="draft")
    Bug.objects.create(key="BUG-1", product=product, title="Spinner forever", severity="high")

    assert filter_tokens("PRD-1") == ["~kproduct"]
    assert filter_tokens("FEAT-1") == ["~kfeature"]
    assert filter_tokens("TEST-1") == ["~ktest", "~tdraft"]
    assert filter_tokens("BUG-1") == ["~kbug", "~topen", "~vhigh"]

    Bug.objects.filter(key="BUG-1").update(status="fixed", severity="critical")

    assert filter_tokens("BUG-1") == ["~kbug", "~tfixed", "~vcritical"]


def test_a_filter_on_kind_status_and_severity_is_a_condition_on_the_words_index(product):
    """The filter tokens live in the GIN index with the words, so a filtered
    match set is narrowed inside that index, not ANDed with a B-tree's."""
    from search.contract import SearchRequest
    from search.query.scope import build_scope

    Bug.objects.create(key="BUG-1", product=product, title="Spinner forever", severity="high")
    scope = build_scope(SearchRequest(query="spinner", entities=["bug"], severity=["high", "critical"]), None)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN (FORMAT JSON) SELECT d.key FROM search_document d "
            f"WHERE d.search_vector @@ 'spinner'::tsquery AND ({scope.where})",
            scope.params,
        )
        plan = cursor.fetchone()[0][0]["Plan"]
        cursor.execute(f"SELECT d.key FROM search_document d WHERE ({scope.where})", scope.params)
        kept = [row[0] for row in cursor.fetchall()]

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    conditions = [n.get("Index Cond", "") for n in nodes(plan) if n.get("Index Name") == "search_document_fts"]
    assert any("search_vector @@" in c and "search_markers @@" in c for c in conditions), plan
    assert kept == ["BUG-1"]
