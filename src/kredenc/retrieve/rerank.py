"""The rerank step of a search: rescore the fused hits with a rerank model
(``providers.rerank``) and order them by it; each hit keeps its legs' and fused scores
beside the rerank score."""

from __future__ import annotations

from kredenc.providers.rerank import Reranker
from kredenc.records import Hit


def rerank(query: str, hits: list[Hit], reranker: Reranker) -> list[Hit]:
    """``hits`` rescored by ``reranker`` (``hit.rerank``, also ``hit.score``), best first."""
    if not hits:
        return hits
    scores = reranker.score(query, [_text(h) for h in hits])
    for hit, value in zip(hits, scores, strict=True):
        hit.rerank = value
        hit.score = value
    return sorted(hits, key=lambda h: -(h.rerank or 0.0))


def _text(hit: Hit) -> str:
    return f"{hit.title}\n{hit.text}" if hit.title else hit.text
