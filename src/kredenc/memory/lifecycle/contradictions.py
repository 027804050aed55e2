"""Contradictions: similar memories that say opposite things.

1. Candidates: pairs of live memories whose vectors (the store's own, read from the
   index) have cosine >= ``conflict_similarity``, at most ``neighbours`` per memory,
   found with blocked exact matrix products.
2. A pair with cosine >= ``min_similarity`` goes to a
   :class:`~kredenc.memory.detectors.ContradictionDetector` (by default
   :class:`~kredenc.memory.detectors.GroundedDetector`: the deterministic rules, then
   the grounding layer's conflict check). A less similar pair goes to the conflict
   check alone (:func:`kredenc.grounding.conflicts.conflicts`: a word one text negates
   and the other asserts, about the same subject). Contradicting memories are often
   not similar as MiniLM sees them: "The user drinks green tea, never coffee" and "The
   user switched to black coffee in June" have cosine 0.51, below the rules' 0.8.
3. For each contradiction: an edge newer -> older ``contradicts`` and the older
   memory marked ``disputed`` with the reason, in one atomic group. The newer one is
   disputed instead when the older is read-only or validated and the newer is not
   (what a person confirmed outranks what came later).

Pairs already related by ``contradicts`` (either way) are skipped, so a re-run adds
nothing twice. Deprecated memories and reflections are not examined.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from kredenc.errors import InvalidInput
from kredenc.grounding.conflicts import conflicts
from kredenc.memory.detectors import Contradiction, ContradictionDetector, GroundedDetector
from kredenc.memory.lifecycle import (
    JobReport,
    MemoryRow,
    live_memories,
    score_payload,
    write_groups,
)
from kredenc.memory.relations import edge_payloads
from kredenc.records import now as wall_clock

if TYPE_CHECKING:
    from kredenc.storage.store import Store

MIN_SIMILARITY = 0.8
# The conflict check needs a flipped word and a shared subject, so it can look further.
# 0.45: below every contradicting pair of tests/memory/test_contradictions.py's
# polarity set (0.51-0.74 with MiniLM), chosen on those pairs, not measured on a set.
CONFLICT_SIMILARITY = 0.45
NEIGHBOURS = 10
_BLOCK = 512
_READ = 500  # rowids per vector read


def similar_pairs(
    store: Store, rows: list[MemoryRow], min_similarity: float, neighbours: int
) -> Iterator[tuple[int, int, float]]:
    """(i, j, cosine) with i < j (indexes into ``rows``), best first per row."""
    vectors: dict[int, Any] = {}
    rowids = [r.rowid for r in rows]
    for start in range(0, len(rowids), _READ):
        vectors.update(store.index.vectors_of(rowids[start : start + _READ]))
    keep = [i for i, r in enumerate(rows) if r.rowid in vectors]
    if len(keep) < 2:
        return
    matrix = np.vstack([vectors[rows[i].rowid] for i in keep]).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms == 0, 1.0, norms)
    seen: set[tuple[int, int]] = set()
    for start in range(0, len(keep), _BLOCK):
        sims = matrix[start : start + _BLOCK] @ matrix.T
        for offset, row in enumerate(sims):
            a = start + offset
            row[a] = -1.0
            top = np.flatnonzero(row >= min_similarity)
            if len(top) > neighbours:
                top = top[np.argsort(-row[top], kind="stable")[:neighbours]]
            for b in sorted(int(x) for x in top):
                pair = (min(a, b), max(a, b))
                if pair not in seen:
                    seen.add(pair)
                    yield keep[pair[0]], keep[pair[1]], float(row[b])


def _related(store: Store, ns: str) -> set[frozenset[str]]:
    return {frozenset(pair) for pair in store.index.edge_pairs(ns, "contradicts")}


def _loser(older: MemoryRow, newer: MemoryRow) -> MemoryRow | None:
    """Which of the pair to mark disputed (None when neither may change)."""
    protected_older = older.read_only or (
        older.status == "validated" and newer.status != "validated"
    )
    if protected_older:
        return None if newer.read_only else newer
    return older


def run_contradictions(
    store: Store,
    ns: str,
    *,
    now: float | None = None,
    detector: ContradictionDetector | None = None,
    min_similarity: float = MIN_SIMILARITY,
    neighbours: int = NEIGHBOURS,
    conflict_similarity: float = CONFLICT_SIMILARITY,
) -> JobReport:
    """Find contradicting pairs; mark one disputed and add a ``contradicts`` edge.

    ``now`` is accepted for a uniform job signature; the records carry wall time.
    """
    if not -1.0 <= min_similarity <= 1.0 or neighbours < 1:
        raise InvalidInput("min_similarity must be in [-1, 1] and neighbours at least 1")
    if not -1.0 <= conflict_similarity <= 1.0:
        raise InvalidInput("conflict_similarity must be in [-1, 1]")
    detect = detector or GroundedDetector()
    report = JobReport("contradictions")
    rows = live_memories(store, ns, not_status="deprecated", reflections=False)
    report.examined = len(rows)
    related = _related(store, ns)
    texts: dict[str, str] = {}

    def text(row: MemoryRow) -> str:
        if row.id not in texts:
            texts[row.id] = str(store.haystack.read(row.offset).get("text", ""))
        return texts[row.id]

    disputed = {r.id for r in rows if r.status == "disputed"}
    groups: list[list[dict[str, Any]]] = []
    floor = min(min_similarity, conflict_similarity)
    for i, j, sim in similar_pairs(store, rows, floor, neighbours):
        older, newer = rows[i], rows[j]  # rows are in filing order
        if frozenset((older.id, newer.id)) in related:
            continue
        if sim >= min_similarity:
            found = detect.detect(text(older), text(newer))
        else:
            why = conflicts(text(older), text(newer))
            found = Contradiction("polarity", why) if why else None
        if found is None:
            continue
        related.add(frozenset((older.id, newer.id)))
        edges = edge_payloads(ns, newer.id, older.id, "contradicts", 1.0, wall_clock())
        group = [{**e, "by": "contradictions"} for e in edges]
        loser = _loser(older, newer)
        other = newer if loser is older else older
        if loser is not None and loser.id not in disputed:
            disputed.add(loser.id)
            group.append(
                score_payload(
                    ns,
                    loser.id,
                    {"status": "disputed"},
                    reason=f"contradicted by {other.id}: {found.reason}",
                    by="contradictions",
                )
            )
        groups.append(group)
        report.note(
            {
                "older": older.id,
                "newer": newer.id,
                "kind": found.kind,
                "reason": found.reason,
                "similarity": round(sim, 4),
                "disputed": loser.id if loser is not None else None,
            }
        )
    report.changed = len(groups)
    report.records = write_groups(store, groups)
    return report.done()
