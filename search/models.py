"""The search index: one row per record of any kind.

PostgreSQL keeps `Document` rows in step with the four record tables by
statement-level triggers (`search/indexing/sql.py`), in the same transaction as the
write, so save, bulk_create, queryset.update(), raw SQL and import are all
covered without Python remembering to do it. Search reads only this table
until it builds the returned page.

Embeddings cannot be computed by the database, so each row carries the hash
of the text it should embed (`content_hash`, set by the trigger) and the
model and hash of the vector it has; stale or missing vectors are found by
one query (`Document.objects.needing_embedding()`) and filled in by
`manage.py embed`.
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Upper
from pgvector.django import HalfVectorField, HnswIndex

from backlog.models import RECORD_MODELS

EMBEDDING_DIMENSIONS = 384


# The kinds of record, as the record models name themselves (their KIND), in their order.
Kind = models.TextChoices("Kind", [(kind.upper(), kind) for kind in RECORD_MODELS])


class DocumentQuerySet(models.QuerySet):
    def needing_embedding(self, model_id: str):
        """Rows with no vector, a vector of another model, or of older text."""
        return self.filter(
            Q(embedding__isnull=True) | ~Q(embedding_model=model_id) | ~Q(embedding_hash=F("content_hash"))
        )


class Document(models.Model):
    kind = models.CharField(max_length=8, choices=Kind)
    record_id = models.BigIntegerField()
    key = models.CharField(max_length=64, unique=True)
    # For a product, its own id: filtering by product finds the product too.
    product_id = models.BigIntegerField()
    feature_id = models.BigIntegerField(null=True)
    title = models.TextField()
    body = models.TextField()
    status = models.CharField(max_length=16, null=True)
    severity = models.CharField(max_length=16, null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    search_vector = SearchVectorField()
    # A sample bucket and the month of updated_at (search.indexing.sql explains why);
    # kept apart from search_vector so that ranking never sees them.
    search_markers = SearchVectorField(null=True)
    # The words again, each lexeme led by the product ("12~crash"): where a user
    # who sees only some products matches words (search.indexing.sql explains why).
    search_scoped = models.GeneratedField(
        expression=models.Func(models.F("product_id"), models.F("search_vector"), function="search_scoped"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    content_hash = models.CharField(max_length=32)
    embedding = HalfVectorField(dimensions=EMBEDDING_DIMENSIONS, null=True)
    embedding_model = models.CharField(max_length=200, null=True)
    embedding_hash = models.CharField(max_length=32, null=True)

    objects = DocumentQuerySet.as_manager()

    class Meta:
        db_table = "search_document"
        constraints = [
            models.UniqueConstraint(fields=["kind", "record_id"], name="search_document_record"),
            # The index triggers' upsert arbiter: with the product, as Citus wants every
            # unique constraint of a table distributed by it (search/citus.py).
            models.UniqueConstraint(fields=["kind", "record_id", "product_id"], name="search_document_record_product"),
        ]
        indexes = [
            # Both columns in one GIN index: `search_vector @@ q AND
            # search_markers @@ m` is answered inside the index.
            GinIndex(fields=["search_vector", "search_markers"], name="search_document_fts"),
            # The same for the records of some products (search.query.scope.words_match).
            GinIndex(fields=["search_scoped", "search_markers"], name="search_document_scoped"),
            # Typo tolerance: word_similarity(query, title) through pg_trgm.
            GinIndex(fields=["title"], name="search_document_title_trgm", opclasses=["gin_trgm_ops"]),
            HnswIndex(
                fields=["embedding"],
                name="search_document_hnsw",
                m=16,
                ef_construction=256,
                opclasses=["halfvec_cosine_ops"],
            ),
            models.Index(fields=["product_id", "kind"], name="search_document_product"),
            # The key shortcut matches keys case-insensitively (bug-12 finds BUG-12).
            models.Index(Upper("key"), name="search_document_key_upper"),
            # Newest first, ties by id: the recent candidates of a broad query.
            models.Index(fields=["updated_at", "id"], name="search_document_updated"),
            models.Index(fields=["created_at"], name="search_document_created"),
            # A record's neighbours in time, and the records of a feature (timeline, get).
            models.Index(fields=["feature_id", "created_at", "id"], name="search_document_feature_time"),
            models.Index(fields=["product_id", "created_at", "id"], name="search_document_product_time"),
            # A copied record's vector: embed_pending copies it from a row with the same text.
            models.Index(fields=["content_hash"], name="search_document_content_hash"),
            models.Index(
                fields=["id"],
                name="search_document_stale",
                condition=Q(embedding__isnull=True) | ~Q(embedding_hash=F("content_hash")),
            ),
        ]

    def __str__(self):
        return f"{self.key} {self.title}"


class WorkerState(models.TextChoices):
    RUNNING = "running"
    RESTARTING = "restarting"  # it died; started again after a back-off
    STOPPED = "stopped"  # stopped with the server that supervised it


class Worker(models.Model):
    """A supervised background worker (the embedding worker `serve` runs), as
    its supervisor last saw it: search.indexing.worker.Supervisor writes this row, and
    index health reads it, so the state is visible from every process."""

    name = models.CharField(max_length=40, primary_key=True)
    state = models.CharField(max_length=20, choices=WorkerState.choices)
    pid = models.IntegerField(null=True)
    host = models.CharField(max_length=255, blank=True)
    started_at = models.DateTimeField(null=True)
    heartbeat_at = models.DateTimeField(help_text="the supervisor's last word; stale when it is gone")
    restarts = models.IntegerField(default=0)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True)

    class Meta:
        db_table = "search_worker"

    def __str__(self):
        return f"{self.name} worker ({self.state})"


class RateCount(models.Model):
    """How much of SEARCH_RATE_LIMIT a user spent in one fixed window of its
    period: search.ratelimit adds to it in one statement and sweeps out
    windows too old to matter. A plain user id, no foreign key: a deleted
    user's rows go with the next sweep, and no insert pays for a check.
    Unlogged (migration 0014): a count waits for no WAL flush, and a crash
    only gives every user a fresh budget."""

    pk = models.CompositePrimaryKey("user_id", "window_start")
    user_id = models.BigIntegerField()
    window_start = models.DateTimeField()
    count = models.IntegerField()

    class Meta:
        db_table = "search_ratecount"

    def __str__(self):
        return f"user {self.user_id}: {self.count} from {self.window_start:%H:%M:%S}"
