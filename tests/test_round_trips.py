"""Round trips: the statements one search sends, counted, so that a new one
is a decision and not an accident. Each list says what every statement is
for; a change that adds one must add it here, with its reason.

The story: Tramline's season pass renewal (conftest.py) and Ledgerly's VAT
bug, every record embedded. Dana searches "renewal payment": no record holds
both words, so the keyword arm ranks the AND and then relaxes it to OR.
A corpus this small is counted on every search (no cached statistics or
index health: those start at 10,000 and 2,000 records).
"""

import pytest

from backlog.imports import import_records
from search import service
from search.indexing.vectors import embed_pending

from .conftest import TRAMLINE, VAT_BUG, jsonl

pytestmark = pytest.mark.django_db

QUERY = "renewal payment"


@pytest.fixture
def embedded_story():
    report = import_records(jsonl(*TRAMLINE, VAT_BUG).splitlines())
    assert report.written and not report.problems, report.problems
    assert embed_pending() == 7


def test_a_keyword_search_sends_six_statements(embedded_story, django_assert_num_queries):
    # 1. the query's words as tsqueries (search.query.parse: PostgreSQL's own stemming)
    # 2. N and the common words' frequencies (statistics.corpus: pg_class, count(*), pg_stats)
    # 3. the document frequencies of the other words (statistics.document_frequencies)
    # 4. the keyword arm: every word (AND), ranked, counted and faceted (keyword.rank)
    # 5. the keyword arm again: any word (OR), as the AND found too few
    # 6. the page's rows and which words each holds (snippets.page_documents)
    # No index health: a keyword search that does not show it never counts it.
    with django_assert_num_queries(6):
        response = service.call("search", {"query": QUERY, "mode": "keyword"})
    assert response.get("index") is None and response["results"]


def test_a_hybrid_search_sends_twelve_statements_and_two_savepoints(embedded_story, django_assert_num_queries):
    # 1. the query's words as tsqueries
    # 2. index health: documents, current vectors and the worker's row (health.index_health):
    #    the semantic arm runs only if some record has a vector
    # 3-6. statistics, document frequencies, keyword arm AND, then OR (as in keyword mode)
    # 7. which of the query's words the keyword arm's best record holds (keyword.coverage: arm weights)
    # 8-11. the semantic arm, in a transaction of its own (a savepoint here):
    #    SAVEPOINT; SET LOCAL hnsw.iterative_scan and hnsw.ef_search (one statement); nearest; RELEASE
    # 12-15. pseudo-relevance feedback: the semantic arm again, the same four
    # 16. the page's rows
    with django_assert_num_queries(16):
        response = service.call("search", {"query": QUERY, "mode": "hybrid"})
    assert response["mode"] == "hybrid" and response.get("index") is None and response["results"]


def test_a_full_detail_search_adds_three_statements(embedded_story, django_assert_num_queries):
    # 1-16. as the hybrid search (its index health is the one the response shows)
    # 17. the page's record fields, every kind in one UNION ALL (snippets.page_documents)
    # 18. which fields match, and the best one's headline (snippets.build)
    # 19. the product facet's keys (facets.response)
    with django_assert_num_queries(19):
        response = service.call("search", {"query": QUERY, "mode": "hybrid", "detail": "full"})
    assert response["index"]["embedded"] == 7 and response["facets"]["product"]
    assert all(hit["snippet"] for hit in response["results"])
