"""`similar()`: the records nearest to one record (never itself), as likely duplicates.

A SimilarPlan over search.ranking.pipeline: the keyword arm is the record's
more-like-this OR query (search.ranking.more_like_this), the semantic arm its own
vector; the ranked list itself is the answer (search.operations.respond).
"""

import json

from search import db
from search.contract import NotFound, SearchResponse, SimilarRequest
from search.indexing.embeddings import active_model_id, unavailable_reason
from search.indexing.health import index_health
from search.operations.respond import Found, included, respond
from search.query.parse import parse
from search.query.scope import Scope, build_scope
from search.ranking import config, more_like_this, pipeline, semantic
from search.ranking.rows import ArmResult


def similar(request: SimilarRequest, user=None) -> SearchResponse:
    """Records nearest to `request.key` (never itself): likely duplicates of a bug.

    Semantic arm: the record's own vector. Keyword arm: its title words and
    the rarest words of its text, OR-ed and ranked like a search.
    """
    scope = build_scope(request, user)
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT d.id, d.title, d.body, d.embedding::text, d.embedding_model FROM search_document d "
            f"WHERE d.key = %(key)s AND ({scope.where})",
            {"key": request.key, **scope.params},
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound.no_record(request.key)
    plan = SimilarPlan(request, *row)
    scope = scope.narrowed("d.id <> %(scope_itself)s", scope_itself=plan.doc_id)
    ranking = pipeline.rank(plan, scope)
    # Counted only for a response that shows it (the plan reads its own record's vector instead).
    health = index_health(scope.products) if included(request, "index") else None
    # The words a hit's `why` names: those of the keyword arm's query (the title's and the telling body words).
    words = plan.parsed.terms if ranking.mode != "semantic" else parse(plan.title + " ", "simple").terms
    found = Found(
        request.key,
        ranking.mode,
        "simple",
        ranking.candidates,
        ranking.keyword,
        ranking.semantic,
        listed=True,
        degraded=ranking.degraded,
        words=words,
    )
    return respond(request, found, health, ranking.keyword.query if ranking.keyword else "")


class SimilarPlan(pipeline.Plan):
    """A stored record's neighbours: its more-like-this OR query and its own vector;
    a record with its very title boosted (the likeliest twin). Its own list is the
    answer (counted and faceted as listed)."""

    fill_awaiting = False

    def __init__(self, request: SimilarRequest, doc_id, title, body, vector_text, model_id):
        self.mode, self.key, self.depth = request.mode, request.key, config.current().arm_depth
        self.doc_id, self.title, self.body = doc_id, title, body
        self.vector_text, self.model_id = vector_text, model_id
        self.boost_title = title
        self.parsed = None

    def semantic_unavailable(self, scope: Scope) -> str | None:
        if self.vector_text is not None and self.model_id == active_model_id():
            return None
        return unavailable_reason() or f"{self.key} has no current embedding yet (run `manage.py embed`)"

    def keyword_arm(self, scope: Scope) -> ArmResult | None:
        # Body words at least one other record shares (the record has them too, so 2).
        self.parsed, (n, df), _ = more_like_this.terms(self.title, self.body, scope.products, shared_by=2)
        return more_like_this.arm(self.parsed, scope, self.depth, n, df) if self.parsed.terms else None

    def semantic_arm(self, scope: Scope, keyword_result: ArmResult | None, depth: int) -> ArmResult:
        keyword_query = keyword_result.query if keyword_result else ""
        return semantic.nearest(json.loads(self.vector_text), self.model_id, scope, depth, keyword_query)
