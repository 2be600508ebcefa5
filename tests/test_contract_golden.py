"""The response contract itself, pinned: exact REST bodies for a small fixed corpus.

The parity tests compare the surfaces with `service.call`, so a change to the
contract passes them all. These compare each body with a file checked in
under tests/golden/, read by a person when it was written: a renamed field,
a lost facet, a changed message or order fails here until the file is
written again on purpose:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_contract_golden.py

and the diff is reviewed like code. Only what legitimately changes from day
to day is masked: scores and cursors carry the recency boost, whose age is
counted from today. Keyword mode throughout, so no float of the embedding
model (which may differ in its last digits between CPUs) is involved.
"""

import json
import os
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from backlog.imports import import_records

from .conftest import TRAMLINE, VAT_BUG, forget_history, jsonl, seeing_all_products

GOLDEN = Path(__file__).parent / "golden"
MASKED = {"score", "keyword_score", "semantic_score", "feedback_score", "recency", "next_cursor"}

AT = "2026-01-05T09:00:00+00:00"
# conftest's story with every time fixed (a product or feature without times gets the import's
# moment), and two more bugs: a duplicate of BUG-12 on Tramline and one on Ledgerly.
CORPUS = [{"created_at": AT, "updated_at": AT, **record} for record in TRAMLINE] + [
    {
        "kind": "bug",
        "key": "BUG-13",
        "product": "PRD-1",
        "feature": "FEAT-7",
        "title": "Renewal spinner never stops on iOS 18",
        "severity": "medium",
        "status": "duplicate",
        "duplicate_of": "BUG-12",
        "created_at": "2026-02-03T10:00:00+00:00",
        "updated_at": "2026-02-03T10:00:00+00:00",
        "raw_data": {"actual_result": "The spinner turns forever after tapping Renew", "environment": "iPhone 15"},
    },
    {**VAT_BUG, "updated_at": "2026-03-01T09:00:00+00:00"},
]

REQUESTS = {
    "search-keyword": "/api/search?query=renewal&mode=keyword",
    "search-full-with-scores": "/api/search?query=renewal+spinner&mode=keyword&detail=full&include_scores=true",
    "search-filters-and-page": "/api/search?query=renew&mode=keyword&entities=bug,test&status=open,active&limit=1",
    "search-content": "/api/search?query=vat&mode=keyword&include_content=true",
    "search-typo": "/api/search?query=renwal+spiner&mode=keyword",
    "search-key": "/api/search?query=bug-20&mode=keyword",
    "search-fields": "/api/search?query=renew+kind:bug,test+-severity:low+created:>=2026-01&mode=keyword&detail=full",
    "search-fields-only": "/api/search?query=product:%22tramline+mobile%22+kind:bugs&mode=keyword&sort=recent",
    "search-facets-and-index-asked": "/api/search?query=renewal&mode=keyword&include_facets=true&include_index=true",
    "search-within-max-tokens": "/api/search?query=renewal&mode=keyword&max_tokens=150",
    "similar-full": "/api/similar/BUG-12?mode=keyword&detail=full&limit=2",
    "similar-keyword": "/api/similar/BUG-12?mode=keyword",
    "get-with-related": "/api/records?keys=BUG-12,FEAT-7,NOPE-1",
    "get-concise": "/api/records?keys=BUG-12,BUG-13,FEAT-7,PRD-1&detail=concise",
    "get-concise-with-fields": "/api/records?keys=BUG-13&fields=raw_data,actual_result",
    "get-within-max-tokens": "/api/records?keys=TEST-3,BUG-12,FEAT-7&include_related=false&max_tokens=400",
    "timeline": "/api/timeline/BUG-12",
    "error-short-query": "/api/search?query=x",
    "error-bad-mode": "/api/search?query=renewal&mode=fast",
    "error-bad-cursor": "/api/search?query=renewal&cursor=abc",
    "error-unknown-key": "/api/similar/NOPE-9",
    "error-field-value": "/api/search?query=renewal+severity:blocker",
    "error-field-product": "/api/search?query=renewal+product:Tramline",
    "error-max-tokens-too-small": "/api/search?query=renewal&mode=keyword&max_tokens=40",
}


def masked(value):
    if isinstance(value, dict):
        return {k: "<masked>" if k in MASKED and value[k] is not None else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(item) for item in value]
    return value


@pytest.fixture
def client(db, django_user_model):
    forget_history()  # the sequences are reset (below): other modules' events would collide
    report = import_records(jsonl(*CORPUS).splitlines())
    assert report.written and not report.problems, report.problems
    client = APIClient()
    client.force_authenticate(seeing_all_products(django_user_model.objects.create_user("reader")))
    return client


@pytest.mark.django_db(reset_sequences=True)  # record ids are part of the full detail
@pytest.mark.parametrize("name", REQUESTS)
def test_the_rest_body_is_the_one_checked_in(client, name):
    response = client.get(REQUESTS[name])
    answer = {"status": response.status_code, "body": masked(response.json())}
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(answer, indent=2, ensure_ascii=False) + "\n")

    assert answer == json.loads(path.read_text())
