"""Bring-your-own embedder through sentence-transformers (the ``rerank`` extra, which
brings torch): ``embed_provider = "sentence-transformers"`` with ``embed_model_path``
naming a local sentence-transformers folder. For a folder the ONNX embedder can read
(``embed/onnx.py``, no torch) that one is lighter; this one runs any pipeline the
library can (Dense layers, custom pooling).

The model loads on the first embed, from the folder only (``local_files_only``: never a
download), on the CPU. The model id is ``sentence-transformers:<folder>@<hash>`` over
every file of the folder (names and bytes), so a changed model is another model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kredenc.config import Settings
from kredenc.errors import InvalidInput, MissingExtra, ProviderError
from kredenc.providers.embed.base import Embedder, Vectors, l2_normalise
from kredenc.providers.model_folder import content_hash

SETTING = "embed_model_path"


class SentenceTransformersEmbedder(Embedder):
    """A local sentence-transformers folder, embedded with the library."""

    def __init__(self, path: Path | str | None, *, batch_size: int = 32) -> None:
        if path is None or not str(path).strip():
            raise InvalidInput(
                f"no model folder is configured ({SETTING} is empty)",
                f"set {SETTING} to a local sentence-transformers folder",
            )
        root = Path(path).expanduser()
        if not (root / "modules.json").is_file() and not (root / "config.json").is_file():
            raise InvalidInput(
                f"{root} is not a sentence-transformers folder (no modules.json or config.json)",
                f"set {SETTING} to the folder model.save(DIR) wrote",
            )
        self.root = root.resolve()
        self.batch_size = batch_size
        files = [p for p in self.root.rglob("*") if p.is_file()]
        self.model_id = (
            f"sentence-transformers:{self.root.name}@{content_hash(self.root, files)[:16]}"
        )
        self._model: Any = None
        self._lock = threading.Lock()
        self.dim = self._dim_hint()

    @classmethod
    def from_settings(cls, settings: Settings) -> SentenceTransformersEmbedder:
        """The ``sentence-transformers`` plugin: the folder of ``embed_model_path``."""
        return cls(settings.embed_model_path)

    def _dim_hint(self) -> int:
        import json

        for name, key in (
            ("1_Pooling/config.json", "word_embedding_dimension"),
            ("config.json", "hidden_size"),
        ):
            path = self.root / name
            if path.is_file():
                try:
                    value = json.loads(path.read_text(encoding="utf-8")).get(key)
                except (OSError, ValueError, AttributeError):
                    value = None
                if isinstance(value, int) and value > 0 and not (self.root / "2_Dense").exists():
                    return value
        dim = self._load().get_sentence_embedding_dimension()
        if not isinstance(dim, int):
            raise ProviderError(f"{self.root}: the model states no embedding size")
        return dim

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError:
                    raise MissingExtra("the sentence-transformers embedder", "rerank") from None
                try:
                    self._model = SentenceTransformer(
                        str(self.root), device="cpu", local_files_only=True
                    )
                except (OSError, ValueError) as exc:
                    raise ProviderError(
                        f"cannot load {self.root}: {exc}".splitlines()[0],
                        "check that the folder is a complete sentence-transformers model",
                    ) from exc
        return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput(
                "embed() takes a sequence of texts, not one string", "use embed_one(text)"
            )
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return l2_normalise(np.asarray(vectors, dtype=np.float32))
