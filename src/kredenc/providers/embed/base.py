"""The embedding seam: one small interface every provider implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    ``model_id`` and ``dim`` are recorded in the store; opening a store with an
    embedder whose id or dimension differs is refused.
    """

    model_id: str
    dim: int

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return an array of shape ``(len(texts), dim)``, rows L2-normalised."""

    def embed_one(self, text: str) -> Vectors:
        vec: Vectors = self.embed([text])[0]
        return vec

    def describe(self) -> str:
        """The model as a startup line names it."""
        return self.model_id

    def embed_query(self, text: str) -> Vectors:
        """A search query's vector. The same as :meth:`embed_one` unless a provider has a
        faster graph for queries that agrees with its documents' (MiniLM's 8-bit copy)."""
        return self.embed_one(text)


def l2_normalise(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return out
