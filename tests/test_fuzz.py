"""Fuzzing: any value of any type, for any parameter, on the service and over REST.

Every answer is a result or a SearchError (REST: a 4xx JSON body), never
another exception, and no body shows a traceback or SQL. The strategies and
the budget are tests/fuzzing.py's.
"""

import json
from urllib.parse import quote

from hypothesis import given

from search import service
from search.contract import SearchError

from .fuzzing import CALLS, FUZZ, TEXT, leak, params_for, tally


@FUZZ
@given(call=CALLS)
def test_the_service_answers_anything_with_a_result_or_a_search_error(tramline, call):
    operation, params = call
    try:
        body = service.call(operation, params)
    except SearchError as exc:
        tally("service", server_error=False, body=str(exc))
        assert str(exc) and not leak(str(exc))
        assert exc.status < 500 or exc.status == 503
    except Exception:
        tally("service", server_error=True, body="")
        raise
    else:
        tally("service", server_error=False, body=json.dumps(body))


def query_string(params: dict) -> dict:
    """What a query string can carry: strings, lists of strings."""
    out = {}
    for name, value in params.items():
        values = value if isinstance(value, list) else [value]
        out[name] = [json.dumps(v) if isinstance(v, dict | list) else str(v) for v in values]
    return out


@FUZZ
@given(params=params_for("search"))
def test_rest_search_never_answers_5xx_or_a_traceback(tramline, reader, params):
    response = reader.get("/api/search", query_string(params))
    body = response.content.decode()
    tally("REST /api/search", server_error=response.status_code >= 500, body=body)
    assert response.status_code in (200, 400, 404, 503), response.content[:300]
    assert not leak(body)
    json.loads(body)


@FUZZ
@given(key=TEXT)
def test_rest_record_paths_never_answer_5xx(tramline, reader, key):
    for path in ("similar", "timeline"):
        response = reader.get(f"/api/{path}/{quote(key, safe='')}")
        tally(f"REST /api/{path}/KEY", server_error=response.status_code >= 500, body=response.content.decode())
        assert response.status_code in (200, 400, 404), (key, response.content[:300])
