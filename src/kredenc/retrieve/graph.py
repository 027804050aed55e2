"""Graph expansion: add the neighbours of the best hits, along typed edges.

A neighbour reached in ``h`` hops from a seed gets ``seed score × decay^h × weight``;
a record reached several ways keeps its best score. Documents (not searchable
themselves) are walked through, so ``part_of`` links sibling chunks at two hops.
"""

from __future__ import annotations

from dataclasses import dataclass

from kredenc.storage.index.filters import Filters
from kredenc.storage.index.sqlite import SqliteIndex

DECAY = 0.5


@dataclass(frozen=True)
class Expanded:
    rowid: int
    score: float
    via: str  # "<relation> of <seed id>"


def expand(
    index: SqliteIndex,
    ns: str,
    seeds: list[tuple[int, float]],
    *,
    hops: int,
    filters: Filters,
    limit: int = 40,
) -> list[Expanded]:
    """Neighbours of ``seeds`` (rowid, score) within ``hops``, best first, at most ``limit``."""
    if hops <= 0 or not seeds:
        return []
    places = index.resolve(ns, [r for r, _ in seeds])
    seen: set[str] = {places[r][0] for r, _ in seeds if r in places}
    frontier: dict[str, float] = {places[r][0]: s for r, s in seeds if r in places}
    best: dict[str, tuple[float, str]] = {}
    for _hop in range(hops):
        nxt: dict[str, float] = {}
        for seed, nbr, rel, weight in index.neighbours(ns, list(frontier)):
            if nbr in seen:
                continue
            score = frontier[seed] * DECAY * weight
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
