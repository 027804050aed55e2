"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, llama.cpp,
Ollama, LM Studio, OpenAI itself): the request shape and the parsing of the reply; the
wire is :mod:`kredenc.providers.openai_compat`'s."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import numpy as np
from pydantic import SecretStr

from kredenc.config import Settings
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed.base import Embedder, Vectors, l2_normalise
from kredenc.providers.openai_compat import FORMAT_HINT, OpenAICompatClient

log = logging.getLogger(__name__)

PATH = "/embeddings"


class OpenAIEmbedder(Embedder):
    """Vectors from ``POST {base_url}/embeddings``, L2-normalised, float32.

    ``dim`` may be given; otherwise the first response fixes it (reading ``dim`` before
    any embed asks the server once). Requests go through
    :class:`~kredenc.providers.openai_compat.OpenAICompatClient`, which retries
    (an embedding request is safe to repeat). Thread-safe; call :meth:`close` when done.
    Concurrent queries go as concurrent requests, not coalesced: the server batches.
    """

    coalesce_queries = False

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | SecretStr | None = None,
        dim: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 64,
        max_retries: int = 2,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInput("model must be a non-empty model name")
        if dim is not None and dim < 1:
            raise InvalidInput(f"dim must be positive, got {dim}")
        if batch_size < 1 or timeout <= 0:
            raise InvalidInput("batch_size and timeout must be positive")
        self._http = OpenAICompatClient(
            base_url,
            api_key=api_key,
            label="embeddings endpoint",
            timeout=timeout,
            hints={413: "lower batch_size"},
            timeout_hint="raise timeout or lower batch_size",
            max_retries=max_retries,
        )
        self.url = self._http.url(PATH)
        self.model = model
        self.model_id = f"openai:{model}"
        self.timeout = timeout
        self.batch_size = batch_size
        self._dim = dim
        self._dim_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIEmbedder:
        """The ``openai`` plugin: ``embed_url``, ``embed_model`` and ``embed_api_key``."""
        if not settings.embed_url or not settings.embed_model:
            raise InvalidInput(
                "embed_provider 'openai' needs embed_url and embed_model",
                "set them in kredenc.toml or KREDENC_EMBED_URL and KREDENC_EMBED_MODEL "
                "(e.g. http://127.0.0.1:8000/v1)",
            )
        return cls(settings.embed_url, settings.embed_model, api_key=settings.embed_api_key)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self.url!r}, model={self.model!r}, dim={self._dim})"

    @property
    def dim(self) -> int:
        """The vector size; asks the server once when it was not given nor seen yet."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        if value < 1:
            raise InvalidInput(f"dim must be positive, got {value}")
        self._dim = value

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput(
                "embed() takes a sequence of texts, not one string", "use embed_one(text)"
            )
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        parts = [
            self._request(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        return l2_normalise(np.concatenate(parts, axis=0))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _request(self, batch: list[str]) -> Vectors:
        body = self._http.post_json(
            PATH, {"model": self.model, "input": batch}, safe_to_repeat=True
        )
        return self._check_dim(self._vectors(body, len(batch)))

    def _vectors(self, body: Any, expected: int) -> Vectors:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._fail("response has no 'data' list", FORMAT_HINT)
        if len(data) != expected:
            raise self._fail(
                f"asked for {expected} embeddings, got {len(data)}",
                "the server may cap the batch size: lower batch_size",
            )
        rows: list[Any] = [None] * expected
        for pos, item in enumerate(data):
            index = item.get("index", pos) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < expected or rows[index] is not None:
                raise self._fail(f"data[{pos}] has a missing, duplicate or bad index", FORMAT_HINT)
            rows[index] = item.get("embedding")
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._fail(
                "embeddings are not equal-length lists of numbers",
                "base64 encoding is not supported; use float",
            ) from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise self._fail("embeddings are not equal-length lists of finite numbers", FORMAT_HINT)
        return matrix

    def _check_dim(self, matrix: Vectors) -> Vectors:
        got = int(matrix.shape[1])
        with self._dim_lock:
            if self._dim is None:
                log.info("embedding dimension of %s at %s is %d", self.model, self.url, got)
                self._dim = got
        if got != self._dim:
            raise self._fail(
                f"returned {got}-d vectors, expected {self._dim}-d",
                "the model behind the endpoint changed; check the model name",
            )
        return matrix

    def _fail(self, what: str, hint: str) -> ProviderError:
        return self._http.fail(PATH, what, hint)
