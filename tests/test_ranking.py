"""Hybrid's second looks: pseudo-relevance feedback and the reranker slot."""

import json
import logging
from http.server import ThreadingHTTPServer

import numpy as np
import pytest

from backlog.imports import import_records
from search.contract import SearchRequest
from search.indexing.embeddings import get_provider
from search.indexing.vectors import embed_pending
from search.operations.search import search

from .conftest import JSONHandler, jsonl, serving
from .test_search import CORPUS, bug, t


@pytest.fixture
def embedded(db):
    assert import_records(jsonl(*CORPUS).splitlines()).written
    assert embed_pending() == len(CORPUS)


def run(query, **options):
    return search(SearchRequest(query=query, include_scores=True, **options))


def keys(response) -> list[str]:
    return [hit.key for hit in response.results]


# -- pseudo-relevance feedback ----------------------------------------------------------------


# Ledgerly's invoice PDF, where Kim's bug has a twin: Lee reported the same wrong VAT in other words.
# Neither receipt bug is about the invoice, but both sound more like the query below than Lee's does;
# the four other VAT-table bugs live next to Kim's and far from the query. No record holds every word
# of the query and none but Kim's holds any ("wrong"), so the keyword arm, relaxed to any word, finds
# Kim's alone and meaning ranks the rest.
# All were written the same day: recency weighs them alike and cannot reorder them.
def invoice_bug(key, title, description=""):
    return bug(key, title, product="PRD-2", description=description, day=12, updated_at=t(12))


KIMS, LEES = "BUG-31", "BUG-32"
SOUND_ALIKES = ["BUG-33", "BUG-34"]
INVOICE_PDF = [
    {"kind": "product", "key": "PRD-2", "name": "Ledgerly", "description": "Invoicing for small firms"},
    invoice_bug(KIMS, "Invoice PDF has the wrong VAT total", "VAT is 19% instead of 20%"),
    invoice_bug(LEES, "VAT total on the exported invoice is 19% instead of 20%"),
    invoice_bug("BUG-33", "Receipt displays an incorrect duty amount"),
    invoice_bug("BUG-34", "Receipt displays incorrect tax"),
    invoice_bug("BUG-35", "Invoice PDF page numbers overlap the VAT table"),
    invoice_bug("BUG-36", "VAT registration number missing from the invoice PDF footer"),
    invoice_bug("BUG-37", "Invoice PDF prints the VAT column header in English only"),
    invoice_bug("BUG-38", "VAT table on the invoice PDF is cut off at the page edge"),
]


@pytest.fixture
def invoice_pdf(db):
    assert import_records(jsonl(*INVOICE_PDF).splitlines()).written
    assert embed_pending() == len(INVOICE_PDF)


def test_feedback_finds_the_twin_of_the_record_a_paraphrase_found_first(invoice_pdf, settings):
    """Feedback searches again from the query's vector moved toward the first fusion's best record,
    Kim's bug (the one keyword match). Lee's is by far the nearest record to Kim's, so that second
    list ranks it second; the receipts, which only sound like the query, fall under all four of
    Kim's neighbours there. Fused as a third list, it lifts Lee's bug from under the receipts to
    right under Kim's. Without feedback the query's own vector ranks both receipts above Lee's."""
    query = "my bill shows the wrong sales levy"
    with_feedback = run(query, entities=["bug"])
    settings.SEARCH_RANKING = {"feedback_docs": 0}
    without = keys(run(query, entities=["bug"]))
    assert keys(with_feedback)[:2] == [KIMS, LEES]
    assert without[0] == KIMS and without.index(LEES) > max(map(without.index, SOUND_ALIKES))
    twin = with_feedback.results[1].scores
    assert twin.keyword_rank is None and twin.feedback_rank == 2  # meaning alone, and the second list's


# -- the reranker slot ------------------------------------------------------------------------


class RerankServer(ThreadingHTTPServer):
    """A Cohere-style /rerank on 127.0.0.1 that scores each document by the
    local model's cosine to the query, reversed when `reverse`: a reranker
    whose order differs from the fusion's. `mode` "backwards" puts the
    documents in the reverse of the order sent (the fusion's best last);
    "500" or "garbage" fails."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), RerankHandler)
        self.mode, self.reverse, self.requests = "ok", True, []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class RerankHandler(JSONHandler):
    server: RerankServer

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.server.mode == "500":
            return self.reply(500, b'{"error": "overloaded"}')
        if self.server.mode == "garbage":
            return self.reply(200, b"<html>sign in</html>")
        if self.server.mode == "backwards":
            scores = np.arange(len(body["documents"]), dtype=float)
        else:
            provider = get_provider()
            query = provider.embed_query(body["query"])
            documents = provider.embed_documents(body["documents"])
            scores = documents @ query * (-1 if self.server.reverse else 1)
        results = [{"index": i, "relevance_score": float(s)} for i, s in enumerate(scores)]
        self.reply(200, json.dumps({"results": sorted(results, key=lambda r: -r["relevance_score"])}).encode())


@pytest.fixture
def reranker(settings, monkeypatch):
    with serving(RerankServer(), monkeypatch) as server:
        settings.SEARCH_RERANKER = "hosted"
        settings.SEARCH_RERANK_API_URL = server.url
        settings.SEARCH_RERANK_API_KEY = "sk-test"
        settings.SEARCH_RANKING = {"rerank_depth": 4}
        yield server


def test_the_reranker_orders_the_fused_top_and_shows_its_scores(embedded, settings, reranker):
    settings.SEARCH_RERANKER = ""
    fused = keys(run("renewal spinner", limit=50))
    settings.SEARCH_RERANKER = "hosted"
    response = run("renewal spinner", limit=50)
    request = reranker.requests[-1]
    assert request["path"] == "/v1/rerank" and request["auth"] == "Bearer sk-test"
    assert request["body"]["query"] == "renewal spinner" and len(request["body"]["documents"]) == 4
    reranked = keys(response)
    # The reranker read the fusion's best four and put them in its own order; the rest follow as fused.
    assert set(reranked[:4]) == set(fused[:4]) and reranked[4:] == fused[4:]
    scores = [hit.scores.boosts["rerank"] for hit in response.results[:4]]
    assert scores == sorted(scores, reverse=True)
    assert reranked[:4] != fused[:4]  # this reranker disagrees with the fusion (it reverses meaning)
    assert "rerank" not in response.results[4].scores.boosts


def test_reranked_pages_follow_one_order(embedded, settings, reranker):
    settings.SEARCH_RERANKER = ""
    fused = keys(run("renewal spinner", limit=50))
    settings.SEARCH_RERANKER = "hosted"
    whole = keys(run("renewal spinner", limit=50))
    paged, cursor = [], None
    while True:
        page = run("renewal spinner", limit=2, cursor=cursor)
        paged += keys(page)
        if not (cursor := page.next_cursor):
            break
    assert whole[:4] != fused[:4]  # the reranker's order, not the fusion's
    assert paged == whole


def test_a_key_query_keeps_its_record_first_under_a_reranker(embedded, settings, reranker):
    """The reranker reads the best records but the one the query names by its key. This one puts
    what it reads in reverse: BUG-6, read with them, would fall from first to fourth."""
    reranker.mode = "backwards"
    settings.SEARCH_RERANKER = ""
    fused = keys(run("BUG-6"))
    settings.SEARCH_RERANKER = "hosted"
    reranked = keys(run("BUG-6"))
    assert fused[0] == reranked[0] == "BUG-6"
    assert reranked[1:5] == fused[1:5][::-1]  # the next four, as the reranker put them


@pytest.mark.parametrize("mode", ["500", "garbage"])
def test_a_failing_reranker_leaves_the_fused_order_and_says_so_in_the_log(embedded, settings, reranker, mode, caplog):
    settings.SEARCH_RERANKER = ""
    fused = keys(run("renewal spinner", limit=50))
    settings.SEARCH_RERANKER = "hosted"
    reranker.mode = mode
    with caplog.at_level(logging.WARNING, logger="search.ranking.rerank"):
        assert keys(run("renewal spinner", limit=50)) == fused
    assert "Reranking skipped" in caplog.text and "sk-test" not in caplog.text


def test_an_unknown_reranker_setting_is_logged_not_a_failed_search(embedded, settings, caplog):
    settings.SEARCH_RERANKER = "bogus"
    with caplog.at_level(logging.WARNING, logger="search.ranking.rerank"):
        assert keys(run("renewal spinner"))
    assert "SEARCH_RERANKER must be empty (off) or 'hosted'" in caplog.text


def test_the_feedback_vector_is_the_normalised_sum(embedded, settings):
    """q + weight x mean(top) normalised: checked against numpy on the stored vectors."""
    from django.db import connection

    from search.query.scope import build_scope
    from search.ranking import config, semantic

    request = SearchRequest(query="tax amount wrong")
    scope = build_scope(request, None)
    first = semantic.for_query(request.query, scope, 10, None)
    top = first.ranked[0][0]
    again = semantic.feedback(first, [top], scope, 10, None)
    with connection.cursor() as cursor:
        cursor.execute("SELECT embedding::text FROM search_document WHERE id = %s", [top])
        stored = np.asarray(json.loads(cursor.fetchone()[0]))
    expected = first.vector + config.current().feedback_weight * stored
    expected /= np.linalg.norm(expected)
    assert dict(again.ranked)[top] == pytest.approx(float(expected @ stored), abs=2e-3)


def test_total_and_facets_count_every_record_the_feedback_list_adds(embedded, settings):
    # Short lists, so the second pass brings records the first did not.
    settings.SEARCH_RANKING = {"semantic_depth": 3, "feedback_docs": 0}
    first = run("my bill shows the wrong sales levy", limit=100)
    settings.SEARCH_RANKING = {"semantic_depth": 3, "feedback_docs": 1}
    response = run("my bill shows the wrong sales levy", limit=100, include_facets=True)
    added = [hit for hit in response.results if hit.scores.feedback_rank and not hit.scores.semantic_rank]
    assert added and not any(hit.scores.keyword_rank for hit in added)  # only the feedback list has them
    assert response.total == len(response.results) > first.total
    by_kind = {count.value: count.count for count in response.facets.kind}
    assert sum(by_kind.values()) == response.total
    for kind in {hit.kind for hit in response.results}:
        assert by_kind[kind] == sum(hit.kind == kind for hit in response.results)


def test_similar_puts_the_same_title_under_a_tag_first(embedded, settings):
    """A tester's "[iOS]" in front of a title does not make it another title. BUG-41 tells BUG-1's
    story in BUG-1's own words under a reworded title, so by text it is the closest record in both
    lists; BUG-40 is BUG-1's title alone, behind tags. The same-title boost puts BUG-40 first;
    without the boost BUG-41 stays first."""
    from search.contract import SimilarRequest
    from search.operations.similar import similar

    same_story = {
        "actual_result": "Tapping Renew shows a spinner forever",
        "expected_result": "The payment sheet opens",
        "environment": "Pixel 7, Android 14",
    }
    tagged = bug("BUG-40", "[iOS] [6.2] Renewal fails with a saved card", day=5)
    reworded = bug("BUG-41", "Renewing with a stored card spins forever", raw=same_story, day=5)
    assert import_records(jsonl(tagged, reworded).splitlines()).written
    embed_pending()

    response = similar(SimilarRequest(key="BUG-1", include_scores=True))
    settings.SEARCH_RANKING = {"title_boost": 0}
    unboosted = similar(SimilarRequest(key="BUG-1"))

    assert keys(response)[:2] == ["BUG-40", "BUG-41"]
    assert keys(unboosted)[0] == "BUG-41"
    assert not any("exact_title" in hit.scores.boosts for hit in response.results[1:])


def test_similar_does_not_match_reports_by_their_user_agent(db):
    """Bugzilla's form opens every report with the reporter's user agent and build id. Two reports
    filed from the same browser share those words and nothing else; the more-like-this query reads
    a report without them (as the embedded text does), so the keyword arm does not list the other
    report, while a report that shares the bug's own words is listed."""
    from search.contract import SimilarRequest
    from search.operations.similar import similar

    agent = "User Agent: Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:121.0) Gecko/20100101 Firefox/121.0"
    opening = f"{agent}\nBuild ID: 20231219181341\n\n"
    reports = [
        CORPUS[0],
        bug("BUG-50", "Bookmarks toolbar flickers", description=opening + "Drag a bookmark onto the toolbar."),
        bug("BUG-51", "Printing a PDF drops its fonts", description=opening + "Print any PDF with embedded fonts."),
        bug("BUG-52", "Toolbar flickers while dragging a bookmark", description="Dragging bookmarks flickers."),
        bug("BUG-53", "Sync loses passwords", description=opening + "Sign in on a second machine."),
    ]
    assert import_records(jsonl(*reports).splitlines()).written

    found = keys(similar(SimilarRequest(key="BUG-50", mode="keyword")))

    assert found == ["BUG-52"]
