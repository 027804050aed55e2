"""Cover the query: reorder the top of a fused list so that what it holds of the query
grows with each hit, not only what it scores.

A question that names two things ("Which was founded first, X or Y?", "the film
scored by Z: who produced it?") needs a passage for each; a fused list often puts
several passages about the first thing above any about the second. Greedily, from
the top :data:`~kredenc.retrieve.relevance.WINDOW` fused hits, the next hit is the one
with the best ``fused score + weight × novelty``, where novelty is the IDF-weighted
share of the query's content terms (:func:`~kredenc.retrieve.relevance.query_terms`;
IDF over the window, as the relevance features count it) that the hit holds, in its
title or text, and no hit above it does. The explicit query-aspect diversification
of xQuAD (Santos et al., 2010), with the query's own terms as its aspects.

A hit's ``score`` becomes that objective at its pick (its ``fused`` score stays the
fusion's), so scores still fall down the list: each hit's objective can only drop as
the hits above it cover more, and every hit of the window scores at least its fused
score, which is at least that of any hit below the window. Hits below the window keep
their order and scores.

Provenance of :data:`WEIGHT` (0.5): chosen leave-one-set-out on the five dev sets
(docs/benchmarks.md, "Covering the query").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from kredenc.records import Hit
from kredenc.retrieve.relevance import WINDOW, has_term, list_idf, query_terms, text_stems

#: Weight of a hit's novel query coverage beside its fused score (``coverage_weight``).
WEIGHT = 0.5


def cover(
    query: str, hits: Sequence[Hit], weight: float = WEIGHT, window: int = WINDOW
) -> list[Hit]:
    """``hits`` (in fused order) with the top ``window`` reordered greedily by fused
    score plus ``weight`` × novel query coverage, as new hits (the given ones are left
    as they are); ``weight`` 0 changes nothing."""
    out = list(hits)
    top = out[:window]
    terms = query_terms(query)
    if weight <= 0 or len(top) < 2 or not terms:
        return out
    stems = [_stems(h) for h in top]
    idf = list_idf(terms, stems)
    total = sum(idf.values())
    if total <= 0:
        return out
    holds = [{t for t in terms if has_term(s, t)} for s in stems]
    covered: set[str] = set()
    left = list(range(len(top)))
    picked: list[Hit] = []
    while left:
        # fsum: exactly rounded whatever the set's (hash-seeded) order, so a near-tie
        # is broken the same way in every process.
        gains = {i: math.fsum(idf[t] for t in holds[i] - covered) / total for i in left}
        best = max(left, key=lambda i: top[i].score + weight * gains[i])
        picked.append(replace(top[best], score=top[best].score + weight * gains[best]))
        covered |= holds[best]
        left.remove(best)
    return picked + out[window:]


def _stems(hit: Hit) -> tuple[str, ...]:
    """What the hit holds of the query: the stems of its text and its title (each
    memoised: the relevance features have read both already)."""
    own = text_stems(hit.text)
    if not hit.title:
        return own
    return tuple(sorted(set(own).union(text_stems(hit.title))))
