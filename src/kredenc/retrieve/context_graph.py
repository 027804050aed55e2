"""ContextGraph retrieval: seeds, expansion along relations, blended ranking.

1. Seeds: the given ids, else a dense search's records of cosine at least
   :data:`MIN_SIMILARITY`; when the best dense similarity is weak, also those hybrid
   search finds by words (words catch what meaning missed).
2. Expansion: neighbours along typed edges up to ``hops``, at most ``neighbors_max``;
   one reached only by a document's structure (:data:`STRUCTURAL`) must clear
   :data:`MIN_SIMILARITY` itself.
3. Ranking: relevance first. ``w_sim · similarity + t · (w_imp · importance + w_rec ·
   recency)`` with the weights normalised to sum to 1 and ``t`` the tie-break scale
   (setting ``rank_tiebreak``, 0.05): with the default weights (0.5 / 0.3 / 0.2) an
   important, fresh record passes one that is at most 0.05 more similar, never a
   clearly more relevant one (importance once outranked relevance: the user's
   manager came before the tea the user drinks). With ``w_sim`` 0 the ranking is by
   importance and recency alone. Recency halves every ``half_life_days`` since the
   record was filed or last recalled, so access feeds the ranking.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kredenc.errors import InvalidInput
from kredenc.records import ContextGraph, GraphEdge, GraphNode
from kredenc.retrieve.graph import expand
from kredenc.storage.base import Index, Log
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.vectors import F32

WEAK_SEED = 0.35  # below this cosine, dense seeds are backed by hybrid search
#: The least cosine for a record in the graph by meaning alone: a dense seed below it is
#: neither a node nor walked from (unless words found it too), and a neighbour reached
#: by a document's structure (:data:`STRUCTURAL`) must reach it itself. The recall
#: reflex's floor (``recall_min_similarity``'s default), for the same reason: a record
#: this far from the query is not worth its place. (A day-one audit: a seed at 0.06,
#: a bibliography chunk, pulled 40 chunks of its paper into the graph.)
MIN_SIMILARITY = 0.2
#: The edges ingest files between chunks and documents: they say where a text sits,
#: not that it is related to the query, unlike a typed relation between memories.
STRUCTURAL = frozenset({"part_of", "next", "links_to", "mentions"})


@dataclass(frozen=True)
class Blend:
    similarity: float = 0.5
    importance: float = 0.3
    recency: float = 0.2
    half_life_days: float = 30.0
    tiebreak: float = 0.05  # scale of the importance and recency terms

    def normalised(self) -> Blend:
        weights = (self.similarity, self.importance, self.recency)
        if any(w < 0 or math.isnan(w) for w in weights):
            raise InvalidInput("ranking weights must be non-negative numbers")
        total = sum(weights)
        if total <= 0:
            raise InvalidInput("ranking weights must not all be zero")
        if not 0 <= self.tiebreak <= 1:
            raise InvalidInput(f"the tie-break scale must be in [0, 1], not {self.tiebreak}")
        return Blend(
            self.similarity / total,
            self.importance / total,
            self.recency / total,
            self.half_life_days,
            self.tiebreak,
        )

    def score(self, similarity: float, importance: float, recency: float) -> float:
        """A node's rank score (weights already normalised): similarity dominates;
        importance and recency are scaled by ``tiebreak``, so they break near-ties."""
        secondary = self.importance * importance + self.recency * recency
        if self.similarity <= 0:
            return secondary
        return self.similarity * similarity + self.tiebreak * secondary


def build(
    index: Index,
    haystack: Log,
    ns: str,
    query: str,
    *,
    embed_query: Callable[[str], F32],
    hybrid_seeds: Callable[[str, int], list[tuple[int, float]]],
    k: int,
    hops: int,
    neighbors_max: int,
    seed_ids: Sequence[str] | None,
    blend: Blend,
    filters: Filters,
    now: float | None = None,
) -> ContextGraph:
    blend = blend.normalised()
    qvec = np.asarray(embed_query(query), dtype=np.float32) if query.strip() else None
    seeds: dict[int, float] = {}
    if seed_ids:
        seeds = {r: 1.0 for r in index.rowids_for(ns, list(seed_ids), filters).values()}
    elif qvec is not None:
        dense = index.dense(ns, qvec, k, filters)
        seeds = {r: sim for r, sim in dense if sim >= MIN_SIMILARITY}
        if not dense or dense[0][1] < WEAK_SEED:
            # Found by words (or by meaning above the floor): seeds whatever the cosine,
            # walked from with their fused score.
            for rowid, fused in hybrid_seeds(query, k):
                seeds.setdefault(rowid, fused)
    hop_of: dict[int, int] = dict.fromkeys(seeds, 0)
    via: dict[int, str] = {}
    for e in expand(
        index, ns, list(seeds.items()), hops=hops, filters=filters, limit=neighbors_max
    ):
        hop_of.setdefault(e.rowid, 1)
        via.setdefault(e.rowid, e.via)
    # Never one side of a contradiction silently: pull in the other side.
    present = index.resolve(ns, list(hop_of))
    by_id = {rid: rowid for rowid, (rid, _) in present.items()}
    partners = [
        nbr for seed, nbr, rel, _w in index.neighbours(ns, list(by_id)) if rel == "contradicts"
    ]
    for rid, rowid in index.rowids_for(ns, partners, filters).items():
        if rowid not in hop_of:
            hop_of[rowid] = 1
            via[rowid] = f"contradicts {rid}"
    info = index.node_info(ns, list(hop_of))
    vectors = index.vectors_of(list(info)) if qvec is not None else {}
    t_now = time.time() if now is None else now
    nodes: list[GraphNode] = []
    for rowid, state in info.items():
        sim = float(vectors[rowid] @ qvec) if qvec is not None and rowid in vectors else 0.0
        sim = max(0.0, sim)
        if qvec is not None and sim < MIN_SIMILARITY and _structural(via.get(rowid)):
            continue  # where a text sits is no reason to show it
        touched = max(float(state["created_at"] or 0.0), float(state["last_accessed_at"] or 0.0))
        age_days = max(0.0, (t_now - touched) / 86400.0)
        recency = 0.5 ** (age_days / blend.half_life_days)
        importance = float(state["importance"])
        score = blend.score(sim, importance, recency)
        payload = haystack.read(int(state["offset"]))
        nodes.append(
            GraphNode(
                id=str(state["id"]),
                type=str(state["type"]),
                kind=str(state["kind"] or ""),
                text=str(payload.get("text", "")),
                score=score,
                similarity=sim,
                importance=importance,
                recency=recency,
                hop=hop_of[rowid],
                via=via.get(rowid),
                created_at=float(state["created_at"] or 0.0),
                status=str(state["status"]),
                user_id=payload.get("user_id"),
                agent_id=payload.get("agent_id"),
                run_id=payload.get("run_id"),
            )
        )
    nodes.sort(key=lambda n: -n.score)
    ids = [n.id for n in nodes]
    edges = [GraphEdge(a, b, rel, w) for a, b, rel, w in index.edges_among(ns, ids)]
    return ContextGraph(query=query, nodes=nodes, edges=edges)


def _structural(via: str | None) -> bool:
    """Whether a neighbour was reached by an edge of :data:`STRUCTURAL` (``via`` is
    "<relation> of <id>"; None for a seed)."""
    return via is not None and via.split(" ", 1)[0] in STRUCTURAL
