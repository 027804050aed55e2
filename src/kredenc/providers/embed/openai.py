"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, llama.cpp,
Ollama, LM Studio, OpenAI itself), over a synchronous ``httpx`` client."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx
import numpy as np
from pydantic import SecretStr

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed.base import Embedder, Vectors, l2_normalise
from kredenc.providers.http_errors import one_line, server_message, snippet

log = logging.getLogger(__name__)

_HINTS = {
    401: "check the API key",
    403: "check the API key and its permissions",
    404: "check base_url (it usually ends in /v1) and the model name",
    413: "lower batch_size",
    429: "the server is rate limiting: slow down or raise its limits",
}
_FORMAT_HINT = "is base_url an OpenAI-compatible /v1 endpoint?"


class OpenAIEmbedder(Embedder):
    """Vectors from ``POST {base_url}/embeddings``, L2-normalised, float32.

    ``dim`` may be given; otherwise the first response fixes it (reading ``dim`` before
    any embed asks the server once). Thread-safe; call :meth:`close` when done.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | SecretStr | None = None,
        dim: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidInput(
                f"base_url must start with http:// or https://, got {base_url!r}",
                "e.g. http://127.0.0.1:8000/v1",
            )
        if not isinstance(model, str) or not model:
            raise InvalidInput("model must be a non-empty model name")
        if dim is not None and dim < 1:
            raise InvalidInput(f"dim must be positive, got {dim}")
        if batch_size < 1 or timeout <= 0:
            raise InvalidInput("batch_size and timeout must be positive")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        self.model = model
        self.model_id = f"openai:{model}"
        self.api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        self.timeout = timeout
        self.batch_size = batch_size
        self._dim = dim
        self._dim_lock = threading.Lock()
        headers = {"Accept": "application/json"}
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key.get_secret_value()}"
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout))

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
        self._client.close()

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
        if self._client.is_closed:
            raise self._fail("the embedder was closed", "make a new OpenAIEmbedder")
        payload = {"model": self.model, "input": batch}
        try:
            response = self._client.post(self.url, json=payload)
        except httpx.TimeoutException as exc:
            raise self._fail(
                f"timed out after {self.timeout:g} s", "raise timeout or lower batch_size"
            ) from exc
        except httpx.ConnectError as exc:
            raise self._fail(
                f"cannot connect ({one_line(str(exc))})", "is the server running? check base_url"
            ) from exc
        except httpx.HTTPError as exc:
            raise self._fail(
                f"request failed: {type(exc).__name__}: {one_line(str(exc))}",
                "check base_url and the server's logs",
            ) from exc
        if not response.is_success:
            raise self._fail(
                f"HTTP {response.status_code}: {server_message(response)}",
                _HINTS.get(response.status_code, "check the server's logs"),
            )
        try:
            body = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._fail(
                f"response is not JSON: {snippet(response.text)!r}", _FORMAT_HINT
            ) from exc
        return self._check_dim(self._vectors(body, len(batch)))

    def _vectors(self, body: Any, expected: int) -> Vectors:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._fail("response has no 'data' list", _FORMAT_HINT)
        if len(data) != expected:
            raise self._fail(
                f"asked for {expected} embeddings, got {len(data)}",
                "the server may cap the batch size: lower batch_size",
            )
        rows: list[Any] = [None] * expected
        for pos, item in enumerate(data):
            index = item.get("index", pos) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < expected or rows[index] is not None:
                raise self._fail(f"data[{pos}] has a missing, duplicate or bad index", _FORMAT_HINT)
            rows[index] = item.get("embedding")
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._fail(
                "embeddings are not equal-length lists of numbers",
                "base64 encoding is not supported; use float",
            ) from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise self._fail(
                "embeddings are not equal-length lists of finite numbers", _FORMAT_HINT
            )
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
        return ProviderError(f"embeddings endpoint {self.url}: {what}", hint)
