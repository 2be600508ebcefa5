"""Filling in embeddings: the one thing the database cannot compute itself.

The triggers give every search_document row a `content_hash` of the text it
should embed. A row needs a vector when it has none, when its vector was
made by another model, or from other text (`needing_embedding`). Work goes
in batches, each committed on its own, so a killed run loses at most one
batch and the next run resumes where it stopped.
"""

from collections.abc import Callable

from django.db import connection

from config.postgres import replicas

from .embeddings import document_text, get_provider
from .models import Document


def pending_count() -> int:
    return Document.objects.needing_embedding(get_provider().model_id).count()


# What it reads it writes: from the primary, never from a read replica that
# has not yet replayed the last pass's vectors (they would be made again).
@replicas.reads_from(replicas.PRIMARY)
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
    while not should_stop():
        batch = list(queryset.filter(id__gt=last_id).values_list("id", "title", "body", "content_hash")[:batch_size])
        if not batch:
            break
        last_id = batch[-1][0]
        vectors = provider.embed_documents([document_text(title, body) for _, title, body, _ in batch])
        written += _store(batch, vectors, provider.model_id)
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    return written


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
