"""The search budget (search.ratelimit): SEARCH_RATE_LIMIT per user, REST,
MCP and import together, counted on the real database.

The story: Bob reads through an agent that searches a lot. Alice curates,
and imports files through the REST API. The limit's clock stands where each
test puts it, at T0 (the start of a minute) plus `clock.at` seconds; the
counts are real rows of search_ratecount.
"""

import json
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backlog.models import Bug
from search import ratelimit
from search.models import RateCount
from search.ratelimit import RateLimited

T0 = 1_800_000_000  # 2027-01-15 08:00:00 UTC: a minute starts here


@pytest.fixture
def clock(monkeypatch):
    """The rate limit's clock, at T0 + `clock.at` seconds."""

    class Clock:
        at = 0.0

        def __call__(self):
            return T0 + self.at

    monkeypatch.setattr(ratelimit, "clock", Clock())
    return ratelimit.clock


def counts(user) -> dict[int, int]:
    """The user's counted searches by window, as seconds after T0."""
    rows = RateCount.objects.filter(user_id=user.pk)
    return {round(row.window_start.timestamp()) - T0: row.count for row in rows}


def allowed(user, tries: int) -> int:
    """How many of `tries` searches in a row the budget takes."""
    taken = 0
    for _ in range(tries):
        try:
            ratelimit.charge(user)
            taken += 1
        except RateLimited:
            pass
    return taken


# -- the counter -------------------------------------------------------------------------------


def test_a_search_over_the_limit_is_refused_says_when_to_ask_again_and_counts_nothing(bob, clock, settings):
    settings.SEARCH_RATE_LIMIT = "3/min"
    clock.at = 20

    assert allowed(bob, 3) == 3
    with pytest.raises(RateLimited) as refused:
        ratelimit.charge(bob)

    # The minute ends in 40 s; a millisecond later the previous minute's 3
    # count as 2 (rounded down), which leaves room for one.
    assert str(refused.value) == "Too many searches: 3/min per user (SEARCH_RATE_LIMIT). Try again in 41 s."
    assert (refused.value.status, refused.value.code) == (429, "throttled")
    assert refused.value.headers() == {"Retry-After": "41"}
    assert counts(bob) == {0: 3}  # the refused one is not counted


def test_the_window_slides_so_a_minute_s_edge_never_doubles_the_rate(bob, clock, settings):
    """Bob's agent spends its 10 searches in the last seconds of a minute. A
    fixed window would give it 10 more the moment the next minute starts; the
    sliding estimate still counts the share of those 10 inside the last 60 s."""
    settings.SEARCH_RATE_LIMIT = "10/min"

    clock.at = 55
    assert allowed(bob, 12) == 10
    clock.at = 61  # 59 s of the last 60 were in the previous minute: 10 × 59/60, 9 searches
    assert allowed(bob, 10) == 1
    clock.at = 90  # half of the previous minute is inside: 5, and 1 in this one
    assert allowed(bob, 10) == 4
    clock.at = 150  # half of the previous minute's 5 still inside: 2 (rounded down)
    assert allowed(bob, 10) == 8

    assert counts(bob) == {60: 5, 120: 8}  # minute 0 was swept at 150: no estimate reads it again


def test_retry_after_is_the_first_second_the_search_fits(bob, clock, settings):
    settings.SEARCH_RATE_LIMIT = "10/min"
    clock.at = 30
    allowed(bob, 10)
    clock.at = 75  # 45 s of the previous minute inside: 7 of its 10
    assert allowed(bob, 5) == 3

    with pytest.raises(RateLimited) as refused:
        ratelimit.charge(bob)
    wait = refused.value.retry_after
    clock.at = 75 + wait - 1
    too_early = allowed(bob, 1)
    clock.at = 75 + wait

    assert wait == 4 and f"Try again in {wait} s." in str(refused.value)
    assert too_early == 0 and allowed(bob, 1) == 1


def test_a_charge_larger_than_the_whole_budget_can_never_fit_and_says_so(alice, clock, settings):
    settings.SEARCH_RATE_LIMIT = "10/min"

    with pytest.raises(RateLimited) as refused:
        ratelimit.charge(alice, 11, per="record")

    assert str(refused.value) == (
        "Too many searches: 10/min per user (SEARCH_RATE_LIMIT). This request counts as 11, one per record. "
        "That is more than the whole budget: send at most 10 records a request."
    )
    assert refused.value.headers() == {}  # no Retry-After: waiting would not help
    assert counts(alice) == {}


def test_the_operator_and_a_service_without_a_limit_count_nothing(bob, clock, settings):
    # Other tests' servers (a subprocess commits its own rows) may have left counts: compare, not assume none.
    before = RateCount.objects.count()
    settings.SEARCH_RATE_LIMIT = "off"
    assert allowed(bob, 5) == 5
    settings.SEARCH_RATE_LIMIT = "1/min"
    for _ in range(5):
        ratelimit.charge(None)  # the operator: stdio MCP without --user

    assert counts(bob) == {} and RateCount.objects.count() == before


def test_a_charge_is_one_statement_and_old_windows_are_swept_once_a_window(bob, alice, clock, settings, monkeypatch):
    monkeypatch.setattr(ratelimit, "_swept_before", 0)  # a process that has not swept yet
    settings.SEARCH_RATE_LIMIT = "10/min"
    ratelimit.charge(bob)  # minute 0
    clock.at = 60
    ratelimit.charge(alice)  # minute 1
    clock.at = 120

    with CaptureQueriesContext(connection) as first:
        ratelimit.charge(bob)
    with CaptureQueriesContext(connection) as second:
        ratelimit.charge(bob)

    # The first in a new window: the sweep of this process (windows before the
    # previous one), then the charge. The second: the charge alone.
    assert [q["sql"].split()[0] for q in first] == ["DELETE", "WITH"]
    assert [q["sql"].split()[0] for q in second] == ["WITH"]
    assert counts(bob) == {120: 2}  # minute 0 is gone: no estimate reads it again
    assert counts(alice) == {60: 1}  # the previous minute stays: it is still inside the last 60 s


def test_the_counts_table_is_unlogged_so_a_count_waits_for_no_disk_flush(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT relpersistence FROM pg_class WHERE relname = 'search_ratecount'")
        assert cursor.fetchone() == ("u",)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("limit", "counted", "refused"), [(1000, 400, 0), (300, 300, 100)])
def test_concurrent_searches_are_counted_exactly(bob, clock, settings, limit, counted, refused):
    """Eight agents of Bob's, each on its own connection, search 50 times at
    once: no search is lost or counted twice, and exactly the ones past the
    limit are refused (a read then a write, as the cache throttle did, loses
    counts under this)."""
    settings.SEARCH_RATE_LIMIT = f"{limit}/min"
    clock.at = 30
    start, lock = threading.Barrier(8), threading.Lock()
    refusals = []

    def agent():
        try:
            start.wait()
            for _ in range(50):
                try:
                    ratelimit.charge(bob)
                except RateLimited:
                    with lock:
                        refusals.append(1)
        finally:
            connection.close()

    agents = [threading.Thread(target=agent) for _ in range(8)]
    for thread in agents:
        thread.start()
    for thread in agents:
        thread.join()

    assert counts(bob) == {0: counted}
    assert len(refusals) == refused


# -- REST and MCP: one budget -----------------------------------------------------------------


def test_searches_over_the_rate_limit_are_a_429_for_that_user_only(tramline, reader, curator, clock, settings):
    settings.SEARCH_RATE_LIMIT = "3/min"
    clock.at = 20

    answers = [reader.get("/api/search", {"query": "renewal"}) for _ in range(4)]
    other = curator.get("/api/timeline/BUG-12")

    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    refused = answers[-1]
    assert refused.json() == {
        "error": {
            "code": "throttled",
            "message": "Too many searches: 3/min per user (SEARCH_RATE_LIMIT). Try again in 41 s.",
        }
    }
    assert refused.headers["Retry-After"] == "41"
    assert other.status_code == 200  # another token has its own budget


# answer() closes stale connections first, as every MCP call does: that ends a
# test's own transaction, so this test commits.
@pytest.mark.django_db(transaction=True)
def test_mcp_tools_count_against_the_same_search_budget(tramline, reader, bob, clock, settings):
    from mcp_bridge.server import answer

    settings.SEARCH_RATE_LIMIT = "3/min"
    search = {"query": "renewal", "mode": "keyword"}

    rest = [reader.get("/api/search", search).status_code for _ in range(2)]
    first, failed_first = answer("search", search, lambda: bob)
    refused, failed = answer("search", search, lambda: bob)
    operator, operator_failed = answer("search", search, lambda: None)  # stdio without --user

    assert rest == [200, 200] and not failed_first and first["total"] == 3, first
    assert failed and refused["error"]["code"] == "throttled"
    assert "3/min per user (SEARCH_RATE_LIMIT)" in refused["error"]["message"]
    assert reader.get("/api/search", search).status_code == 429
    assert not operator_failed and operator["total"] == 3


# -- import: one search per record -------------------------------------------------------------


def bugs(prefix: str, n: int) -> str:
    return "".join(
        json.dumps({"kind": "bug", "key": f"{prefix}-{i}", "product": "PRD-1", "title": f"Probe {i}"}) + "\n"
        for i in range(1, n + 1)
    )


def post_import(client, text: str, **params):
    query = "&".join(f"{name}={value}" for name, value in params.items())
    return client.post(f"/api/import?{query}", text, content_type="application/x-ndjson")


def test_an_import_costs_one_search_per_record_dry_run_or_not(tramline, curator, alice, clock, settings):
    settings.SEARCH_RATE_LIMIT = "10/min"
    clock.at = 30

    dry = post_import(curator, bugs("NEW", 4), dry_run="true")
    real = post_import(curator, bugs("NEW", 4))
    search = curator.get("/api/search", {"query": "renewal"})
    over = post_import(curator, bugs("MORE", 2))

    assert dry.status_code == 200 and dry.json()["created"] == {"bug": 4}
    assert real.status_code == 200 and real.json()["written"]
    assert search.status_code == 200  # 4 + 4 + 1 of 10
    assert over.status_code == 429
    assert over.json()["error"] == {
        "code": "throttled",
        "message": "Too many searches: 10/min per user (SEARCH_RATE_LIMIT). This request counts as 2, one per record. "
        "Try again in 31 s.",
    }
    assert over.headers["Retry-After"] == "31"
    assert not Bug.objects.filter(key__startswith="MORE-").exists()
    assert counts(alice) == {0: 9}


def test_a_dry_run_probing_more_keys_than_the_budget_is_refused_before_any_is_looked_up(
    tramline, curator, alice, clock, settings
):
    """A dry run tells which keys are taken, hidden products' included
    (docs/access.md): a thousand keys in one request is a thousand searches."""
    settings.SEARCH_RATE_LIMIT = "600/min"

    with CaptureQueriesContext(connection) as queries:
        probe = post_import(curator, bugs("PROBE", 1000), dry_run="true")

    assert probe.status_code == 429 and "Retry-After" not in probe.headers
    assert probe.json()["error"]["message"].endswith(
        "This request counts as 1000, one per record. That is more than the whole budget: "
        "send at most 600 records a request."
    )
    assert not [q["sql"] for q in queries if "backlog_" in q["sql"]]  # no record table was read
    assert not Bug.objects.filter(key__startswith="PROBE-").exists() and counts(alice) == {}
