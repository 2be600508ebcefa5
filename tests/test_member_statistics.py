"""A team member's word statistics: counted over their own products' records only,
and read as cheaply as the column statistics are for those who see every product.

Dana is on the Tramline team; Ledgerly is hidden from her. exact_limit is 5, so
"renewal", in all 40 of Tramline's bugs (and 60 of Ledgerly's), is a common word:
its df is estimated from a sample of her records (search.ranking.counting), the
rare ones counted. In a corpus large enough for its statistics to be kept, and
within statistics.kept(), the sample's words are read once for all of her queries
(counting.sample_words); a term is sampled only when they say it may be common.
"""

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backlog.imports import import_records
from backlog.models import Product
from search.ranking import counting, statistics

from .conftest import jsonl

pytestmark = pytest.mark.django_db


def bugs(product: str, count: int, title: str) -> list[dict]:
    return [
        {"kind": "bug", "key": f"{product}-B{i}", "product": product, "title": f"{title} zq{product[-1]}x{i}"}
        for i in range(count)
    ]


@pytest.fixture
def tramline(db, settings):
    settings.SEARCH_RANKING = {"exact_limit": 5}
    products = [
        {"kind": "product", "key": "PRD-1", "name": "Tramline"},
        {"kind": "product", "key": "PRD-2", "name": "Ledgerly"},
    ]
    lines = [*products, *bugs("PRD-1", 40, "Renewal payment sheet closes"), *bugs("PRD-2", 60, "Renewal invoice")]
    report = import_records(jsonl(*lines).splitlines())
    assert report.written and not report.problems, report.problems
    counting._words.clear()
    return [Product.objects.get(key="PRD-1").pk]


@pytest.fixture
def dana(tramline):
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    dana = User.objects.create_user("dana")
    dana.groups.add(team)
    return dana


def samples(statements) -> list[str]:
    return [s["sql"] for s in statements.captured_queries if "search_markers @@" in s["sql"]]


def test_a_common_word_s_df_is_her_records_as_the_sample_counts_them_and_a_rare_one_is_counted(tramline):
    n, df = statistics.document_frequencies(["'renew'", "'payment'", "'zq1x3'", "'invoic'"], tramline)

    assert n == 41  # her records: the product and its 40 bugs
    # Her 40, not the 100 with Ledgerly's; what the sample statement itself says (every bucket: N is small).
    assert df["'renew'"] == counting.sampled(["'renew'"], tramline, n)["'renew'"] == 40
    assert df["'payment'"] == 40
    assert (df["'zq1x3'"], df["'invoic'"]) == (1, 0)  # counted exactly; Ledgerly's invoices are not hers


def test_terms_whose_lexemes_together_may_be_common_are_sampled_and_the_rest_counted(tramline):
    phrase, rare = "'payment' <-> 'sheet'", "'renew' & 'zq1x7'"
    n, df = statistics.document_frequencies([phrase, rare, "'renew':*"], tramline)

    assert (df[phrase], df[rare], df["'renew':*"]) == (40, 1, 40)


def test_once_her_sample_s_words_are_read_a_search_samples_only_what_may_be_common(tramline, monkeypatch):
    monkeypatch.setattr(statistics, "CACHED_FROM", 10)  # her 41 records are a corpus whose statistics are kept
    statistics.document_frequencies(["'renew'"], tramline)  # reads the sample's words
    with CaptureQueriesContext(connection) as statements:
        _, df = statistics.document_frequencies(["'payment'", "'close'", "'zq1x5'"], tramline)

    assert df == {"'payment'": 40, "'close'": 40, "'zq1x5'": 1}
    assert samples(statements) == []  # the common words from the sample's words, the rare one counted


def test_within_kept_each_word_is_counted_once_for_every_query(tramline):
    with statistics.kept():
        first = statistics.document_frequencies(["'renew'", "'zq1x2'"], tramline)
        with CaptureQueriesContext(connection) as statements:
            again = statistics.document_frequencies(["'zq1x2'", "'renew'"], tramline)

    assert again == first
    assert statements.captured_queries == []
    with CaptureQueriesContext(connection) as statements:
        statistics.document_frequencies(["'zq1x2'"], tramline)
    assert statements.captured_queries  # outside, counted again


def test_dana_s_search_of_a_common_word_ranks_only_her_records(dana):
    from search import service

    answer = service.call("search", {"query": "renewal payment", "mode": "keyword"}, dana)

    assert answer["total"] == 40
    assert {hit["key"].split("-B")[0] for hit in answer["results"]} == {"PRD-1"}


def test_her_newest_months_come_from_her_own_records_tokens(tramline, monkeypatch):
    """recent_months, which picks the months a broad match set is ranked from, reads her sample's
    month tokens (search_markers) as one who sees all reads the column statistics': not None for her."""
    monkeypatch.setattr(statistics, "CACHED_FROM", 10)
    from django.utils import timezone

    month, share = statistics.recent_months(0.2, tramline)

    assert month == timezone.now().strftime("%Y%m") and share == 1.0  # every record of hers was written now
    words = counting.sample_words(tramline, 41, keep=False)
    assert words[statistics.MONTH_PREFIX + month] == 41  # the product and its 40 bugs; Ledgerly's 61 not counted


@pytest.mark.django_db(transaction=True)
def test_stale_statistics_answer_at_once_and_are_read_again_behind_the_search(monkeypatch, settings):
    """From CACHED_FROM records the statistics are kept for CACHE_SECONDS; the search that
    finds them older answers with them as they are, and a thread of its own reads them
    again (search.ranking.behind): no search waits the 230 ms a sample's words take."""
    import time

    from search.ranking import behind

    settings.SEARCH_RANKING = {"exact_limit": 5}  # every word of the sample is a common one
    monkeypatch.setattr(statistics, "CACHED_FROM", 10)
    products = [{"kind": "product", "key": "PRD-1", "name": "Tramline"}]
    assert import_records(jsonl(*products, *bugs("PRD-1", 20, "Renewal payment sheet closes")).splitlines()).written
    statistics._stats_cache.clear()
    try:
        n, freq = statistics.corpus()
        assert n == 21 and freq["renew"] == 20 / 21 and "invoic" not in freq  # the product is a record too
        more = [{**bug, "key": f"PRD-1-N{i}"} for i, bug in enumerate(bugs("PRD-1", 10, "Invoice total wrong"))]
        assert import_records(jsonl(*more).splitlines()).written
        statistics._stats_cache[connection.alias]["at"] -= counting.CACHE_SECONDS  # stale

        with CaptureQueriesContext(connection) as statements:
            stale = statistics.corpus()
        deadline = time.monotonic() + 10
        while behind.running() and time.monotonic() < deadline:
            time.sleep(0.01)
        fresh = statistics.corpus()
    finally:
        statistics._stats_cache.clear()

    assert stale == (n, freq) and not statements.captured_queries  # answered at once, as kept
    assert fresh[0] == 31 and fresh[1]["renew"] == 20 / 31 and fresh[1]["invoic"] == 10 / 31


@pytest.mark.django_db(transaction=True)
def test_statistics_too_old_to_answer_with_are_read_by_the_search_itself(monkeypatch, settings):
    """A refresh that hangs (a server gone silent) leaves the figures growing older: past
    STALE_AT_MOST the next search reads them itself, as it does the first time."""
    from search.ranking import behind

    settings.SEARCH_RANKING = {"exact_limit": 5}
    monkeypatch.setattr(statistics, "CACHED_FROM", 10)
    products = [{"kind": "product", "key": "PRD-1", "name": "Tramline"}]
    assert import_records(jsonl(*products, *bugs("PRD-1", 20, "Renewal payment sheet closes")).splitlines()).written
    statistics._stats_cache.clear()
    try:
        assert statistics.corpus()[0] == 21
        more = [{**bug, "key": f"PRD-1-N{i}"} for i, bug in enumerate(bugs("PRD-1", 10, "Invoice total wrong"))]
        assert import_records(jsonl(*more).splitlines()).written
        statistics._stats_cache[connection.alias]["at"] -= behind.STALE_AT_MOST

        with CaptureQueriesContext(connection) as statements:
            n, freq = statistics.corpus()
    finally:
        statistics._stats_cache.clear()

    assert statements.captured_queries and not behind.running()  # read here, nothing behind
    assert n == 31 and freq["invoic"] == 10 / 31
