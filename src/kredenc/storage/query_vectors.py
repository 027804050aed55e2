"""Query vectors, remembered: the store's ``embed_query``.

An LRU of the last ``size`` queries' vectors (a search embeds its query once; a
repeated query is a dictionary read). :meth:`QueryVectors.prime` embeds several
queries that are known together in one run of the model instead of one run each
(the answer loop's verify knows its evidence searches' queries before it runs them):
each run of a small model costs a fixed part beside its tokens, so six short queries
take about three quarters of the time together that they take apart.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from kredenc.storage.index.vectors import F32

__all__ = ["QueryVectors"]


class QueryVectors:
    """``vectors(text)``: the query's vector, from the LRU or ``one(text)``;
    ``vectors.prime(texts)``: those not held, embedded by ``many(texts)`` in one call."""

    def __init__(
        self,
        one: Callable[[str], F32],
        many: Callable[[Sequence[str]], F32] | None,
        size: int,
    ) -> None:
        self._one = one
        self._many = many
        self.size = size
        self._held: OrderedDict[str, F32] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> F32:
        with self._lock:
            found = self._held.get(text)
            if found is not None:
                self._held.move_to_end(text)
                return found
        vector = self._one(text)  # outside the lock: queries of other threads go on
        self._keep({text: vector})
        return vector

    def prime(self, texts: Sequence[str]) -> None:
        """Embed the ``texts`` not held yet in one call (one by one without a batch
        function), so that the searches for them find their vectors here."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._held))
        if not missing:
            return
        if self._many is None or len(missing) == 1:
            for text in missing:
                self(text)
            return
        vectors = self._many(missing)
        self._keep(dict(zip(missing, vectors, strict=True)))

    def clear(self) -> None:
        """Forget every vector held (a benchmark that times the embedding clears it
        before each query)."""
        with self._lock:
            self._held.clear()

    def __contains__(self, text: object) -> bool:
        with self._lock:
            return text in self._held

    def _keep(self, found: dict[str, F32]) -> None:
        with self._lock:
            for text, vector in found.items():
                self._held[text] = vector
                self._held.move_to_end(text)
            while len(self._held) > self.size:
                self._held.popitem(last=False)
