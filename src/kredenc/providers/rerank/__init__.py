"""Rerank models behind one interface (the search step that uses them is
``retrieve.rerank``).

The default is no reranker: ``kredenc eval`` on the dev data decides whether one
earns its place in the default path (docs/benchmarks.md). A cross-encoder
(sentence-transformers) is available as an optional extra, from a local path only:
nothing is ever downloaded.

Rerankers are plugins of the ``kredenc.rerankers`` group (:mod:`kredenc.plugins`); the
cross-encoder is the built-in ``cross-encoder``, an ONNX one ``onnx``, and ``maxsim``
late interaction over the bundled MiniLM's token vectors (``rerank.maxsim``). A reranker
is named as ``NAME`` or ``NAME:ARGUMENT`` (``cross-encoder:/models/ms-marco``); a name
no plugin has is taken for a cross-encoder's model path.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kredenc import plugins
from kredenc.config import Settings
from kredenc.errors import InvalidInput, MissingExtra, shown

log = logging.getLogger(__name__)


class Reranker(ABC):
    """Scores (query, passage) pairs; higher is more relevant."""

    name: str

    @abstractmethod
    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order."""

    def share(self, embedder: object) -> None:  # noqa: B027 (optional hook)
        """Offered the store's embedder once it is made; a reranker built on the same
        model (``maxsim``) scores with its session, so the model loads once. Others
        ignore it."""


class CrossEncoderReranker(Reranker):
    """A sentence-transformers CrossEncoder loaded from a local path (offline)."""

    def __init__(self, model: str, *, max_length: int = 512, batch_size: int = 32) -> None:
        self.name = f"cross-encoder:{model}"
        self.model_path = model
        self.max_length = max_length
        self.batch_size = batch_size
        self._model: Any = None

    @classmethod
    def from_settings(cls, settings: Settings) -> CrossEncoderReranker:
        """The ``cross-encoder`` plugin: ``rerank = "cross-encoder:PATH"`` (or a bare path)."""
        name, colon, path = settings.rerank.strip().partition(":")
        path = path.strip() if colon and name == "cross-encoder" else settings.rerank.strip()
        if not path or path == "cross-encoder":
            raise InvalidInput(
                "the cross-encoder reranker needs a local model path",
                "rerank = 'cross-encoder:/path/to/model'",
            )
        return cls(path)

    def _load(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import CrossEncoder
            except ImportError:
                raise MissingExtra("the cross-encoder reranker", "rerank") from None
            if not Path(self.model_path).exists():
                raise InvalidInput(
                    f"reranker model {self.model_path!r} is not a local path",
                    "download the model once and pass its directory (kredenc stays offline)",
                )
            try:
                self._model = CrossEncoder(
                    self.model_path, max_length=self.max_length, local_files_only=True
                )
            except (OSError, ValueError) as exc:
                why = " ".join(str(exc).split())[:200]
                raise InvalidInput(
                    f"{self.model_path} holds no cross-encoder model the library can load ({why})",
                    "point rerank at a sentence-transformers CrossEncoder folder (config.json "
                    "with its model_type, the weights, the tokenizer)",
                ) from exc
        return self._model

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        model = self._load()
        scores = model.predict(
            [(query, p) for p in passages], batch_size=self.batch_size, show_progress_bar=False
        )
        return [float(s) for s in scores]


def make_reranker(spec: str | None, settings: Settings | None = None) -> Reranker | None:
    """The reranker ``spec`` names (see the module's docstring); ``None``/``"none"``: none.

    The plugin builds itself from ``settings`` with ``rerank`` set to ``spec``.
    """
    if spec is None or spec.strip().lower() in ("", "none"):
        return None
    spec = spec.strip()
    name = spec.partition(":")[0]
    if not plugins.is_known(plugins.RERANKERS, name):
        if ":" not in spec and "/" not in spec and "\\" not in spec and not Path(spec).exists():
            # a bare word that names no reranker and no folder: a mistyped name
            raise InvalidInput(
                f"unknown reranker {shown(spec)}",
                f"use one of {', '.join(plugins.names(plugins.RERANKERS))} (as NAME or "
                "NAME:PATH, e.g. onnx:/models/ms-marco), or a cross-encoder model's folder",
            )
        name = "cross-encoder"  # a bare model path, the shorthand of the built-in
    base = settings if settings is not None else Settings.model_construct()
    configured = base.model_copy(update={"rerank": spec})
    return plugins.build(plugins.RERANKERS, name, configured, Reranker)
