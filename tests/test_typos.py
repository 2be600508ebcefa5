"""Typo correction corrects misspellings, not the language (issue 51, item 3).

A word no record holds is not a typo because this corpus lacks it: "checkout",
"logout" or "hover" are words, and were "corrected" into eCheck, logo and over,
whose records then led the answer. A misspelling ("logn", "paymnt") still is
corrected, and the answer says so with a way back: correct=false searches the
words as typed, on every surface (the MCP tool: tests/test_mcp.py).
"""

import pytest
from django.test import Client

from backlog.imports import import_records
from search.ranking import typos

from .conftest import jsonl
from .test_search import bug, keys, run

# Every title says "timeout", so that "<word> timeout" finds plenty and the word is corrected from
# the titles it found, as in the demo: each is the word a common word below was mangled into.
TITLES = [
    "eCheck-in timeout at the gate kiosk",  # checkout, checkbox -> echeck
    "Logo upload timeout in the admin",  # logout -> logo
    "Sign in with Apple hits a timeout on iPad",  # signup -> sign
    "Subscribe request timeout on the fares page",  # unsubscribe -> subscribe
    "Tooltip stays over the map after a timeout",  # hover -> over
    "Check the seat map timeout before paying",
    "Login screen freezes after the timeout",
    "Long press timeout on a ticket",
    "Payment timeout when the card needs 3-D Secure",
]
# Common words of software the corpus above lacks, each once mangled into a word it has.
COMMON_WORDS = ["checkout", "checkbox", "logout", "signup", "unsubscribe", "hover"]


@pytest.fixture
def backlog(db):
    records = [{"kind": "product", "key": "PRD-1", "name": "Tramline"}]
    titles = (bug(f"BUG-{i}", title) for i, title in enumerate(TITLES, 1))
    assert import_records(jsonl(*records, *titles).splitlines()).written


def test_a_word_of_the_language_is_no_typo_though_no_record_holds_it():
    assert all(typos.is_word(word) for word in COMMON_WORDS + ["dropdown", "takeaway", "shortfall"])
    assert not any(typos.is_word(word) for word in ["logn", "paymnt", "andriod", "orignal", "serch", "crsh"])


@pytest.mark.parametrize("word", COMMON_WORDS)
def test_common_words_the_corpus_lacks_are_searched_as_typed(backlog, word):
    response = run(f"{word} timeout", mode="keyword")

    assert response.corrected_query is None
    # No record holds both words, so any may match: every timeout, not the one the mangled word is in.
    assert response.total == len(TITLES) and response.relaxed.matched_all == 0


def test_the_checkout_question_leads_with_no_echeck_bug(backlog):
    response = run("has the checkout timeout been reported?", mode="keyword")

    assert response.corrected_query is None
    assert response.total == len(TITLES) and keys(response)[0] != "BUG-1"  # eCheck-in is not put first


def test_a_misspelling_is_still_corrected_to_the_closest_word(backlog):
    response = run("logn screen timeout", mode="keyword")

    assert response.corrected_query == "login screen timeout"  # not "long"
    assert keys(response)[0] == "BUG-7"  # the one title with all three words


def test_correct_false_searches_the_words_as_typed(backlog):
    response = run("logn screen timeout", mode="keyword", correct=False)

    assert response.corrected_query is None
    assert "BUG-7" in keys(response)  # "screen" and "timeout" still find it, relaxed to any word
    assert response.relaxed is not None and response.relaxed.matched_all == 0


def test_rest_takes_correct_false_and_the_page_offers_it(backlog, admin_user):
    client = Client()
    client.force_login(admin_user)
    corrected = client.get("/api/search", {"query": "logn screen", "mode": "keyword"}).json()
    as_typed = client.get("/api/search", {"query": "logn screen", "mode": "keyword", "correct": "false"}).json()
    assert corrected["corrected_query"] == "login screen" and "corrected_query" not in as_typed

    page = client.get("/search/", {"query": "logn screen", "mode": "keyword"}).content.decode()
    assert "Showing results for <strong>login screen</strong>" in page
    assert 'Search instead for <a href="?query=logn+screen&amp;mode=keyword&amp;correct=false">logn screen</a>' in page
