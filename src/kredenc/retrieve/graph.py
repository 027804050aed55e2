"""Graph expansion: add the neighbours of the best hits, along typed edges.

A neighbour reached in ``h`` hops from a seed gets ``seed score × decay^h × weight``;
a record reached several ways keeps its best score, including the score the search
legs already gave it (``merge``). Documents (not searchable themselves) are walked
through, so ``part_of`` links sibling chunks at two hops.
"""

from __future__ import annotations

from dataclasses import dataclass

from kredenc.storage.base import Index
from kredenc.storage.index.filters import Filters

#: What a neighbour gets of its seed's score per hop (times the edge's weight). 0.7 was
#: chosen on MuSiQue-200 and reported on HotpotQA-200 (and the other way round; both
#: directions choose it) over 0.5-1.0 with min-max fusion: HotpotQA recall@5 / all-gold@5
#: +0.020 / +0.040, MuSiQue +0.009 / +0.010 against 0.5 (docs/benchmarks.md, "Graph
#: decay and the scale of fused scores", benchmarks/bench_graph_decay.py). Only
#: searches with ``hops`` use it; the context graph walks edges without it. The
#: ``graph_decay`` setting (the same default) sets it per store.
DECAY = 0.7


@dataclass(frozen=True)
class Expanded:
    rowid: int
    score: float
    via: str  # "<relation> of <seed id>"


def expand(
    index: Index,
    ns: str,
    seeds: list[tuple[int, float]],
    *,
    hops: int,
    filters: Filters,
    limit: int = 40,
    include_seeds: bool = False,
    decay: float = DECAY,
) -> list[Expanded]:
    """Neighbours of ``seeds`` (rowid, score) within ``hops``, best first, at most ``limit``.

    With ``include_seeds`` a seed linked from another seed is reported too (with its
    graph score), so ``merge`` can lift a low seed that a strong one links to; it is
    never walked from twice. ``decay``: the share of a seed's score a neighbour gets
    per hop (times the edge's weight).
    """
    if hops <= 0 or not seeds:
        return []
    places = index.resolve(ns, [r for r, _ in seeds])
    seen: set[str] = {places[r][0] for r, _ in seeds if r in places}
    frontier: dict[str, float] = {places[r][0]: s for r, s in seeds if r in places}
    best: dict[str, tuple[float, str]] = {}
    for hop in range(hops):
        nxt: dict[str, float] = {}
        for seed, nbr, rel, weight in index.neighbours(ns, list(frontier)):
            if nbr == seed:
                continue
            score = frontier[seed] * decay * weight
            if nbr in seen:
                lifts = include_seeds and hop == 0 and nbr in frontier
                if lifts and score > best.get(nbr, (0.0, ""))[0]:
                    best[nbr] = (score, f"{rel} of {seed}")
                continue
            if score > nxt.get(nbr, 0.0):
                nxt[nbr] = score
                if score > best.get(nbr, (0.0, ""))[0]:
                    best[nbr] = (score, f"{rel} of {seed}")
        seen.update(nxt)
        frontier = nxt
        if not frontier:
            break
    rowids = index.rowids_for(ns, list(best), filters)
    out = [Expanded(rowids[i], s, via) for i, (s, via) in best.items() if i in rowids]
    out.sort(key=lambda e: -e.score)
    return out[:limit]


def merge(
    ranked: list[tuple[int, float]], extra: list[Expanded]
) -> tuple[list[tuple[int, float]], dict[int, str]]:
    """``ranked`` (rowid, score) with the expanded neighbours folded in, best first,
    and the ``via`` of each record whose graph score beat its own.

    A neighbour keeps the better of its own score and its graph score: one the legs
    ranked low but a strong seed links to (the second hop of a multi-hop question)
    moves up; one the legs already rank high is not pushed down. Only appending
    neighbours the legs missed (the old behaviour) did nothing in corpora where
    every passage is among some leg's candidates.
    """
    scores = dict(ranked)
    via: dict[int, str] = {}
    for e in extra:
        if e.score > scores.get(e.rowid, float("-inf")):
            scores[e.rowid] = e.score
            via[e.rowid] = e.via
    order = {rowid: i for i, (rowid, _) in enumerate(ranked)}
    out = sorted(scores.items(), key=lambda kv: (-kv[1], order.get(kv[0], len(order))))
    return out, via
