"""A record as the embedding model reads it, and the process-wide provider.

`document_text` is what is embedded for a record; `get_provider` is the
provider settings choose (EMBEDDING_PROVIDER), built once. What a provider
is, its settings and the two there are: search.indexing.provider.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from search.indexing.provider import DEFAULT_LOCAL_VARIANT, DEFAULT_THREADS, EmbeddingError, EmbeddingProvider
from search.query import traces

logger = logging.getLogger(__name__)

# What the model is spared: links and issue-tracker markup ({code},
# {noformat}, ---- rules) spend its 256-token window on nothing.
_LINK = re.compile(r"\[?https?://\S+")
_MARKUP = re.compile(r"[-=*_#|]{3,}|\{code[^}]*\}|\{noformat\}")
# A camel-case word reads as the words it is made of: S3AInputStream as
# "S3AInput Stream", as the keyword index splits it (search/indexing/sql.py).
_CAMEL_CASE = re.compile(r"([a-z])([A-Z])")

# Tracker boilerplate: what a report carries whatever its bug, which spends the window and pulls
# every report's vector toward the same point. A browser's user agent (Bugzilla's form opens every
# report with one), a line that only holds a build id or commit, a log line's time stamp.
_USER_AGENT = re.compile(
    r"(?:\buser[- ]?agent\b[ \t]*:?[ \t]*)?\b(?:Mozilla|Opera|Dalvik)/\d[\d.]*[ \t]*\([^()\n]*\)"
    r"(?:[ \t]+(?:[\w.-]+/[\w.+-]+|\([^()\n]*\)))*",
    re.IGNORECASE,
)
_ID_LINE = re.compile(r"^[ \t]*[A-Za-z][\w ]{0,24}:[ \t]*(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}[ \t]*$", re.MULTILINE)
_TIMESTAMP = re.compile(
    r"\[?\b\d{2,4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[ ]?[+-]\d{2}:?\d{2})?\b\]?"
)


def without_boilerplate(text: str) -> str:
    """``text`` without the tracker boilerplate above: user agents and lines that only hold a build id
    or commit. The keyword arm's more-like-this query (search.ranking.more_like_this) reads a report
    through it too, so a platform's words do not pass for what two reports share."""
    return _ID_LINE.sub(" ", _USER_AGENT.sub(" ", text))


def _as_words(text: str) -> str:
    text = traces.condensed(without_boilerplate(text))
    text = _MARKUP.sub(" ", _LINK.sub(" ", _TIMESTAMP.sub(" ", text)))
    return _CAMEL_CASE.sub(r"\1 \2", text).strip()


def document_text(title: str, *parts: str | None) -> str:
    """The text embedded for one record: its title, then each non-empty part, one per line,
    as words (no links, markup or tracker boilerplate, a stack trace as its top frames' names
    (search.query.traces.condensed), camel case split).

    The title goes first because the local model reads only the first 256 tokens.
    """
    pieces = [_as_words(piece) for piece in [title, *parts] if piece]
    return "\n".join(piece for piece in pieces if piece)


def _threads_setting() -> int:
    value = getattr(settings, "EMBEDDING_THREADS", DEFAULT_THREADS)
    try:
        threads = int(value)
    except (TypeError, ValueError):
        threads = -1
    if threads < 0:
        raise EmbeddingError(f"EMBEDDING_THREADS must be 0 (one per core) or a positive integer, not {value!r}.")
    return threads


# --------------------------------------------------------------------------------------------------
# The process-wide provider


def build_provider() -> EmbeddingProvider:
    """A new provider from Django settings (see the module docstring for the names)."""
    kind = str(getattr(settings, "EMBEDDING_PROVIDER", "local") or "local").strip().lower()
    if kind == "local":
        from search.indexing.local_model import LocalEmbeddingProvider

        return LocalEmbeddingProvider(
            variant=getattr(settings, "EMBEDDING_LOCAL_VARIANT", None) or DEFAULT_LOCAL_VARIANT,
            cache_dir=getattr(settings, "EMBEDDING_MODEL_CACHE", None) or None,
            threads=_threads_setting(),
        )
    if kind == "openai":
        from search.indexing.hosted_model import OpenAIEmbeddingProvider

        return OpenAIEmbeddingProvider(
            api_url=getattr(settings, "EMBEDDING_API_URL", "") or "",
            model=getattr(settings, "EMBEDDING_MODEL", "") or "",
            dimensions=getattr(settings, "EMBEDDING_DIMENSIONS", None),
            api_key=getattr(settings, "EMBEDDING_API_KEY", "") or "",
            timeout=getattr(settings, "EMBEDDING_API_TIMEOUT", 30) or 30,
            batch_size=getattr(settings, "EMBEDDING_API_BATCH", 64) or 64,
        )
    raise EmbeddingError(f"EMBEDDING_PROVIDER must be 'local' or 'openai', not {kind!r}.")


_provider: EmbeddingProvider | None = None
_provider_lock = threading.Lock()


def get_provider() -> EmbeddingProvider:
    """The process-wide provider, built from settings on first use (thread-safe)."""
    global _provider
    provider = _provider
    if provider is None:
        with _provider_lock:
            if _provider is None:
                _provider = build_provider()
                logger.info("Embedding provider: %s", _provider.model_id)
            provider = _provider
    return provider


def active_model_id() -> str | None:
    """The active provider's model id, or None when no provider can be built
    (a misconfigured EMBEDDING_PROVIDER): keyword search reads this to tell
    current vectors apart, and must not fail for the embedder."""
    try:
        return get_provider().model_id
    except EmbeddingError:
        return None  # unavailable_reason says why, where a search reports it


def unavailable_reason() -> str | None:
    """Why no embedding model can run (logged), or None when one can."""
    try:
        get_provider()
    except EmbeddingError as exc:
        logger.warning("No embedding provider: %s", exc)
        return f"no embedding model can run: {exc}"
    return None


def reset_provider() -> None:
    """Forget the provider, so the next :func:`get_provider` reads the settings again."""
    global _provider
    with _provider_lock:
        _provider = None


get_provider.cache_clear = reset_provider  # type: ignore[attr-defined]  # functools-style alias


def _settings_changed(*, setting: str, **_: Any) -> None:
    """``override_settings`` of any EMBEDDING_* setting swaps the provider too."""
    if setting.startswith("EMBEDDING_"):
        reset_provider()


setting_changed.connect(_settings_changed, dispatch_uid="search.indexing.embeddings.reset_provider")
