"""Filling in embeddings: the one thing the database cannot compute itself.

The triggers give every search_document row a `content_hash` of the text it
should embed. A row needs a vector when it has none, when its vector was
made by another model, or from other text (`needing_embedding`). Work goes
in batches, each committed on its own, so a killed run loses at most the two
batches in hand (one being embedded, one being written) and the next run
resumes where it stopped.

The model's time bounds throughput, so it is spent only on texts that have
no vector yet: a row whose text already has a current vector in another row
(a copied record: one demo test in ten) gets that vector copied in SQL, a
text that occurs twice in a batch is embedded once, and the model embeds
the next batch while the database writes the last one.
"""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import DEFAULT_DB_ALIAS, connection

from search import db
from search.indexing.embeddings import document_text, get_provider
from search.indexing.health import forget_coverage
from search.models import Document

#: What embed_pending reads of a row.
ROW = ("id", "title", "body", "content_hash")


def pending_count() -> int:
    return Document.objects.needing_embedding(get_provider().model_id).count()


# What it reads it writes: from the primary, never from a read replica that
# has not yet replayed the last pass's vectors (they would be made again).
@db.reads_from(DEFAULT_DB_ALIAS)
def embed_pending(
    *,
    batch_size: int = 64,
    progress: Callable[[str, int | None], object] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> int:
    """Embed every row that needs it; return how many were written."""
    provider = get_provider()
    queryset = Document.objects.needing_embedding(provider.model_id).order_by("id")
    bar = progress("embedding", queryset.count()) if progress else None
    written = 0
    last_id = 0
    in_hand = None  # the batch the model is embedding: its rows, its texts' hashes, the Future, the batch before's

    def write(rows, hashes, embedding, before) -> int:
        vectors = dict(zip(hashes, embedding.result(), strict=True))
        for content_hash in {row[3] for row in rows} - vectors.keys():  # embedded by the batch before
            vectors[content_hash] = before[1].result()[before[0].index(content_hash)]
        if bar is not None:
            bar.update(len(rows))
        return _store(rows, [vectors[row[3]] for row in rows], provider.model_id)

    # The model works in a thread of its own (fanning out to EMBEDDING_THREADS); the database stays
    # with the calling thread, so its connection (and a test's transaction) is the one used.
    with ThreadPoolExecutor(1, thread_name_prefix="embed-pending") as model:
        while not should_stop():
            batch = list(queryset.filter(id__gt=last_id).values_list(*ROW)[:batch_size])
            if not batch:
                break
            last_id = batch[-1][0]
            copied = _copy_known_vectors(batch, provider.model_id)
            written += len(copied)
            if bar is not None:
                bar.update(len(copied))
            rows = [row for row in batch if row[0] not in copied]
            # The batch in hand is not written yet, so the copy above cannot see its texts: take them from it.
            before = in_hand[1:3] if in_hand is not None else ([], None)
            texts = {}
            for _, title, body, content_hash in rows:
                if content_hash not in texts and content_hash not in before[0]:
                    texts[content_hash] = document_text(title, body)
            embedding = model.submit(provider.embed_documents, list(texts.values()))
            if in_hand is not None:
                written += write(*in_hand)
            in_hand = (rows, list(texts), embedding, before)
        if in_hand is not None:
            written += write(*in_hand)
    if bar is not None:
        bar.close()
    if written:
        forget_coverage()
    return written


def _copy_known_vectors(batch, model_id: str) -> set[int]:
    """Give each row of ``batch`` whose text already has a current vector in another row that vector
    (exactly: no model run, no rounding); return the ids of the rows written."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE search_document d
            SET embedding = known.embedding, embedding_model = %(model)s, embedding_hash = d.content_hash
            FROM (
                SELECT DISTINCT ON (content_hash) content_hash, embedding
                FROM search_document
                WHERE content_hash = ANY(%(hashes)s) AND embedding_model = %(model)s
                  AND embedding_hash = content_hash AND embedding IS NOT NULL
            ) known
            WHERE d.id = ANY(%(ids)s) AND d.content_hash = known.content_hash
            RETURNING d.id
            """,
            {"model": model_id, "hashes": list({row[3] for row in batch}), "ids": [row[0] for row in batch]},
        )
        return {row[0] for row in cursor.fetchall()}


def _store(batch, vectors, model_id: str) -> int:
    """Write vectors; a row whose text changed meanwhile keeps waiting for the next pass."""
    literals = ["[" + ",".join(f"{x:.6f}" for x in vector) + "]" for vector in vectors]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE search_document d
            SET embedding = v.embedding::halfvec, embedding_model = %s, embedding_hash = v.content_hash
            FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, content_hash, embedding)
            WHERE d.id = v.id AND d.content_hash = v.content_hash
            """,
            [model_id, [row[0] for row in batch], [row[3] for row in batch], literals],
        )
        return cursor.rowcount


BULK_WRITE_ROWS = 1000


def after_bulk_write(rows: int) -> None:
    """Refresh what a large write makes stale: the planner's statistics
    (ranking reads document frequencies of common words from pg_stats) and
    the GIN index's pending list (unmerged entries slow every query until
    they are merged)."""
    if rows < BULK_WRITE_ROWS:
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('search_document_fts'::regclass)")
        cursor.execute("ANALYZE search_document")
