"""The embedding seam: one small interface every provider implements."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from kredenc.errors import InvalidInput
from kredenc.providers.embed.coalesce import Coalescer, Vectors

__all__ = ["Embedder", "Vectors", "l2_normalise"]

#: Guards the first making of an embedder's query coalescer (subclasses need not call
#: ``Embedder.__init__``, so it is made on the first query).
_COALESCER_LOCK = threading.Lock()


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    ``model_id`` and ``dim`` are recorded in the store; opening a store with an
    embedder whose id or dimension differs is refused.
    """

    model_id: str
    dim: int
    #: Whether concurrent queries run as one batch (:attr:`query_coalescer`): for a model
    #: on this machine's cores; a remote endpoint sets it False (its requests overlap),
    #: and so does a local model whose queries run on one thread each (MiniLM's
    #: default: concurrent one-thread runs use every core, one batch would use one).
    coalesce_queries: bool = True

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
        """A search query's vector: its row of :meth:`embed_queries`. Queries from several
        threads at once run as one batch (:attr:`query_coalescer`, unless
        :attr:`coalesce_queries` is False); a query alone runs at once."""
        if not isinstance(text, str):
            raise InvalidInput(f"the query is {type(text).__name__}, not str")
        if not self.coalesce_queries:
            vec: Vectors = self.embed_queries([text])[0]
            return vec
        return self.query_coalescer(text)

    @property
    def query_coalescer(self) -> Coalescer:
        """What :meth:`embed_query` runs through (:mod:`~kredenc.providers.embed.coalesce`,
        over :meth:`embed_queries`; made on the first query); its ``runs`` and ``queries``
        count the batches."""
        coalescer: Coalescer | None = self.__dict__.get("_query_coalescer")
        if coalescer is None:
            with _COALESCER_LOCK:
                coalescer = self.__dict__.setdefault(
                    "_query_coalescer", Coalescer(self.embed_queries)
                )
        return coalescer

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Queries' vectors in one run: :meth:`embed`, unless a provider has a faster graph
        for queries that agrees with its documents' (MiniLM's 8-bit copy)."""
        return self.embed(texts)


def l2_normalise(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return out
