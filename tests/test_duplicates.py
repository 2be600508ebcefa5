"""check_duplicates on the real database: a draft's likely duplicates, ranked,
explained and scoped, with nothing written; and the same answer over REST."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from rest_framework.test import APIClient

from backlog.imports import import_records
from backlog.models import Product
from search import service
from search.contract import SearchError
from search.indexing.vectors import embed_pending

from .conftest import api_key, jsonl
from .test_search import CORPUS, bug


@pytest.fixture
def embedded(db):
    assert import_records(jsonl(*CORPUS).splitlines()).written
    assert embed_pending() == len(CORPUS)


def check(user=None, **draft) -> dict:
    return service.call("check_duplicates", draft, user)


def keys(body: dict) -> list[str]:
    return [hit["key"] for hit in body["results"]]


def table_sizes() -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM backlog_bug), (SELECT count(*) FROM search_document), "
            "(SELECT max(updated_at) FROM search_document)"
        )
        return cursor.fetchone()


def test_a_reworded_draft_finds_both_reports_of_its_defect_first_and_writes_nothing(embedded):
    before = table_sizes()

    body = check(
        title="Wrong VAT amount on the exported invoice",
        description="The PDF export shows a different tax total than the screen",
    )

    full = check(
        title="Wrong VAT amount on the exported invoice",
        description="The PDF export shows a different tax total than the screen",
        detail="full",
    )

    assert body["mode"] == "hybrid"
    assert keys(body)[:2] in (["BUG-4", "BUG-5"], ["BUG-5", "BUG-4"])
    assert all(hit["kind"] == "bug" for hit in full["results"])  # the test and the feature are not candidates
    first = full["results"][0]
    assert {"vat", "invoice"} & set(first["why"]["shared_words"])
    assert 0 < first["why"]["semantic_similarity"] <= 1
    assert [hit["rank"] for hit in full["results"]] == list(range(1, len(body["results"]) + 1))
    confidences = [hit["confidence"] for hit in body["results"]]
    assert confidences[0] > confidences[-1]
    assert table_sizes() == before


def test_a_concise_candidate_holds_what_deciding_needs_and_full_the_rest(embedded):
    draft = {"title": "Wrong VAT amount on the exported invoice", "description": "The PDF export shows the wrong tax"}
    concise, full = check(**draft)["results"], check(**draft, detail="full")["results"]

    assert [hit["key"] for hit in concise] == [hit["key"] for hit in full]  # the same ranking
    assert set(concise[0]) <= {"key", "title", "product", "status", "duplicate_of", "confidence", "band", "why"}
    assert {"kind", "id", "severity", "created_at", "rank"} <= set(full[0])
    assert all(len(hit["why"]["shared_words"]) <= 5 for hit in concise)
    for short, whole in zip(concise, full, strict=True):
        assert short == {name: value for name, value in whole.items() if name in short} | {"why": short["why"]}


BUG_1_TEXT = {
    "actual_result": "Tapping Renew shows a spinner forever",
    "expected_result": "The payment sheet opens",
    "environment": "Pixel 7, Android 14",
}


def test_the_same_title_and_text_is_high_whatever_the_tags_and_a_title_alone_is_not(embedded):
    body = check(title="[Android] Renewal fails with a saved card", limit=3, **BUG_1_TEXT)
    title_alone = check(title="[Android] Renewal fails with a saved card", limit=3)

    assert keys(body)[0] == keys(title_alone)[0] == "BUG-1"
    first = body["results"][0]
    assert first["why"]["same_title"] is True and first["why"]["semantic_similarity"] >= 0.84
    assert (first["confidence"], first["band"]) == (1.0, "high")
    assert all("same_title" not in hit["why"] for hit in body["results"][1:])  # false is left out
    assert all(hit["band"] in ("medium", "low") for hit in body["results"][1:])
    # The same words in a title, and no text to compare: likely, not high (issue 51, item 4).
    alone = title_alone["results"][0]
    assert alone["why"]["same_title"] is True and alone["band"] == "medium"


def test_the_band_follows_the_evidence(embedded):
    unrelated = check(title="Map tiles flicker at night", mode="keyword")
    close = check(title="Renewal fails with saved card on Android", mode="keyword")
    texts = check(title="Renewal fails with saved card on Android", **BUG_1_TEXT)

    # By keyword alone there are only the title's words: medium at most.
    assert keys(close)[0] == "BUG-1" and close["results"][0]["band"] == "medium"
    assert keys(texts)[0] == "BUG-1" and texts["results"][0]["band"] == "high"
    assert texts["results"][0]["why"]["semantic_similarity"] >= 0.84  # the texts agree too
    assert all(hit["band"] == "low" for hit in unrelated["results"])


def test_a_look_alike_of_another_feature_is_never_high(embedded):
    draft = {"title": "Renewal fails with a saved card", **BUG_1_TEXT}
    own, other = check(**draft, draft_feature="FEAT-1"), check(**draft, draft_feature="FEAT-2")

    assert keys(own)[0] == keys(other)[0] == "BUG-1"  # every feature's bugs stay candidates, in one order
    assert keys(own) == keys(other)
    assert own["results"][0]["band"] == "high"
    assert other["results"][0]["band"] == "medium" and other["results"][0]["confidence"] < 0.7
    assert check(**draft, draft_feature="season pass renewal")["results"][0]["band"] == "high"  # by its name too


def test_a_draft_feature_no_one_can_see_is_refused_naming_how_to_find_one(embedded):
    with pytest.raises(SearchError, match='draft_feature: no feature you can see has the key or name "FEAT-99"'):
        check(title="Renewal fails with a saved card", draft_feature="FEAT-99")


def test_product_and_feature_narrow_the_candidates(embedded):
    everywhere = check(title="Spinner forever after renewal", limit=20)
    tramline = check(title="Spinner forever after renewal", product="PRD-2", limit=20)
    feature = check(title="Spinner forever after renewal", feature="FEAT-1", limit=20)

    assert {"BUG-1", "BUG-2"} <= set(keys(everywhere))
    assert set(keys(tramline)) <= {"BUG-4", "BUG-5"}
    assert set(keys(feature)) <= {"BUG-1", "BUG-6"} and "BUG-1" in keys(feature)


def test_without_embeddings_it_answers_by_keyword_and_says_so(db):
    assert import_records(jsonl(*CORPUS).splitlines()).written

    body = check(title="Renewal fails with a saved card")

    assert body["mode"] == "keyword" and "semantic" in body["degraded"]
    assert keys(body)[0] == "BUG-1"
    assert body["results"][0]["why"]["semantic_similarity"] is None
    with pytest.raises(SearchError, match="mode=semantic cannot run"):
        check(title="Renewal fails with a saved card", mode="semantic")


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        ({"description": "it crashes"}, "title: required"),
        ({"title": " x "}, "title: must be 2 to 500 characters"),
        ({"title": "Renewal", "limit": 21}, "limit: input should be less than or equal to 20"),
        ({"title": "Renewal", "colour": "red"}, "unknown parameter 'colour'; the parameters are: title, description"),
        ({"title": "Renewal", "steps": ["Open", "Tap"]}, "steps: give one value, not a list of 2"),
        ({"title": "Renewal\x00"}, "title"),
    ],
)
def test_a_bad_draft_says_what_to_send(embedded, draft, message):
    with pytest.raises(SearchError) as caught:
        check(**draft)
    assert message in str(caught.value)


def test_a_user_sees_no_candidate_and_no_word_of_a_product_they_may_not_see(embedded):
    carol = get_user_model().objects.create_user("carol")
    team = Group.objects.create(name="Tramline team")
    Product.objects.get(key="PRD-1").teams.add(team)
    carol.groups.add(team)

    body = check(carol, title="Invoice PDF has the wrong VAT total", limit=20)

    assert not {"BUG-4", "BUG-5"} & set(keys(body))
    assert all(hit["product"] == "PRD-1" for hit in body["results"])


def test_rest_answers_what_the_service_answers_and_refuses_a_bad_body(embedded):
    user = get_user_model().objects.create_superuser("alice", password="x")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_key(user)}")
    draft = {"title": "Exported invoice shows the wrong tax", "steps": "Export\nOpen the PDF", "include_scores": True}

    response = api.post("/api/bugs/check-duplicates", draft, format="json")
    wrong = api.post("/api/bugs/check-duplicates", ["not", "an", "object"], format="json")
    missing = api.post("/api/bugs/check-duplicates", {"limit": 3}, format="json")

    assert response.status_code == 200
    assert response.json() == check(user, **draft)
    assert response.json()["results"][0]["scores"]["keyword_rank"] >= 1
    assert wrong.status_code == 400 and "JSON object" in wrong.json()["error"]["message"]
    assert missing.status_code == 400 and "title: required" in missing.json()["error"]["message"]
    assert api.get("/api/bugs/check-duplicates").status_code == 405


def test_a_record_is_ranked_like_similar_ranks_it(embedded):
    """The draft of a stored bug finds what `similar` finds for it (itself aside)."""
    draft = {"title": "Exported invoice shows wrong tax amount"}
    draft["description"] = "The tax line on the exported PDF does not match the invoice screen"

    body = check(**draft, limit=3)
    similar = service.call("similar", {"key": "BUG-5", "entities": ["bug"], "limit": 2})

    assert keys(body)[0] == "BUG-5"  # itself, with the same title, first
    assert keys(body)[1] == similar["results"][0]["key"] == "BUG-4"


def test_a_much_longer_draft_is_read_but_stays_fast_enough_to_type_against(embedded):
    log = " ".join(f"line {n}: renewal token refresh failed" for n in range(3000))

    body = check(title="Renewal fails", description=log, actual_result="spinner forever")

    assert keys(body)[0] == "BUG-1"


def test_bugs_of_other_kinds_of_record_never_come_back(db):
    records = [
        {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile"},
        {"kind": "test", "key": "TEST-1", "product": "PRD-1", "title": "Renewal fails with a saved card"},
        bug("BUG-1", "Map tiles load slowly"),
    ]
    import_records(jsonl(*records).splitlines())

    body = check(title="Renewal fails with a saved card", mode="keyword")

    assert "TEST-1" not in keys(body)


def test_the_example_of_docs_api_md_works(embedded):
    import json
    import re
    from pathlib import Path

    text = Path(__file__).resolve().parent.parent.joinpath("docs", "api.md").read_text(encoding="utf-8")
    body = re.search(r"-d '(.*?)' \\\n\s*http://127\.0\.0\.1:8000/api/bugs/check-duplicates", text, re.S).group(1)
    user = get_user_model().objects.create_superuser("alice", password="x")
    api = APIClient()
    api.force_authenticate(user)

    response = api.post("/api/bugs/check-duplicates", json.loads(body), format="json")

    assert response.status_code == 200 and keys(response.json())[0] == "BUG-1"


def test_a_candidate_linked_as_a_duplicate_names_its_original(embedded):
    from backlog.models import Bug

    Bug.objects.filter(key="BUG-5").update(duplicate_of=Bug.objects.get(key="BUG-4"), status="duplicate")

    body = check(title="Exported invoice shows wrong tax amount", limit=3)

    by_key = {hit["key"]: hit for hit in body["results"]}
    assert by_key["BUG-5"]["duplicate_of"] == "BUG-4"
    assert "duplicate_of" not in by_key["BUG-4"]


def test_confidence_and_bands_never_rise_down_the_list(db):
    """A reporter reads the list top down: rank 3 at HIGH under rank 2 at MEDIUM
    says the order is wrong. Each candidate shows at most the confidence of the
    one ranked above it, the ranking itself unchanged."""
    from backlog.demo import generate

    records = list(generate(400, seed=7))
    assert import_records(jsonl(*records).splitlines()).written
    embed_pending()
    order = {"high": 0, "medium": 1, "low": 2}
    drafts = [r for r in records if r["kind"] == "bug"][:40]
    checked = 0
    for draft in drafts:
        body = check(title=draft["title"], description=draft.get("description", ""), limit=10)
        confidences = [hit["confidence"] for hit in body["results"]]
        bands = [order[hit["band"]] for hit in body["results"]]
        assert confidences == sorted(confidences, reverse=True), (draft["title"], confidences)
        assert bands == sorted(bands), (draft["title"], bands)
        checked += len(confidences) > 1
    assert checked >= 30


def test_a_reason_names_the_words_the_record_holds_not_the_draft_s_compound_or_its_punctuation(db):
    record = bug("BUG-90", "Stops sorted by distance show the wrong order", description="Seen on the Phone app.")
    assert import_records(jsonl(CORPUS[0], record).splitlines()).written
    draft = "sortsStopsByDistance failed: java.lang.AssertionError (http 500) on iPhone; order reported?"

    (hit,) = [h for h in check(title=draft, mode="keyword", detail="full")["results"] if h["key"] == "BUG-90"]
    (searched,) = service.call("search", {"query": "wrong order; (sortsStopsByDistance", "mode": "keyword"})["results"]

    shared = hit["why"]["shared_words"]
    assert {"distance", "order"} <= set(shared), shared
    held = "stops sorted by distance show the wrong order seen on the phone app".split()
    assert all(any(word.startswith(w[:4]) for word in held) for w in shared), shared  # the record's, by stem
    assert not {"sortsstopsbydistance", "java.lang.assertionerror", "iphone", "reported?"} & set(shared), shared
    assert searched["key"] == "BUG-90" and searched["why"].startswith("title: wrong, order"), searched["why"]
