"""The semantic arm: the records nearest to a vector (pgvector, HNSW over halfvec).

hnsw.iterative_scan lets the index keep scanning while filters reject rows,
so a selective filter still fills the page (pgvector 0.8+). Filters and the
access rule are in the statement's WHERE, as in the keyword arm.
"""

import logging
import threading
import weakref
from collections import OrderedDict

import numpy as np

from search import db
from search.indexing.embeddings import get_provider
from search.indexing.provider import EmbeddingError
from search.query.scope import Scope
from search.ranking import config, facets, layout
from search.ranking.rows import ArmResult, RowInfo, info_columns, info_params

logger = logging.getLogger(__name__)


def for_query(text: str, scope: Scope, depth: int, keyword: ArmResult | None) -> ArmResult:
    """The arm for a query's text, embedded with the active model; EmbeddingError
    when the model cannot embed it (search.operations.search falls back to keyword)."""
    return for_vector(query_vector(text), scope, depth, keyword)


def for_vector(embedded: tuple, scope: Scope, depth: int, keyword: ArmResult | None) -> ArmResult:
    """The arm for `embedded`, what query_vector returned."""
    vector, model_id = embedded
    result = nearest(vector, model_id, scope, depth, keyword.query if keyword else "")
    result.vector = vector
    return result


def query_vector(text: str) -> tuple[np.ndarray, str]:
    """`text`'s vector by the active model, and the model's id; EmbeddingError
    when the model cannot embed it. Touches no database: it may run in
    another thread while the keyword arm's statements run (search.operations.duplicates)."""
    provider = get_provider()
    try:
        return _query_vector(provider, text), provider.model_id
    except EmbeddingError:
        raise
    except Exception as exc:  # a plug-in's own failure (a cache folder it cannot write, a broken file)
        logger.exception("The embedding provider failed")
        raise EmbeddingError(f"the embedding provider failed: {type(exc).__name__}: {exc}") from exc


QUERY_VECTORS = 1024  # the last queries' vectors this process keeps, per provider
# provider -> text -> vector; a provider built anew (other settings) starts empty.
_query_vectors: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_query_vectors_lock = threading.Lock()


def _query_vector(provider, text: str) -> np.ndarray:
    """The query's vector, from the last QUERY_VECTORS queries when asked
    again: the next page (a cursor), the same search from the UI and the
    API, an agent's retry. Embedding a query is most of a hybrid search's
    CPU time; a vector depends only on the model and the text."""
    with _query_vectors_lock:
        kept = _query_vectors.setdefault(provider, OrderedDict())
        if (vector := kept.get(text)) is not None:
            kept.move_to_end(text)
            return vector
    vector = provider.embed_query(text)
    with _query_vectors_lock:
        kept[text] = vector
        while len(kept) > QUERY_VECTORS:
            kept.popitem(last=False)
    return vector


def feedback(result: ArmResult, top_ids: list[int], scope: Scope, depth: int, keyword: ArmResult | None) -> ArmResult:
    """The arm again, from the query's vector moved toward the vectors of
    `top_ids` (the first fusion's best records, each with a current vector):
    Rocchio's pseudo-relevance feedback, q + feedback_weight x
    mean(top). A short or vague query borrows the wording of the record the
    fusion ranked first, and finds that record's neighbours. One statement:
    cosine distance ignores length, so q / weight + mean(top) is the same
    direction, summed in the database next to the stored vectors."""
    query = np.asarray(result.vector, dtype=np.float32) / config.current().feedback_weight
    return nearest(query, get_provider().model_id, scope, depth, keyword.query if keyword else "", toward=top_ids)


def vector_literal(vector) -> str:
    """A vector as pgvector's text input, for a %s parameter cast to halfvec."""
    return "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


def nearest(
    vector, model_id: str, scope: Scope, depth: int, keyword_query: str = "", toward: list[int] | None = None
) -> ArmResult:
    """The `depth` nearest records with a current vector, within `scope`, to
    `vector` (plus the mean vector of the records `toward`, see feedback).

    With `keyword_query` (hybrid), `outside_rows` holds the neighbours that
    the keyword arm's match set does not, to be counted and faceted.
    """
    literal = vector_literal(vector)
    target, toward_sql = "%(vector)s::halfvec", ""
    if toward:
        # The mean of the few vectors read first (a CTE), not avg() over the
        # table in a subquery: on Citus that avg is a partial aggregate per
        # shard, and in this expression it failed ("vector must have at
        # least 1 dimension").
        toward_sql = (
            "WITH toward AS MATERIALIZED (SELECT f.embedding FROM search_document f WHERE f.id = ANY(%(toward)s))"
        )
        target += " + (SELECT avg(embedding) FROM toward)"
    matched = "d.search_vector @@ %(keyword)s::tsquery" if keyword_query else "FALSE"
    sql = f"""
        {toward_sql}
        SELECT d.id, d.embedding <=> ({target}) AS distance, d.kind, d.product_id, d.status, d.severity,
               {matched}, {info_columns("d")}
        FROM search_document d
        WHERE d.embedding IS NOT NULL AND d.embedding_model = %(model)s AND ({scope.where})
        ORDER BY distance
        LIMIT %(depth)s
    """
    params = {"vector": literal, "keyword": keyword_query, "model": model_id, "depth": depth, "toward": toward}
    settings = _scan_settings(depth)
    # Settings local to this transaction, not the session's: a connection
    # pooler in transaction mode may hand the session to someone else. SET
    # LOCAL statements, not set_config(): Citus passes SET LOCAL on to the
    # workers that hold the shards (layout.set_local). All in one round trip.
    with db.atomic(), db.cursor() as cursor:
        layout.set_local(cursor, *settings)
        cursor.execute(sql, {**params, **scope.params, **info_params()})
        rows = cursor.fetchall()
    # relaxed_order may return neighbours slightly out of order.
    rows.sort(key=lambda row: (row[1], row[0]))
    counts, info, outside_rows = facets.empty(), {}, {}
    for pk, _, kind, product_id, status, severity, in_keyword, updated, created, has_vector, title in rows:
        facets.add(counts, kind, product_id, status, severity)
        if not in_keyword:
            outside_rows[pk] = (kind, product_id, status, severity)
        info[pk] = RowInfo(float(updated), float(created), has_vector, title)
    ranked = [(row[0], 1.0 - float(row[1])) for row in rows]
    return ArmResult(ranked, len(rows), True, counts, info=info, outside_rows=outside_rows)


def _scan_settings(depth: int) -> list[str]:
    """How the index is walked for `depth` neighbours (SET LOCAL, see nearest)."""
    ef_search = int(max(config.current().hnsw_ef_search, min(depth, 1000)))
    settings = ["hnsw.iterative_scan = relaxed_order", f"hnsw.ef_search = {ef_search}"]
    if layout.distributed():
        # Every shard walks its own HNSW graph. pgvector's estimate of an HNSW
        # scan grows with ef_search, and at 400 it comes near a sequential
        # scan and top-N sort of a few thousand rows, which is what a shard
        # holds: the planner read every vector of every shard (4 shards, 20,000
        # rows: 41 to 65 ms against 6 to 10 through the index; one server flips
        # the same way at 5,909 rows when its table is compact, after a restore
        # or VACUUM FULL). Without sequential scans there, a shard walks its
        # index, or, under a filter selective enough for an index of its own
        # (a product, a status), sorts exactly the few rows that filter keeps:
        # the HNSW scan of a filtered shard missed 6 of the top 20 and took
        # twice as long under restrictive filters.
        settings.append("enable_seqscan = off")
    return settings
