"""Bring-your-own cross-encoder: an ONNX export in a local folder, on onnxruntime +
tokenizers (no torch). ``rerank = "onnx:/models/my-cross-encoder"`` (the setting, the
``search(rerank=...)`` argument or ``kredenc search --rerank``); the answer loop's
retrieve role reranks with it when it is the ``rerank`` setting.

The folder is read as the ONNX embedder's is (``providers/model_folder.py``). Each
(query, passage) pair is tokenized as a pair ([CLS] query [SEP] passage [SEP], token
types 0 then 1), cut to ``sentence_bert_config.json``'s ``max_seq_length`` (else the
tokenizer's truncation, else 512; ``max_tokens`` may cut lower) longest part first,
and scored by the graph's
``logits``: one column is the score; with two (not relevant, relevant) the score is
their difference, the log-odds of relevant.

With ``rerank_quantized`` (the default) the folder's int8 copy scores when it has one
(``model_quantized.onnx`` beside ``model.onnx``: :data:`~kredenc.providers.model_folder.
QUANTIZED`); its cost per pair against the full graph's: docs/benchmarks.md, "With a
reranker configured".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.providers.model_folder import ModelFolder, OnnxModel
from kredenc.providers.rerank import Reranker

SETTING = "rerank = 'onnx:PATH'"


class OnnxCrossEncoder(Reranker):
    """A cross-encoder from a local ONNX folder; the graph loads on the first score."""

    def __init__(
        self,
        path: Path | str | None,
        *,
        threads: int = 2,
        batch_size: int = 16,
        quantized: bool = False,
        max_tokens: int | None = None,
    ) -> None:
        self.folder = ModelFolder.find(path, setting=SETTING, quantized=quantized)
        self.name = f"onnx:{self.folder.root}"
        self.batch_size = batch_size
        limit = self.folder.max_tokens()
        self.model = OnnxModel(
            self.folder,
            threads=threads,
            max_tokens=min(limit, max_tokens) if max_tokens else limit,
            what="the ONNX cross-encoder",
        )
        self._output: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> OnnxCrossEncoder:
        """The ``onnx`` reranker plugin: ``rerank = "onnx:PATH"``."""
        _, colon, path = settings.rerank.strip().partition(":")
        if not colon or not path.strip():
            raise InvalidInput(
                "the onnx reranker needs a local model folder",
                "rerank = 'onnx:/path/to/cross-encoder' (a folder with model.onnx and "
                "tokenizer.json)",
            )
        return cls(
            path.strip(), threads=settings.embed_threads, quantized=settings.rerank_quantized
        )

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        output = self._pick_output()
        scores = [0.0] * len(passages)
        pairs = [(query, p) for p in passages]
        for rows, batch in self.model.batches(pairs, self.batch_size):
            logits = self.model.run(output, batch)
            shape = tuple(logits.shape)
            logits = logits.reshape(len(rows), -1)
            if logits.shape[1] == 1:
                values = logits[:, 0]
            elif logits.shape[1] == 2:
                values = logits[:, 1] - logits[:, 0]
            else:
                raise InvalidInput(
                    f"{self.folder.model} gives outputs of shape {shape} for {len(rows)} "
                    "pairs; a cross-encoder for reranking gives 1 logit a pair (or 2: not "
                    "relevant, relevant)",
                    "point rerank at a relevance cross-encoder (e.g. an ms-marco one)",
                )
            for row, value in zip(rows, values, strict=True):
                scores[int(row)] = float(value)
        return scores

    def _pick_output(self) -> str:
        """``logits`` when the graph names one, else its first output."""
        if self._output is None:
            names = [name for name, _ in self.model.outputs()]
            self._output = "logits" if "logits" in names else names[0]
        return self._output
