"""The semantic arm: the records nearest to a vector (pgvector, HNSW over halfvec).

hnsw.iterative_scan lets the index keep scanning while filters reject rows,
so a selective filter still fills the page (pgvector 0.8+). Filters and the
access rule are in the statement's WHERE, as in the keyword arm.
"""

import json

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from . import facets
from .embeddings import get_provider
from .rows import ArmResult, RowInfo, info_columns, info_params
from .scope import Scope


def for_query(text: str, scope: Scope, depth: int, keyword: ArmResult | None) -> ArmResult:
    """The arm for a query's text, embedded with the active model."""
    provider = get_provider()
    vector = provider.embed_query(text)
    result = nearest(vector, provider.model_id, scope, depth, keyword.query if keyword else "")
    result.vector = vector
    return result


def feedback(
    result: ArmResult, top_ids: list[int], scope: Scope, depth: int, keyword: ArmResult | None
) -> ArmResult | None:
    """The arm again, from the query's vector moved toward the vectors of
    `top_ids` (the first fusion's best records): Rocchio's pseudo-relevance
    feedback, q + SEARCH_FEEDBACK_WEIGHT x mean(top), normalised. A short or
    vague query borrows the wording of the record the fusion ranked first,
    and finds that record's neighbours. None when none of `top_ids` has a
    current vector."""
    if not top_ids:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.embedding::text FROM search_document d WHERE d.id = ANY(%(ids)s) AND d.embedding IS NOT NULL "
            "AND d.embedding_model = %(model)s",
            {"ids": top_ids, "model": get_provider().model_id},
        )
        rows = [json.loads(row[0]) for row in cursor.fetchall()]
    if not rows:
        return None
    centroid = np.mean(np.asarray(rows, dtype=np.float32), axis=0)
    vector = np.asarray(result.vector, dtype=np.float32) + settings.SEARCH_FEEDBACK_WEIGHT * centroid
    vector /= np.linalg.norm(vector)
    return nearest(vector, get_provider().model_id, scope, depth, keyword.query if keyword else "")


def nearest(vector, model_id: str, scope: Scope, depth: int, keyword_query: str = "") -> ArmResult:
    """The `depth` nearest records with a current vector, within `scope`.

    With `keyword_query` (hybrid), `outside` counts and facets the
    neighbours that the keyword arm's match set does not hold.
    """
    literal = "[" + ",".join(f"{x:.6f}" for x in vector) + "]"
    matched = "d.search_vector @@ %(keyword)s::tsquery" if keyword_query else "FALSE"
    sql = f"""
        SELECT d.id, d.embedding <=> %(vector)s::halfvec AS distance, d.kind, d.product_id, d.status, d.severity,
               {matched}, {info_columns("d")}
        FROM search_document d
        WHERE d.embedding IS NOT NULL AND d.embedding_model = %(model)s AND ({scope.where})
        ORDER BY distance
        LIMIT %(depth)s
    """
    params = {"vector": literal, "keyword": keyword_query, "model": model_id, "depth": depth}
    ef_search = max(settings.SEARCH_HNSW_EF_SEARCH, min(depth, 1000))
    # Settings local to this transaction, not the session's: a connection
    # pooler in transaction mode may hand the session to someone else.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.ef_search', %(ef_search)s, true)",
            {"ef_search": str(int(ef_search))},
        )
        cursor.execute(sql, {**params, **scope.params, **info_params()})
        rows = cursor.fetchall()
    # relaxed_order may return neighbours slightly out of order.
    rows.sort(key=lambda row: (row[1], row[0]))
    counts, outside = facets.empty(), facets.empty()
    info, outside_count = {}, 0
    for pk, _, kind, product_id, status, severity, in_keyword, updated, created, has_vector, title in rows:
        for tally in (counts,) if in_keyword else (counts, outside):
            facets.add(tally, kind, product_id, status, severity)
        outside_count += not in_keyword
        info[pk] = RowInfo(float(updated), float(created), has_vector, title)
    ranked = [(row[0], 1.0 - float(row[1])) for row in rows]
    return ArmResult(ranked, len(rows), True, counts, info=info, outside=(outside_count, outside))
