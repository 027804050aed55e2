"""The rerank step of a search: rescore the fused hits with a rerank model
(``providers.rerank``) and order them by it; each hit keeps its legs' and fused scores
beside the rerank score. The answer loop's retrieve reranks its chunks once per ask with
the same two steps (:func:`pair_texts`, :func:`apply`), its scores through the cache."""

from __future__ import annotations

from collections.abc import Sequence

from kredenc.providers.rerank import Reranker
from kredenc.records import Hit
from kredenc.retrieve.fuse import normalised


def rerank(query: str, hits: list[Hit], reranker: Reranker, *, mix: float = 1.0) -> list[Hit]:
    """``hits`` rescored by ``reranker`` (``hit.rerank``), best first. ``mix`` 1: by the
    rerank score alone (also ``hit.score``); below 1, by ``(1 - mix) * score + mix *
    rerank``, each min-max scaled over ``hits`` (the search's ``hit.score``: fused, with
    the coverage bonus in the top 12; ties keep the search's order)."""
    if not hits:
        return hits
    return apply(hits, reranker.score(query, pair_texts(hits)), mix=mix)


def apply(hits: list[Hit], scores: Sequence[float], *, mix: float = 1.0) -> list[Hit]:
    """``hits`` given the reranker's ``scores`` (``hit.rerank``), best first, ordered as
    :func:`rerank` orders them for ``mix``."""
    if not hits:
        return hits
    values = [float(v) for v in scores]
    fused = normalised(list(enumerate(h.score for h in hits)))
    late = normalised(list(enumerate(values)))
    for i, (hit, value) in enumerate(zip(hits, values, strict=True)):
        hit.rerank = value
        hit.score = value if mix >= 1.0 else (1.0 - mix) * fused[i] + mix * late[i]
    return sorted(hits, key=lambda h: -h.score)


def pair_texts(hits: Sequence[Hit]) -> list[str]:
    """What the reranker reads of each hit: its title, a line break, its text."""
    return [f"{h.title}\n{h.text}" if h.title else h.text for h in hits]
