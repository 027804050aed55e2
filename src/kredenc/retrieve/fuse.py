"""Fusion of ranked lists: weighted reciprocal rank fusion, and weighted sums of
min-max normalised scores (:func:`normalised`, also what the learned fusion's score
features and the rerank mix scale by)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

K = TypeVar("K")


def weighted_rrf(
    legs: Mapping[str, Sequence[K]], weights: Mapping[str, float], k: int = 60
) -> list[tuple[K, float]]:
    """Fuse ranked lists: ``score(d) = sum(w_leg / (k + rank_leg(d)))``, ranks from 1.

    Weights are normalised to sum to 1; a leg with no weight is ignored. Ties keep
    the order in which items were first seen (legs in the order given).
    """
    total = sum(weights.get(name, 0.0) for name in legs)
    if total <= 0:
        raise ValueError("fusion weights must sum to a positive number")
    scores: dict[K, float] = {}
    for name, ranked in legs.items():
        weight = weights.get(name, 0.0) / total
        if weight == 0:
            continue
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def weighted_minmax(
    legs: Mapping[str, Sequence[tuple[K, float]]],
    weights: Mapping[str, float],
    depth: int | None = None,
) -> list[tuple[K, float]]:
    """Fuse scored lists by a weighted sum of min-max normalised scores.

    Each leg's scores are scaled to [0, 1] over its first ``depth`` items (all when
    None): its best is 1, the ``depth``-th 0, anything further down is clipped to 0; a
    single-item list is 1. An item a leg did not return gets 0 from it. A fixed depth
    keeps the ranking of the top independent of how many results were asked for.
    Weights are normalised to sum to 1. Unlike RRF this keeps how far apart the leg's
    scores are, which measured better on SciFact (see docs/benchmarks.md).
    """
    total = sum(weights.get(name, 0.0) for name in legs)
    if total <= 0:
        raise ValueError("fusion weights must sum to a positive number")
    scores: dict[K, float] = {}
    for name, scored in legs.items():
        weight = weights.get(name, 0.0) / total
        if weight == 0 or not scored:
            continue
        for item, norm in normalised(scored, depth).items():
            scores[item] = scores.get(item, 0.0) + weight * norm
    return sorted(scores.items(), key=lambda kv: -kv[1])


def normalised(scored: Sequence[tuple[K, float]], depth: int | None = None) -> dict[K, float]:
    """Each item's score min-max scaled over the first ``depth`` items (all when
    None): the best 1, the ``depth``-th 0, anything further down clipped to 0; all 1
    when the scores are equal (a single item included). Empty: empty."""
    if not scored:
        return {}
    values = [s for _, s in (scored if depth is None else scored[:depth])]
    hi, lo = max(values), min(values)
    span = hi - lo
    return {item: (max(0.0, (v - lo) / span) if span > 0 else 1.0) for item, v in scored}
