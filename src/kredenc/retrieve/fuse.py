"""Weighted reciprocal rank fusion of ranked lists."""

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
