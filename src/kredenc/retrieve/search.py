"""Hybrid search: lexical and dense legs, fused, hits read from the log.

Each leg returns ``leg_k`` (50) candidates. Fusion follows the ``fusion`` setting: by
default ``minmax``, a weighted sum of each leg's min-max normalised scores (dense 0.4,
lexical 0.6); ``rrf`` is weighted reciprocal rank fusion (``rrf_k`` 60). Then optional
graph expansion (``hops``) and reranking.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kredenc.errors import InvalidInput
from kredenc.providers.rerank import Reranker
from kredenc.records import Hit, LegScore
from kredenc.retrieve.fuse import weighted_minmax, weighted_rrf
from kredenc.retrieve.graph import expand, merge
from kredenc.retrieve.rerank import rerank
from kredenc.retrieve.terms import phrases, query_terms, tokens
from kredenc.storage.haystack import Haystack
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import MAX_SCORED
from kredenc.storage.index.sqlite import SqliteIndex
from kredenc.storage.index.vectors import F32

Mode = Literal["hybrid", "lexical", "dense"]
MODES: tuple[str, ...] = ("hybrid", "lexical", "dense")


@dataclass(frozen=True)
class SearchParams:
    k: int = 10
    mode: str = "hybrid"
    leg_k: int = 50
    rrf_k: int = 60
    weight_dense: float = 0.4
    weight_lexical: float = 0.6
    fusion: str = "minmax"
    per_document: bool = False
    hops: int = 0
    neighbors_max: int = 40
    context_weight: float = 0.5
    lexical_max_scored: int = MAX_SCORED
    rerank_depth: int = 30


def validate(query: object, params: SearchParams) -> str:
    if not isinstance(query, str):
        raise InvalidInput("query must be text")
    if params.mode not in MODES:
        raise InvalidInput(f"unknown search mode {params.mode!r}", f"use one of {', '.join(MODES)}")
    k = params.k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise InvalidInput(f"k must be a whole number between 1 and 1000, not {k!r}")
    if not 0 <= params.hops <= 3:
        raise InvalidInput(f"hops must be between 0 and 3, not {params.hops}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("query is not valid UTF-8", "pass the query as UTF-8 text") from None
    return query


def run_legs(
    index: SqliteIndex,
    ns: str,
    query: str,
    params: SearchParams,
    filters: Filters,
    embed_query: Callable[[str], F32],
    depth: int | None = None,
) -> dict[str, list[tuple[int, float]]]:
    """Each leg's ranked (rowid, score) list, ``depth`` deep (default: ``leg_k``, the
    window fusion normalises over, or ``k`` when that is more).

    In hybrid mode the query is embedded on a worker thread while the lexical leg runs
    on this one (onnxruntime and SQLite both release the GIL), so a hybrid search costs
    about the longer of the two rather than their sum.
    """
    legs: dict[str, list[tuple[int, float]]] = {}
    if depth is None:
        depth = max(params.leg_k, params.k)
    # A query with no words (only punctuation, operators or spaces) finds nothing in
    # either leg; embedding "* ( )" would return arbitrary nearest neighbours.
    dense = params.mode in ("hybrid", "dense") and bool(tokens(query))
    embedding: Future[F32] | None = None
    if dense and params.mode == "hybrid":
        embedding = _embedding_pool().submit(embed_query, query)
    if params.mode in ("hybrid", "lexical"):
        terms = query_terms(query)
        legs["lexical"] = (
            index.lexical(
                ns,
                phrases(terms),
                depth,
                filters,
                context_weight=params.context_weight,
                max_scored=params.lexical_max_scored,
            )
            if terms
            else []
        )
    if params.mode in ("hybrid", "dense"):
        legs["dense"] = []
        if dense:
            raw = embedding.result() if embedding is not None else embed_query(query)
            legs["dense"] = index.dense(ns, np.asarray(raw, dtype=np.float32), depth, filters)
    if params.per_document:
        legs = {name: _best_per_document(index, ns, ranked) for name, ranked in legs.items()}
    return legs


@functools.cache
def _embedding_pool() -> ThreadPoolExecutor:
    """Threads that embed hybrid queries beside their lexical legs (made on first use)."""
    return ThreadPoolExecutor(4, thread_name_prefix="kredenc-embed")


def _best_per_document(
    index: SqliteIndex, ns: str, ranked: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """Keep each document's best chunk in a leg's list (records without a document
    stand for themselves), so fusion ranks documents rather than their pieces."""
    docs = index.doc_ids(ns, [r for r, _ in ranked])
    seen: set[str] = set()
    out: list[tuple[int, float]] = []
    for rowid, score in ranked:
        key = docs.get(rowid) or f"#{rowid}"
        if key not in seen:
            seen.add(key)
            out.append((rowid, score))
    return out


def search(
    index: SqliteIndex,
    haystack: Haystack,
    ns: str,
    query: str,
    params: SearchParams,
    filters: Filters,
    embed_query: Callable[[str], F32],
    reranker: Reranker | None = None,
) -> list[Hit]:
    """Legs, fusion, optional graph expansion, optional reranking; hits from the log."""
    depth = max(params.k, params.rerank_depth) if reranker is not None else params.k
    single = params.mode != "hybrid" and params.hops == 0 and not params.per_document
    # One leg alone is the ranking: nothing is fused or expanded, so it need not go
    # deeper than what is kept (a bounded lexical leg then relaxes its plan less often).
    legs = run_legs(index, ns, query, params, filters, embed_query, depth if single else None)
    if params.mode == "hybrid":
        fused = fuse(legs, params)
    else:
        ((_, only),) = legs.items()
        fused = [(r, s) for r, s in only]
    via: dict[int, str] = {}
    if params.hops > 0:
        seeds = fused[: params.k]
        extra = expand(
            index,
            ns,
            seeds,
            hops=params.hops,
            filters=filters,
            limit=params.neighbors_max,
            include_seeds=True,
        )
        fused, via = merge(fused, extra)
    top = fused[:depth]
    places = index.resolve(ns, [r for r, _ in top])
    per_leg = {
        name: {r: LegScore(rank, score) for rank, (r, score) in enumerate(ranked, start=1)}
        for name, ranked in legs.items()
    }
    hits: list[Hit] = []
    for rowid, score in top:
        place = places.get(rowid)
        if place is None:  # forgotten between the legs and now
            continue
        _, offset = place
        hit = hit_from_payload(haystack.read(offset), offset, score)
        hit.legs = {n: leg[rowid] for n, leg in per_leg.items() if rowid in leg}
        hit.fused = float(score) if params.mode == "hybrid" else 0.0
        hit.graph = via.get(rowid)
        hits.append(hit)
    if reranker is not None:
        hits = rerank(query, hits, reranker)
    return hits[: params.k]


def fuse(legs: dict[str, list[tuple[int, float]]], params: SearchParams) -> list[tuple[int, float]]:
    """The hybrid ranking of the legs' (rowid, score) lists under ``params.fusion``."""
    weights = {"dense": params.weight_dense, "lexical": params.weight_lexical}
    if params.fusion == "minmax":
        return weighted_minmax(legs, weights, depth=params.leg_k)
    return weighted_rrf(
        {n: [r for r, _ in ranked] for n, ranked in legs.items()}, weights, k=params.rrf_k
    )


def hit_from_payload(payload: dict[str, Any], offset: int, score: float) -> Hit:
    """A hit for the record ``payload`` read at ``offset`` (legs filled by the caller)."""
    return Hit(
        id=str(payload["id"]),
        text=str(payload.get("text", "")),
        score=float(score),
        kind=str(payload.get("kind", "")),
        drawer=str(payload.get("drawer", "")),
        type=str(payload.get("type", "")),
        meta=dict(payload.get("meta") or {}),
        tags=tuple(payload.get("tags") or ()),
        seq=int(payload["seq"]),
        offset=offset,
        created_at=float(payload.get("ts", 0.0)),
        title=str(payload.get("title") or ""),
        origin=str(payload.get("origin") or ""),
        page=payload.get("page"),
        start_s=payload.get("start_s"),
        doc_id=payload.get("doc_id"),
    )
