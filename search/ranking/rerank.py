"""The second stage: a reranker reorders the fused list's best records.

Off unless SEARCH_RERANKER names one; no PyPI package ships reranker
weights that run offline (docs/benchmarks.md has the search), so the slot
holds the hosted kind: any endpoint that speaks the `/rerank` shape Cohere,
Jina, Voyage and Hugging Face's text-embeddings-inference (with
`--json-api cohere`) share:

    POST {SEARCH_RERANK_API_URL}/rerank
    {"model": ..., "query": ..., "documents": [...], "top_n": n}
    -> {"results": [{"index": i, "relevance_score": s}, ...]}

A local model plugs in as another class with the same `rerank` method and a
branch in `build_reranker`. The reranker reads each record's title and the
start of its text (rerank_chars), for the best rerank_depth records of one
search (both in search.ranking.config); a reranker that fails leaves the
fused order as it was (logged), so search never fails for it.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Protocol

from django.conf import settings
from django.core.signals import setting_changed

from search import db
from search.ranking import config
from search.ranking.fusion import Candidate

logger = logging.getLogger(__name__)


class RerankError(Exception):
    """The reranker is misconfigured or did not answer; the message names the setting to check."""


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, higher is better."""


class HostedReranker:
    """POST ``{api_url}/rerank``; standard library only."""

    def __init__(self, api_url: str, model: str, api_key: str = "", timeout: float = 5.0) -> None:
        if not api_url:
            raise RerankError("SEARCH_RERANK_API_URL is not set (e.g. https://api.example.com/v1).")
        self.endpoint = api_url.rstrip("/") + "/rerank"
        self.model = model
        self.name = f"hosted:{model or 'default'}"
        self._api_key = api_key
        self.timeout = float(timeout)

    def __repr__(self) -> str:  # never show the key
        return f"HostedReranker(endpoint={self.endpoint!r}, model={self.model!r})"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        body = {"query": query, "documents": list(documents), "top_n": len(documents)}
        if self.model:
            body["model"] = self.model
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.endpoint, data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
            scores = [float("-inf")] * len(documents)
            for row in payload["results"]:
                scores[int(row["index"])] = float(row["relevance_score"])
        except urllib.error.HTTPError as exc:
            raise RerankError(
                f"{self.endpoint} answered HTTP {exc.code}; check SEARCH_RERANK_API_URL and the key"
            ) from None
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            message = f"{self.endpoint} gave no usable answer ({type(exc).__name__}: {exc})"
            raise RerankError(message.replace(self._api_key, "***") if self._api_key else message) from None
        return scores


def build_reranker() -> Reranker | None:
    kind = (settings.SEARCH_RERANKER or "").strip().lower()
    if not kind:
        return None
    if kind == "hosted":
        return HostedReranker(
            settings.SEARCH_RERANK_API_URL,
            settings.SEARCH_RERANK_MODEL,
            settings.SEARCH_RERANK_API_KEY,
            settings.SEARCH_RERANK_TIMEOUT,
        )
    raise RerankError(f"SEARCH_RERANKER must be empty (off) or 'hosted', not {kind!r}.")


_reranker: Reranker | None = None
_built = False
_lock = threading.Lock()


def get_reranker() -> Reranker | None:
    """The configured reranker (None: off), built once; every search asks."""
    global _reranker, _built
    if not _built:
        with _lock:
            if not _built:
                _reranker, _built = build_reranker(), True
    return _reranker


def _forget(*, setting: str, **_) -> None:
    global _built
    if setting.startswith("SEARCH_RERANK"):
        with _lock:
            _built = False


setting_changed.connect(_forget, dispatch_uid="search.ranking.rerank.forget")


def apply(candidates: dict[int, Candidate], query: str, pinned: int | None = None) -> None:
    """Reorder the best rerank_depth candidates by the reranker's
    scores (in `boosts["rerank"]`), above every other candidate; `pinned`
    (a record the query names by its key) stays first. Nothing changes when
    no reranker is configured or it fails."""
    try:
        reranker = get_reranker()
        if reranker is None or not candidates:
            return  # off (the default): no work on the search's path
        ordered = sorted(candidates.values(), key=lambda c: (-c.score, c.id))
        top = [c for c in ordered if c.id != pinned][: config.current().rerank_depth]
        texts = _texts([c.id for c in top])
        present = [c for c in top if c.id in texts]
        scores = reranker.rerank(query, [texts[c.id] for c in present])
    except RerankError as exc:
        logger.warning("Reranking skipped, the fused order stands: %s", exc)
        return
    read = {c.id for c in present} | {pinned}
    floor = max((c.score for c in ordered if c.id not in read), default=0.0)
    reordered = sorted(zip(present, scores, strict=True), key=lambda pair: (-pair[1], pair[0].id))
    for position, (candidate, score) in enumerate(reordered):
        candidate.boosts["rerank"] = round(score, 6)
        # Above every record the reranker did not read, in the reranker's
        # order; deterministic, so cursors page through the same order.
        candidate.score = floor + 1.0 + (len(reordered) - position) / len(reordered)
    if pinned is not None and pinned in candidates:
        candidates[pinned].score = floor + 3.0


def _texts(ids: list[int]) -> dict[int, str]:
    chars = config.current().rerank_chars
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT id, title || E'\\n' || left(coalesce(body, ''), %(chars)s) FROM search_document "
            "WHERE id = ANY(%(ids)s)",
            {"ids": ids, "chars": chars},
        )
        return dict(cursor.fetchall())
