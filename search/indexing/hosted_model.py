"""The hosted embedding provider: any OpenAI-compatible ``/embeddings`` endpoint.

Chosen by settings alone (search.indexing.embeddings.build_provider); the standard
library speaks to it.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from search.indexing.provider import EmbeddingError, clip_text, l2_normalise

logger = logging.getLogger(__name__)


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
        self.dimensions = _positive(dimensions, "EMBEDDING_DIMENSIONS")
        self._api_key = api_key or ""
        self.timeout = _positive(timeout, "EMBEDDING_API_TIMEOUT", float, "a positive number of seconds")
        self.batch_size = _positive(batch_size, "EMBEDDING_API_BATCH")

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
                f"(the index stores vectors of search.models.EMBEDDING_DIMENSIONS, 384: a model of another size "
                f"needs a migration of search_document.embedding)."
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


def _positive(value: Any, setting: str, parse=int, what: str = "a positive integer"):
    """``value`` parsed and above 0 (settings may arrive as strings from the environment)."""
    try:
        number = parse(value)
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise EmbeddingError(f"{setting} must be {what}, not {value!r}.")
    return number
