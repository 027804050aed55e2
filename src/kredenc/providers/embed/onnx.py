"""Bring-your-own embedder: an ONNX export in a local folder, on onnxruntime + tokenizers
(no torch). ``embed_provider = "onnx"`` with ``embed_model_path = "/models/my-model"``.

The folder is read by :class:`~kredenc.providers.model_folder.ModelFolder`: its
``model.onnx`` (or a sentence-transformers folder's ``onnx/model.onnx``), its
``tokenizer.json``, the pooling of ``1_Pooling/config.json`` (mean without one) and the
length of ``sentence_bert_config.json``. The graph's ``sentence_embedding`` output is
used as it is when it has one; otherwise its token vectors (``last_hidden_state``) are
pooled here. Vectors are L2-normalised. The model id is ``onnx:<folder>@<hash>``, from
the content of the defining files, so a store built with one export refuses another
(``kredenc reembed`` moves a store between models).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.providers.embed.base import Embedder, Vectors, l2_normalise
from kredenc.providers.model_folder import ModelFolder, OnnxModel
from kredenc.providers.onnx_runtime import pool

SETTING = "embed_model_path"


class OnnxEmbedder(Embedder):
    """An embedder from a local ONNX folder; the graph loads on the first embed."""

    def __init__(
        self,
        path: Path | str | None,
        *,
        threads: int = 2,
        batch_size: int = 32,
        max_tokens: int | None = None,
    ) -> None:
        if threads < 1 or batch_size < 1:
            raise InvalidInput("threads and batch_size must be at least 1")
        self.folder = ModelFolder.find(path, setting=SETTING)
        self.folder.refuse_extra_modules()
        self.pooling = self.folder.pooling()
        self.batch_size = batch_size
        length = max_tokens if max_tokens is not None else self.folder.max_tokens()
        self.model = OnnxModel(
            self.folder, threads=threads, max_tokens=length, what="the ONNX embedder"
        )
        self.model_id = self.folder.model_id("onnx")
        self._output: str | None = None
        hint = self.folder.dim_hint()
        self.dim = hint if hint is not None else self._probe_dim()

    @classmethod
    def from_settings(cls, settings: Settings) -> OnnxEmbedder:
        """The ``onnx`` plugin: the folder of ``embed_model_path``, ``embed_threads``."""
        return cls(settings.embed_model_path, threads=settings.embed_threads)

    def __repr__(self) -> str:
        return f"OnnxEmbedder({str(self.folder.root)!r}, pooling={self.pooling!r})"

    def describe(self) -> str:
        return f"{self.model_id} ({self.folder.root}, {self.pooling} pooling)"

    def embed(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise InvalidInput(
                "embed() takes a sequence of texts, not one string", "use embed_one(text)"
            )
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise InvalidInput(f"text {bad} is {type(texts[bad]).__name__}, not str")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        output = self._pick_output()
        for rows, batch in self.model.batches(list(texts), self.batch_size):
            pooled = pool(self.model.run(output, batch), batch.mask, self.pooling)
            if pooled.shape[1] != self.dim:
                raise InvalidInput(
                    f"{self.folder.model} gives {pooled.shape[1]}-d vectors, but the folder's "
                    f"config says {self.dim}",
                    "fix word_embedding_dimension in 1_Pooling/config.json (or hidden_size)",
                )
            out[rows] = pooled
        return l2_normalise(out)

    def _pick_output(self) -> str:
        """``sentence_embedding`` (2-d, already pooled) when the graph has it; else the
        token vectors: ``last_hidden_state`` or the first 3-d output."""
        if self._output is not None:
            return self._output
        outputs = self.model.outputs()
        names = {name: shape for name, shape in outputs}
        if len(names.get("sentence_embedding", [])) == 2:
            self._output = "sentence_embedding"
        elif len(names.get("last_hidden_state", [])) == 3:
            self._output = "last_hidden_state"
        else:
            found = next((n for n, s in outputs if len(s) == 3), None)
            if found is None:
                raise InvalidInput(
                    f"{self.folder.model} has no token-vector output (outputs: {names})",
                    "export the model for feature extraction (last_hidden_state)",
                )
            self._output = found
        return self._output

    def _probe_dim(self) -> int:
        """No config states the size: ask the graph (its output shape, else one run)."""
        shape = dict(self.model.outputs()).get(self._pick_output(), [])
        if shape and isinstance(shape[-1], int) and shape[-1] > 0:
            return int(shape[-1])
        batch = next(iter(self.model.batches(["probe"], 1)))[1]
        return int(self.model.run(self._pick_output(), batch).shape[-1])
