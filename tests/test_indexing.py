"""Filling in embeddings (search.indexing.vectors.embed_pending) on the real database.

The story: Tramline's testers filed the Android renewal bug three times,
word for word (BUG-1, BUG-2, BUG-5), and in one test once more, later
(BUG-9); the VAT bug and the printer bug are one of a kind. The model is watched (every text it is asked to
embed is recorded), so each test can say what it computed and what it did
not.
"""

import importlib
import re

import numpy as np
import pytest
from django.db import connection
from tokenizers import Tokenizer

from backlog.imports import import_records
from backlog.models import Bug
from search.indexing.embeddings import document_text, get_provider
from search.indexing.provider import MAX_TOKENS, TOKENIZER_PATH, clip_text
from search.indexing.vectors import embed_pending, pending_count
from search.models import Document

from .conftest import jsonl

pytestmark = pytest.mark.django_db

RENEWAL = {"title": "Renewal button does nothing", "description": "Tapping Renew on Android 14 shows a spinner forever"}


def bug(key: str, title: str, description: str) -> dict:
    return {"kind": "bug", "key": key, "product": "PRD-1", "title": title, "description": description}


RECORDS = [
    {"kind": "product", "key": "PRD-1", "name": "Tramline Mobile", "description": "Ticketing app for city transit"},
    bug("BUG-1", **RENEWAL),
    bug("BUG-2", **RENEWAL),
    bug("BUG-3", "Invoice PDF has the wrong VAT total", "The total ignores the reduced rate"),
    bug("BUG-4", "Receipt printer prints garbled characters", "Since the driver update"),
    bug("BUG-5", **RENEWAL),
]


@pytest.fixture
def watched_model(monkeypatch):
    """The active provider, recording every text it is asked to embed."""
    provider = get_provider()
    asked: list[str] = []
    embed_documents = provider.embed_documents

    def recording(texts):
        asked.extend(texts)
        return embed_documents(texts)

    monkeypatch.setattr(provider, "embed_documents", recording)
    return asked


@pytest.fixture
def tracker(db):
    report = import_records(jsonl(*RECORDS).splitlines())
    assert sum(report.created.values()) == len(RECORDS), report.problems


def stored() -> dict[str, np.ndarray]:
    """Each record's stored vector by key."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, embedding::real[] FROM search_document WHERE embedding IS NOT NULL")
        return {key: np.array(vector, dtype=np.float32) for key, vector in cursor.fetchall()}


def test_each_text_is_embedded_once_and_every_copy_gets_its_vector(tracker, watched_model):
    assert embed_pending() == len(RECORDS)

    renewal = document_text(RENEWAL["title"], RENEWAL["description"])
    assert sorted(watched_model) == sorted(set(watched_model)) and watched_model.count(renewal) == 1
    assert len(watched_model) == 4  # the product, the renewal bug, VAT, printer
    vectors = stored()
    assert np.array_equal(vectors["BUG-1"], vectors["BUG-2"]) and np.array_equal(vectors["BUG-1"], vectors["BUG-5"])
    assert pending_count() == 0


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_every_row_gets_the_vector_of_its_own_text(tracker, batch_size):
    """Small batches: the pipeline holds a batch while it writes another and the copies cross batches;
    one batch of all: the model runs its texts longest first, and each vector still lands on its row."""
    embed_pending(batch_size=batch_size)

    provider = get_provider()
    vectors = stored()
    for document in Document.objects.all():
        own = provider.embed_query(document_text(document.title, document.body))
        assert np.abs(vectors[document.key] - own).max() < 1e-3, document.key  # halfvec keeps ~3 digits
        others = [key for key, vector in vectors.items() if not np.array_equal(vector, vectors[document.key])]
        assert all(float(vectors[key] @ own) < 0.99 for key in others), document.key


def test_a_text_in_the_batch_before_is_not_embedded_again(tracker, watched_model):
    """One row a batch: BUG-2's batch is read while BUG-1's is still in the model (nothing to copy yet);
    BUG-5's after BUG-1's vector is stored, so it is copied."""
    assert embed_pending(batch_size=1) == len(RECORDS)

    renewal = document_text(RENEWAL["title"], RENEWAL["description"])
    assert watched_model.count(renewal) == 1 and len(watched_model) == 4
    vectors = stored()
    assert np.array_equal(vectors["BUG-1"], vectors["BUG-2"]) and np.array_equal(vectors["BUG-1"], vectors["BUG-5"])


def test_a_copy_filed_later_gets_the_stored_vector_without_the_model(tracker, watched_model):
    embed_pending()
    watched_model.clear()
    import_records(jsonl(bug("BUG-9", **RENEWAL)).splitlines())

    assert embed_pending() == 1

    assert watched_model == []
    vectors = stored()
    assert np.array_equal(vectors["BUG-9"], vectors["BUG-1"])


def test_rows_whose_vector_is_current_are_not_embedded_again(tracker, watched_model):
    embed_pending()
    watched_model.clear()
    Bug.objects.filter(key="BUG-3").update(description="The total ignores the reduced rate of 7%")

    assert embed_pending() == 1

    assert watched_model == [
        document_text("Invoice PDF has the wrong VAT total", "The total ignores the reduced rate of 7%")
    ]


def test_a_vector_of_another_model_is_not_copied(tracker, watched_model):
    embed_pending()
    Document.objects.update(embedding_model="another-model")
    watched_model.clear()

    assert embed_pending() == len(RECORDS)

    assert len(watched_model) == 4  # computed again, the copies still once


def test_a_row_edited_while_its_batch_is_embedded_waits_for_the_next_pass(tracker, watched_model):
    """Batches of three: the first is in the model while the second is read; then BUG-1 changes."""
    checks = 0

    def edit_during_the_run():
        nonlocal checks
        checks += 1
        if checks == 2:  # the first batch (the product, BUG-1, BUG-2) is being embedded
            Bug.objects.filter(key="BUG-1").update(title="Renewal button does nothing (Android 14)")
        return False

    assert embed_pending(batch_size=3, should_stop=edit_during_the_run) == len(RECORDS) - 1

    assert pending_count() == 1 and "BUG-1" not in stored()
    assert embed_pending() == 1 and pending_count() == 0


def test_a_stop_writes_the_batch_in_hand_and_the_next_run_resumes(tracker):
    checks = 0

    def stop_after_one_batch():
        nonlocal checks
        checks += 1
        return checks > 1

    assert embed_pending(batch_size=2, should_stop=stop_after_one_batch) == 2
    assert pending_count() == len(RECORDS) - 2
    assert embed_pending(batch_size=2) == len(RECORDS) - 2
    assert pending_count() == 0


# A report as Bugzilla's form files it: the reporter's user agent and build id, then a long trace in the
# description; the steps, actual and expected results in their own fields, after it in the embedded text.
FRAMES = "".join(f"\tat org.mozilla.gecko.dom.Layer{n}.paint(Layer{n}.java:{100 + n})\n" for n in range(40))
FORM_REPORT = {
    **bug(
        "BUG-20",
        "Season pass renewal crashes the app",
        "User Agent: Mozilla/5.0 (Android 14; Mobile; rv:121.0) Gecko/121.0 Firefox/121.0\n"
        "Build ID: 20231219181341\n\n"
        f"java.lang.IllegalStateException: no payment sheet\n{FRAMES}\t... 12 more",
    ),
    "raw_data": {
        "steps": ["Open Passes", "Tap Renew on the season pass"],
        "actual_result": "The app closes without a message",
        "expected_result": "The payment sheet opens with the renewal price",
    },
}


def window(text: str) -> str:
    """What the local model reads of ``text``: its first MAX_TOKENS word pieces, as words again."""
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(MAX_TOKENS)
    return tokenizer.decode(tokenizer.encode(clip_text(text)).ids)


def test_a_form_report_s_results_and_steps_are_within_what_the_model_reads(tracker, watched_model):
    """The user agent, the build id and all but the top frames' names are left out, so the
    40-frame trace no longer pushes the actual and expected results out of the model's window."""
    import_records(jsonl(FORM_REPORT).splitlines())
    embed_pending()

    (text,) = [text for text in watched_model if text.startswith("Season pass renewal")]
    read = window(text)
    assert "the app closes without a message" in read
    assert "the payment sheet opens with the renewal price" in read
    assert "tap renew on the season pass" in read
    assert "illegalstateexception" in read.replace(" ", "") and "layer4paint" in read.replace(" ", "")
    assert "firefox" not in read and "20231219181341" not in read and "layer5paint" not in read.replace(" ", "")


def test_only_vectors_of_texts_the_new_rules_change_are_made_again(tracker):
    """Migration 0016: the content hash is of the record's own text, which did not change; the rows
    whose embedded text did (a user agent, a long trace) wait for the worker again, the others keep theirs."""
    import_records(
        jsonl(FORM_REPORT, bug("BUG-21", "Timeout in the log", "2023-12-14 17:35:56,602 ERROR timeout")).splitlines()
    )
    embed_pending()
    migration = importlib.import_module("search.migrations.0016_embed_without_boilerplate")

    with connection.cursor() as cursor:
        cursor.execute(migration.MARK_STALE, [migration.CHANGED_TEXT])

    stale = Document.objects.needing_embedding(get_provider().model_id)
    assert sorted(stale.values_list("key", flat=True)) == ["BUG-20", "BUG-21"]
    for document in Document.objects.exclude(key__in=["BUG-20", "BUG-21"]):
        assert document_text(document.title, document.body) == old_document_text(document.title, document.body)


def old_document_text(title: str, *parts: str | None) -> str:
    """document_text as migration 0008 left it: links, markup and camel case only."""
    link, markup, camel = (
        re.compile(r"\[?https?://\S+"),
        re.compile(r"[-=*_#|]{3,}|\{code[^}]*\}|\{noformat\}"),
        re.compile(r"([a-z])([A-Z])"),
    )
    pieces = [camel.sub(r"\1 \2", markup.sub(" ", link.sub(" ", piece))).strip() for piece in [title, *parts] if piece]
    return "\n".join(piece for piece in pieces if piece)
