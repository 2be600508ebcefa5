"""A request's time on the database (runtime/postgres/deadline.py): what its 503 says.

A request past DATABASE_REQUEST_TIMEOUT while the database answers (its own
work, or a statement too slow for the time left) is told so: `request_timeout`,
naming the setting. "The database is not reachable" is kept for a database
that does not answer (tests/test_recovery.py freezes one).
"""

import pytest
from django.db import OperationalError, connection

from runtime.postgres import deadline
from search import service
from search.contract import unavailable

from .conftest import client_with_token

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_statement_slower_than_the_time_left_is_the_requests_budget_not_an_unreachable_database():
    with pytest.raises(OperationalError) as raised, deadline.within(0.3), connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(3)")
    connection.close()  # as the request's end does with a connection the deadline closed

    error = unavailable(raised.value)
    assert (error.status, error.code) == (503, "request_timeout")
    assert "0.3 s" in str(error) and "DATABASE_REQUEST_TIMEOUT" in str(error) and "not reachable" not in str(error)


def test_a_search_that_outlasts_its_budget_says_so_on_rest(tramline, alice, settings, monkeypatch):
    settings.DATABASE_REQUEST_TIMEOUT = 0.5
    search = service.call

    def slow(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(2)")  # the request's own work, with the database answering
        return search(*args, **kwargs)

    monkeypatch.setattr(service, "call", slow)
    answer = client_with_token(alice).get("/api/search", {"query": "renewal"})
    connection.close()  # the test client leaves the closed connection to the test

    assert answer.status_code == 503 and answer.headers["Retry-After"] == "2"
    assert answer.json()["error"]["code"] == "request_timeout"
    assert "0.5 s" in answer.json()["error"]["message"]
