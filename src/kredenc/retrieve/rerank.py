"""The rerank step of a search: rescore the fused hits with a rerank model
(``providers.rerank``) and order them by it; each hit keeps its legs' and fused scores
beside the rerank score."""

from __future__ import annotations

from kredenc.providers.rerank import Reranker
from kredenc.records import Hit


def rerank(query: str, hits: list[Hit], reranker: Reranker, *, mix: float = 1.0) -> list[Hit]:
    """``hits`` rescored by ``reranker`` (``hit.rerank``), best first. ``mix`` 1: by the
    rerank score alone (also ``hit.score``); below 1, by ``(1 - mix) * fused + mix *
    rerank``, each min-max scaled over ``hits`` (``hit.score``; ties keep the fused
    order)."""
    if not hits:
        return hits
    scores = reranker.score(query, [_text(h) for h in hits])
    fused = _scaled([h.score for h in hits])
    late = _scaled(scores)
    for i, (hit, value) in enumerate(zip(hits, scores, strict=True)):
        hit.rerank = value
        hit.score = value if mix >= 1.0 else (1.0 - mix) * fused[i] + mix * late[i]
    return sorted(hits, key=lambda h: -h.score)


def _scaled(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [(v - lo) / (hi - lo) if hi > lo else 0.0 for v in values]


def _text(hit: Hit) -> str:
    return f"{hit.title}\n{hit.text}" if hit.title else hit.text
