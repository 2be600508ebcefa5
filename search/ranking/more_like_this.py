"""More like this: a text's telling words as one OR query, and the keyword arm that ranks it.

`similar` asks it of a stored record, `check_duplicates` of a draft: the
title's words plus the rarest words of the rest of the text that some record
shares, ranked as search ranks a query (search.ranking.keyword), but with neither a
total nor facets to estimate.
"""

import re

from search.indexing.embeddings import without_boilerplate
from search.query.parse import ParsedQuery, parse
from search.query.scope import Scope
from search.ranking import facets, keyword, statistics
from search.ranking.rows import ArmResult

CANDIDATES = 1000  # matches of the rarest terms the keyword arm scores, at most
BODY_TERMS = 40  # the rarest words of the text after the title that join the keyword query
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")


def arm(parsed: ParsedQuery, scope: Scope, depth: int, n: float, df: dict[str, float]) -> ArmResult:
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
    source = keyword.Source(f"{scope.words('%(candidates)s::tsquery')} AND", {"candidates": plan.candidates}, "")
    ranked, info, _ = keyword.rank_candidates(plan, scope, source, CANDIDATES, depth)
    return ArmResult(ranked, len(ranked), False, facets.empty(), plan.match, info)


def terms(
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
    words = dict.fromkeys(_WORD.findall(without_boilerplate(body or "")))
    body_terms = {
        t.tsquery: t for t in parse(" ".join(list(words)[:150]) + " ", "simple").units if t.tsquery not in title_terms
    }
    n, df = statistics.document_frequencies([*title_terms, *body_terms], products)
    shared = sorted((q for q in body_terms if df[q] >= shared_by), key=lambda q: df[q])
    chosen = list(title_terms.values()) + [body_terms[q] for q in shared[:BODY_TERMS]]
    return ParsedQuery(text=title, groups=[chosen]), (n, df), set(title_terms)
