"""Late interaction with the model that ships: ColBERT-style MaxSim over
all-MiniLM-L6-v2's token vectors (issue 17). ``rerank = "maxsim"`` (or
``"maxsim:TOKENS"``, the word pieces kept per passage: 1..254, default 254, all that
MiniLM reads beside ``[CLS]`` and ``[SEP]``) as the setting,
the ``search(rerank=...)`` argument or ``kredenc search --rerank``.

The score of a passage is the sum over the query's word pieces of the best cosine to
any of the passage's: ``Σ_q max_d cos(q, d)``, over the model's last hidden states
before mean pooling, each L2-normalised (:meth:`MiniLMEmbedder.token_vectors`). Nothing
is stored: the candidates' token vectors are computed when a search reranks them (one
forward pass per candidate, so it is opt-in and outside the recall budget;
docs/benchmarks.md). A store's own MiniLM embedder is shared (:meth:`share`), so the
model loads once; without one the reranker loads its own copy on the first score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.providers.embed.minilm import MiniLMEmbedder
from kredenc.providers.rerank import Reranker

DEFAULT_TOKENS = 254  # MiniLM's 256 word pieces less [CLS] and [SEP]
SETTING = "rerank = 'maxsim' or 'maxsim:TOKENS' (word pieces per passage, 1..254)"


class MaxSimReranker(Reranker):
    """Sum over query tokens of the best cosine to a passage token (MiniLM's vectors)."""

    def __init__(self, *, tokens: int = DEFAULT_TOKENS, threads: int = 2) -> None:
        if not 1 <= tokens <= DEFAULT_TOKENS:
            raise InvalidInput(
                f"maxsim keeps 1..{DEFAULT_TOKENS} word pieces per passage, got {tokens}", SETTING
            )
        self.tokens = tokens
        self.name = "maxsim" if tokens == DEFAULT_TOKENS else f"maxsim:{tokens}"
        self._threads = threads
        self._embedder: MiniLMEmbedder | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> MaxSimReranker:
        """The ``maxsim`` plugin: ``rerank = "maxsim"`` or ``"maxsim:TOKENS"``."""
        _, colon, arg = settings.rerank.strip().partition(":")
        if not colon:
            return cls(threads=settings.embed_threads)
        try:
            tokens = int(arg.strip())
        except ValueError:
            raise InvalidInput(
                f"maxsim takes a number of word pieces, got {arg.strip()!r}", SETTING
            ) from None
        return cls(tokens=tokens, threads=settings.embed_threads)

    def share(self, embedder: object) -> None:
        """Score with ``embedder``'s session and tokenizer when it is MiniLM."""
        if isinstance(embedder, MiniLMEmbedder):
            self._embedder = embedder

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        model = self._model()
        (q,) = model.token_vectors([query], self.tokens)
        docs = model.token_vectors(list(passages), self.tokens)
        return [maxsim(q, d) for d in docs]

    def _model(self) -> MiniLMEmbedder:
        if self._embedder is None:
            self._embedder = MiniLMEmbedder(intra_op_num_threads=self._threads)
        return self._embedder


def maxsim(query: np.ndarray, passage: np.ndarray) -> float:
    """``Σ_q max_d q·d`` of two sets of unit token vectors (rows); 0 when either is empty."""
    if len(query) == 0 or len(passage) == 0:
        return 0.0
    return float((query @ passage.T).max(axis=1).sum())
