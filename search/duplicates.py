"""`check_duplicates`: the bugs a draft most likely duplicates, before it is filed.

The draft is ranked as `similar` ranks a stored bug (search.engine.similar),
from text that is not in the database: the keyword arm ORs the draft's title
words with the rarest words of the rest of its text that some bug shares;
the semantic arm is the draft's own vector, embedded as a stored bug's text
is (its title, then description, actual and expected result, steps and
environment); reciprocal rank fusion and the documented boosts order them.
Nothing is written: the draft is read, ranked and forgotten.

Each returned bug says why it came up (the draft's words it shares, the
cosine similarity of the two texts) and how likely it is a duplicate:
`confidence`, 0-1, and its band. docs/duplicates.md has the formula, the
bands and what they were measured to mean on the judged sets.
"""

import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace

from django.conf import settings

from . import db, facets, fusion, keyword, semantic, statistics
from .contract import (
    DuplicateCandidate,
    DuplicateCheckRequest,
    DuplicateCheckResponse,
    DuplicateWhy,
    SemanticUnavailable,
)
from .embeddings import EmbeddingError, active_model_id, document_text, unavailable_reason
from .health import index_health
from .query import ParsedQuery, Term, parse
from .rows import ArmResult
from .scope import Scope, build_scope

# The draft's text the model reads: about 90 tokens of its 256 (docs/duplicates.md: the
# model's time is most of a check's, and what a report says first says most of it).
EMBED_CHARS = 400
# Drafts' embeddings, beside the request's thread (a model call touches no database).
_EMBEDDER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="draft-embedding")
CANDIDATES = 1000  # matches of the rarest terms the keyword arm scores, at most
BODY_TERMS = 40  # the rarest words of the text after the title that join the keyword query
SHARED_WORDS_SHOWN = 8
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")


@dataclass
class Ranked:
    """A draft's candidates, best first, and what explains them."""

    candidates: list[fusion.Candidate]
    mode: str
    terms: list[Term]  # the keyword query's terms, most telling (rarest) first
    idf: dict[str, float]  # a term's tsquery -> its idf
    in_title: set[str]  # the tsqueries of the draft's title words
    vector: object = None  # the draft's vector, when the semantic arm ran
    degraded: dict[str, str] | None = None


def check_duplicates(request: DuplicateCheckRequest, user=None) -> DuplicateCheckResponse:
    filters = SimpleNamespace(
        entities=["bug"], products=[request.product] if request.product else None, feature=request.feature
    )
    scope = build_scope(filters, user)
    ranked = rank_draft(request.title, request.body(), scope, request.mode, settings.SEARCH_ARM_DEPTH)
    page = ranked.candidates[: request.limit]
    return DuplicateCheckResponse(
        mode=ranked.mode,
        results=_explained(page, ranked, request.title, request.include_scores),
        degraded=ranked.degraded,
    )


def rank_draft(title: str, body: str, scope: Scope, mode: str, depth: int, shared_by: int = 1) -> Ranked:
    """Every candidate the arms found for the draft `title` + `body`, ranked.
    SemanticUnavailable when mode=semantic cannot run; hybrid then answers by keyword.
    `shared_by`: see more_like_this (2 when the draft is a stored record the
    scope leaves out, as search_eval asks)."""
    degraded = None
    if mode != "keyword" and index_health(scope.products).embedded == 0:
        why = unavailable_reason() or "no record has an embedding of the active model yet (run `manage.py embed`)"
        if mode == "semantic":
            raise SemanticUnavailable(f"mode=semantic cannot run: {why}; or use mode=keyword.")
        mode, degraded = "keyword", {"semantic": why}
    embedding = None
    if mode in ("hybrid", "semantic"):
        # The model reads the draft while the database ranks its words.
        embedding = _EMBEDDER.submit(semantic.query_vector, document_text(title, body)[:EMBED_CHARS])
    parsed, (n, df), in_title = more_like_this(title, body, scope.products, shared_by)
    terms = sorted(parsed.terms, key=lambda t: df[t.tsquery])
    idf = {t.tsquery: statistics.idf(n, df[t.tsquery]) for t in terms}
    keyword_result = semantic_result = None
    if mode in ("hybrid", "keyword") and terms:
        keyword_result = keyword_arm(parsed, scope, depth, n, df)
    if embedding is not None:
        try:
            semantic_depth = min(depth, settings.SEARCH_SEMANTIC_DEPTH)
            semantic_result = semantic.for_vector(embedding.result(), scope, semantic_depth, keyword_result)
        except EmbeddingError as exc:
            if mode == "semantic":
                raise SemanticUnavailable(f"mode=semantic cannot run: {exc}; or use mode=keyword.") from exc
            mode, degraded = "keyword", {"semantic": str(exc)}
    # No feedback pass and no per-query arm weights, unlike search(): on the
    # duplicate task (docs/duplicates.md) neither helped a draft.
    candidates = fusion.fuse(keyword_result, semantic_result)
    fusion.boost(candidates, title, None, hybrid=bool(keyword_result and semantic_result))
    ordered = sorted(candidates.values(), key=lambda c: (-c.score, c.id))
    vector = semantic_result.vector if semantic_result else None
    return Ranked(ordered, mode, terms, idf, in_title, vector, degraded)


def keyword_arm(parsed: ParsedQuery, scope: Scope, depth: int, n: float, df: dict[str, float]) -> ArmResult:
    """The draft's OR query, ranked as search ranks one (keyword.rank), but
    with neither a total nor facets to estimate: past CANDIDATES expected
    matches, only the matches of its rarest terms (at most CANDIDATES of
    them) are scored. A draft's duplicate shares its rare words; a bug
    sharing only common ones is the semantic arm's to find."""
    terms = parsed.units
    weighted = [(t.tsquery, statistics.idf(n, df[t.tsquery])) for t in terms]
    expected = keyword.expected_any(terms, df, n)
    plan = keyword.Plan(parsed.any_of(), weighted, keyword.rarer_terms(terms, df, CANDIDATES), expected)
    if expected <= CANDIDATES or not plan.candidates:
        return keyword.rank(plan, scope, depth)
    source = keyword.Source("d.search_vector @@ %(candidates)s::tsquery AND", {"candidates": plan.candidates}, "")
    ranked, info, _ = keyword.rank_candidates(plan, scope, source, CANDIDATES, depth)
    return ArmResult(ranked, len(ranked), False, facets.empty(), plan.match, info)


def more_like_this(
    title: str, body: str, products: tuple[int, ...] | None, shared_by: int
) -> tuple[ParsedQuery, tuple[float, dict[str, float]], set[str]]:
    """The title's words plus the body's most telling words, as one OR query,
    the statistics of its terms, and the title words' tsqueries.

    Telling: the rarest body words that at least `shared_by` records have (a
    stored record counts itself: similar() asks for 2; a draft is in no
    record, so 1).
    """
    # A trailing space: no word here is being typed, so none is a prefix.
    title_terms = {t.tsquery: t for t in parse(title + " ", "simple").units}
    words = dict.fromkeys(_WORD.findall(body or ""))
    body_terms = {
        t.tsquery: t for t in parse(" ".join(list(words)[:150]) + " ", "simple").units if t.tsquery not in title_terms
    }
    n, df = statistics.document_frequencies([*title_terms, *body_terms], products)
    shared = sorted((q for q in body_terms if df[q] >= shared_by), key=lambda q: df[q])
    chosen = list(title_terms.values()) + [body_terms[q] for q in shared[:BODY_TERMS]]
    return ParsedQuery(text=title, groups=[chosen]), (n, df), set(title_terms)


# -- why, and how likely ------------------------------------------------------------------------


def _explained(page: list[fusion.Candidate], ranked: Ranked, title: str, include_scores: bool):
    if not page:
        return []
    rows = _page_rows([c.id for c in page], ranked)
    wanted = fusion.normalize_title(title)
    title_idf = sum(ranked.idf[t.tsquery] for t in ranked.terms if t.tsquery in ranked.in_title) or 1.0
    results = []
    ceiling = 1.0  # the confidence of the candidate ranked above: none shows more (see below)
    for candidate in page:
        row = rows.get(candidate.id)
        if row is None:  # deleted since it was ranked
            continue
        shared = [t for t in ranked.terms if t.tsquery in row["shared"]]
        in_title = sum(
            ranked.idf[t.tsquery] for t in shared if t.tsquery in ranked.in_title and t.tsquery in row["title_shared"]
        )
        same_title = fusion.normalize_title(row["title"]) == wanted
        similarity = row["similarity"]
        # Show what ranks: a reporter reads the list top down, so a candidate never
        # shows more confidence (nor a higher band) than the one ranked above it;
        # its evidence (`why`) is its own.
        confidence = ceiling = min(_confidence(similarity, in_title / title_idf, same_title), ceiling)
        results.append(
            DuplicateCandidate(
                kind="bug",
                key=row["key"],
                id=row["record_id"],
                title=row["title"],
                product=row["product"],
                feature=row["feature"],
                status=row["status"],
                severity=row["severity"],
                created_at=row["created_at"],
                duplicate_of=row["duplicate_of"],
                rank=len(results) + 1,
                confidence=round(confidence, 3),
                band=band(confidence),
                why=DuplicateWhy(
                    shared_words=list(dict.fromkeys(t.text.lower() for t in shared))[:SHARED_WORDS_SHOWN],
                    semantic_similarity=None if similarity is None else round(similarity, 3),
                    same_title=same_title,
                ),
                scores=fusion.score_detail(candidate) if include_scores else None,
            )
        )
    return results


def _confidence(similarity: float | None, title_overlap: float, same_title: bool) -> float:
    """0-1 from the two kinds of evidence (docs/duplicates.md): the cosine
    similarity of the texts and the idf-weighted share of the draft's title
    words in the bug's title."""
    if same_title:
        return 1.0
    if similarity is None:
        return title_overlap
    semantic_part = min(max((similarity - 0.3) / 0.6, 0.0), 1.0)
    return 1 - math.sqrt((1 - semantic_part) * (1 - title_overlap))


# Measured on the judged sets (docs/duplicates.md): the share of labelled
# duplicates falls from band to band on each of them.
BANDS = (("high", 0.7), ("medium", 0.45))


def band(confidence: float) -> str:
    return next((name for name, floor in BANDS if confidence >= floor), "low")


def _page_rows(ids: list[int], ranked: Ranked) -> dict[int, dict]:
    """The page's bugs: their fields, which of the draft's terms each has (in
    all its text and in its title) and its cosine similarity to the draft, in
    one statement."""
    terms = [t.tsquery for t in ranked.terms]
    literal = None if ranked.vector is None else semantic.vector_literal(ranked.vector)
    with db.cursor() as cursor:
        cursor.execute(
            """
            SELECT d.id, d.record_id, d.key, d.title, p.key, f.key, d.status, d.severity, d.created_at, m.key,
                   ARRAY(SELECT t FROM unnest(%(terms)s::text[]) t WHERE d.search_vector @@ t::tsquery),
                   ARRAY(SELECT t FROM unnest(%(terms)s::text[]) t
                         WHERE ts_filter(d.search_vector, '{a}') @@ t::tsquery),
                   CASE WHEN %(vector)s::text IS NOT NULL AND d.embedding_model = %(model)s
                        THEN 1 - (d.embedding <=> %(vector)s::halfvec) END
            FROM search_document d
            LEFT JOIN backlog_product p ON p.id = d.product_id
            LEFT JOIN backlog_feature f ON f.id = d.feature_id
            LEFT JOIN backlog_bug b ON d.kind = 'bug' AND b.id = d.record_id
            LEFT JOIN backlog_bug m ON m.id = b.duplicate_of_id
            WHERE d.id = ANY(%(ids)s)
            """,
            {"ids": ids, "terms": terms, "vector": literal, "model": active_model_id()},
        )
        columns = (
            "record_id key title product feature status severity created_at duplicate_of shared title_shared similarity"
        ).split()
        rows = {row[0]: dict(zip(columns, row[1:], strict=True)) for row in cursor.fetchall()}
    for row in rows.values():
        row["shared"], row["title_shared"] = set(row["shared"]), set(row["title_shared"])
    return rows
