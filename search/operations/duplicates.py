"""`check_duplicates`: the bugs a draft most likely duplicates, before it is filed.

The draft is ranked as `similar` ranks a stored bug (search.operations.similar; both
over search.ranking.pipeline),
from text that is not in the database: the keyword arm ORs the draft's title
words with the rarest words of the rest of its text that some bug shares;
the semantic arm is the draft's own vector, embedded as a stored bug's text
is (its title, then description, actual and expected result, steps and
environment); search's fusion and the documented boosts order them.
Nothing is written: the draft is read, ranked and forgotten.

Each returned bug says why it came up (the draft's words it shares, the
cosine similarity of the two texts) and how likely it is a duplicate:
`confidence`, 0-1, and its band. docs/duplicates.md has the formula, the
bands and what they were measured to mean on the judged sets.
"""

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from search import db
from search.contract import DuplicateCandidate, DuplicateCheckRequest, DuplicateCheckResponse, DuplicateWhy, SearchError
from search.indexing.embeddings import active_model_id, document_text
from search.indexing.health import index_health
from search.operations import keys
from search.query import traces
from search.query.parse import distinct_words
from search.query.scope import Filters, Scope, build_scope, named_keys, not_named
from search.ranking import config, fusion, layout, more_like_this, pipeline, semantic, statistics
from search.ranking.rows import ArmResult

# The draft's text the model reads: about 90 tokens of its 256 (docs/duplicates.md: the
# model's time is most of a check's, and what a report says first says most of it).
EMBED_CHARS = 400
# Drafts' embeddings, beside the request's thread (a model call touches no database).
_EMBEDDER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="draft-embedding")
SHARED_WORDS_SHOWN = {"concise": 5, "full": 8}


def check_duplicates(request: DuplicateCheckRequest, user=None) -> DuplicateCheckResponse:
    products = (request.product,) if request.product else ()
    filters = Filters(entities=("bug",), products=products, feature=request.feature, names=(("products", "product"),))
    scope = build_scope(filters, user)
    draft_feature = _draft_feature(request.draft_feature, scope)
    plan = DraftPlan(request.title, request.body(), request.mode, config.current().arm_depth)
    ranking = pipeline.rank(plan, scope)
    page = ranking.order()[: request.limit]
    return DuplicateCheckResponse(
        mode=ranking.mode,
        results=_explained(page, plan, ranking, request.include_scores, request.detail == "full", draft_feature),
        degraded=ranking.degraded,
    )


def _draft_feature(value: str | None, scope: Scope) -> str | None:
    """The key of the feature the draft names it is about (by key or name, among those the caller
    may see), or a SearchError that says which are: a typo would silently take every high band."""
    if value is None:
        return None
    found, unknown = named_keys("feature", [value], scope.products)
    if unknown is not None:
        raise SearchError(f"draft_feature: {not_named('feature', unknown, scope.products)}.")
    return found[0]


class DraftPlan(pipeline.Plan):
    """A draft's ranking, as `similar` ranks a stored bug: its more-like-this
    OR query and its own vector (embedded beside the request's thread while
    the database ranks its words), fused, a bug with the draft's very title
    boosted. No feedback pass and no per-query arm weights, unlike search():
    on the duplicate task (docs/duplicates.md) neither helped a draft.

    `shared_by`: see more_like_this.terms (2 when the draft is a stored record
    the scope leaves out, as search_eval asks). After `start`, `terms` holds the
    keyword query's terms, most telling (rarest) first, `idf` each one's idf and
    `in_title` the tsqueries of the draft's title words: what explains a candidate."""

    def __init__(self, title: str, body: str, mode: str, depth: int, shared_by: int = 1):
        # A stack trace pasted into the text is read as its top frames (search.query.traces.condensed).
        self.title, self.body, self.mode, self.depth = title, traces.condensed(body), mode, depth
        self.shared_by = shared_by
        self.boost_title = title
        self.embedding = None

    def semantic_unavailable(self, scope: Scope) -> str | None:
        return pipeline.no_vectors_reason(index_health(scope.products))

    def start(self, mode: str, scope: Scope) -> None:
        if mode != "keyword":
            # The model reads the draft while the database ranks its words.
            text = document_text(self.title, self.body)[:EMBED_CHARS]
            self.embedding = _EMBEDDER.submit(semantic.query_vector, text)
        self.parsed, (self.n, self.df), self.in_title = more_like_this.terms(
            self.title, self.body, scope.products, self.shared_by
        )
        self.terms = sorted(self.parsed.terms, key=lambda t: self.df[t.tsquery])
        self.idf = {t.tsquery: statistics.idf(self.n, self.df[t.tsquery]) for t in self.terms}

    def keyword_arm(self, scope: Scope) -> ArmResult | None:
        return more_like_this.arm(self.parsed, scope, self.depth, self.n, self.df) if self.terms else None

    def semantic_arm(self, scope: Scope, keyword_result: ArmResult | None, depth: int) -> ArmResult:
        return semantic.for_vector(self.embedding.result(), scope, depth, keyword_result)


# -- why, and how likely ------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """What says a candidate duplicates the draft (docs/duplicates.md): the cosine
    similarity of the two texts (None without vectors), the idf-weighted share of the
    draft's title words the candidate's title holds, and whether the titles are the same."""

    similarity: float | None
    title_overlap: float
    same_title: bool


def evidence(
    page: list[fusion.Candidate], plan: "DraftPlan", ranking: pipeline.Ranking, draft_feature: str | None = None
) -> list[tuple[dict, Evidence, float]]:
    """Each candidate of `page` still there: its row (_page_rows), its evidence and its confidence.
    A reporter reads the list top down, so a candidate never shows more confidence (nor a
    higher band) than the one ranked above it; its evidence (`why`) is its own."""
    if not page:
        return []
    vector = ranking.semantic.vector if ranking.semantic else None
    rows = _page_rows([c.id for c in page], [t.tsquery for t in plan.terms], vector)
    wanted = fusion.normalize_title(plan.title)
    title_idf = sum(plan.idf[t.tsquery] for t in plan.terms if t.tsquery in plan.in_title) or 1.0
    found, ceiling = [], 1.0
    for candidate in page:
        row = rows.get(candidate.id)
        if row is None:  # deleted since it was ranked
            continue
        in_title = sum(
            plan.idf[t.tsquery]
            for t in plan.terms
            if t.tsquery in row["shared"] and t.tsquery in plan.in_title and t.tsquery in row["title_shared"]
        )
        seen = Evidence(row["similarity"], in_title / title_idf, fusion.normalize_title(row["title"]) == wanted)
        elsewhere = draft_feature is not None and row["feature"] not in (None, draft_feature)
        ceiling = min(_confidence(seen, elsewhere), ceiling)
        found.append((row | {"candidate": candidate}, seen, ceiling))
    return found


def _explained(
    page: list[fusion.Candidate],
    plan: DraftPlan,
    ranking: pipeline.Ranking,
    include_scores: bool,
    full: bool,
    draft_feature: str | None = None,
):
    results = []
    for row, seen, confidence in evidence(page, plan, ranking, draft_feature):
        shared = [t for t in plan.terms if t.tsquery in row["shared"]]
        results.append(
            DuplicateCandidate(
                kind="bug" if full else None,
                key=row["key"],
                id=row["record_id"] if full else None,
                title=row["title"],
                product=row["product"],
                feature=row["feature"] if full else None,
                status=row["status"],
                severity=row["severity"] if full else None,
                created_at=row["created_at"] if full else None,
                duplicate_of=row["duplicate_of"],
                rank=len(results) + 1 if full else None,
                confidence=round(confidence, 3),
                band=band(confidence),
                why=DuplicateWhy(
                    shared_words=distinct_words(t.shown.lower() for t in shared)[
                        : SHARED_WORDS_SHOWN["full" if full else "concise"]
                    ],
                    semantic_similarity=None if seen.similarity is None else round(seen.similarity, 3),
                    same_title=seen.same_title,
                ),
                scores=fusion.score_detail(row["candidate"]) if include_scores else None,
            )
        )
    return results


def _confidence(seen: Evidence, elsewhere: bool = False) -> float:
    """0-1 from the two kinds of evidence (docs/duplicates.md): the cosine
    similarity of the texts and the idf-weighted share of the draft's title
    words in the bug's title (1 for the same title). Either can make it
    likely; only both together make it high: texts at least HIGH_SIMILARITY
    alike and a title holding at least HIGH_TITLE_SHARE of the draft's, in
    the draft's feature when it names one (`elsewhere`: the bug is of
    another). A title alone, or a look-alike of another feature, is medium at
    most: on the demo's bugs such "high" ones were right 0.41 of the time."""
    overlap = 1.0 if seen.same_title else seen.title_overlap
    if seen.similarity is None:
        return min(overlap, BELOW_HIGH)
    semantic_part = min(max((seen.similarity - 0.3) / 0.6, 0.0), 1.0)
    confidence = 1 - math.sqrt((1 - semantic_part) * (1 - overlap))
    agreeing = seen.similarity >= HIGH_SIMILARITY and overlap >= HIGH_TITLE_SHARE and not elsewhere
    return confidence if agreeing else min(confidence, BELOW_HIGH)


# Measured on drafts of two shapes (bench/duplicate_bands.py, docs/duplicates.md): the share
# of right candidates falls from band to band on each, and "high" is >= 0.9 right where the
# truth is known (the demo's generator).
BANDS = (("high", 0.7), ("medium", 0.45))
HIGH_SIMILARITY = 0.84  # cosine of the two texts
HIGH_TITLE_SHARE = 0.7  # of the draft's title words, by idf
BELOW_HIGH = 0.699  # where evidence of one kind alone stops


def band(confidence: float) -> str:
    return next((name for name, floor in BANDS if confidence >= floor), "low")


def _page_rows(ids: list[int], terms: list[str], vector) -> dict[int, dict]:
    """The page's bugs: their fields, which of the draft's terms each has (in
    all its text and in its title) and its cosine similarity to the draft, in
    one statement (and their keys in a second on a distributed index)."""
    literal = None if vector is None else semantic.vector_literal(vector)
    # The product's, feature's and duplicated bug's keys joined in; on a
    # distributed index read after (keys.name), the ids in their place meanwhile.
    distributed = layout.distributed()
    if distributed:
        named, joined = "d.product_id, d.feature_id, CASE WHEN d.kind = 'bug' THEN d.record_id END", ""
    else:
        named = "p.key, f.key, m.key"
        joined = """LEFT JOIN backlog_product p ON p.id = d.product_id
            LEFT JOIN backlog_feature f ON f.id = d.feature_id
            LEFT JOIN backlog_bug b ON d.kind = 'bug' AND b.id = d.record_id
            LEFT JOIN backlog_bug m ON m.id = b.duplicate_of_id"""
    with db.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT d.id, d.record_id, d.key, d.title, d.status, d.severity, d.created_at,
                   ARRAY(SELECT t FROM unnest(%(terms)s::text[]) t WHERE d.search_vector @@ t::tsquery),
                   ARRAY(SELECT t FROM unnest(%(terms)s::text[]) t
                         WHERE ts_filter(d.search_vector, '{{a}}') @@ t::tsquery),
                   CASE WHEN %(vector)s::text IS NOT NULL AND d.embedding_model = %(model)s
                        THEN 1 - (d.embedding <=> %(vector)s::halfvec) END,
                   {named}
            FROM search_document d
            {joined}
            WHERE d.id = ANY(%(ids)s)
            """,
            {"ids": ids, "terms": terms, "vector": literal, "model": active_model_id()},
        )
        columns = (
            "record_id key title status severity created_at shared title_shared similarity product feature duplicate_of"
        ).split()
        rows = {row[0]: dict(zip(columns, row[1:], strict=True)) for row in cursor.fetchall()}
    if distributed:
        keys.name(rows.values(), product="product", feature="feature", duplicate_of="duplicate_of")
    for row in rows.values():
        row["shared"], row["title_shared"] = set(row["shared"]), set(row["title_shared"])
    return rows
