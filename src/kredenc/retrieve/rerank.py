"""The rerank step of a search: rescore the fused hits with a rerank model
(``providers.rerank``) and order them by it; each hit keeps its legs' and fused scores
beside the rerank score. The answer loop's retrieve reranks its chunks once per ask with
the same two steps (:func:`pair_texts`, :func:`apply`), its scores through the cache."""

from __future__ import annotations

from collections.abc import Sequence

from kredenc.providers.rerank import Reranker
from kredenc.records import Hit


def rerank(query: str, hits: list[Hit], reranker: Reranker) -> list[Hit]:
    """``hits`` rescored by ``reranker`` (``hit.rerank``, also ``hit.score``), best first."""
    if not hits:
        return hits
    return apply(hits, reranker.score(query, pair_texts(hits)))


def apply(hits: list[Hit], scores: Sequence[float]) -> list[Hit]:
    """``hits`` given ``scores`` (``hit.rerank``, also ``hit.score``), best first."""
    for hit, value in zip(hits, scores, strict=True):
        hit.rerank = float(value)
        hit.score = float(value)
    return sorted(hits, key=lambda h: -(h.rerank or 0.0))


def pair_texts(hits: Sequence[Hit]) -> list[str]:
    """What the reranker reads of each hit: its title, a line break, its text."""
    return [f"{h.title}\n{h.text}" if h.title else h.text for h in hits]
