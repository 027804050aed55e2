"""Typed relations between memories (and any records): the edge vocabulary."""

from __future__ import annotations

import math
from typing import Any

from kredenc.errors import InvalidInput, shown

RELATIONS = (
    "supports",
    "contradicts",
    "depends_on",
    "derived_from",
    "related_to",
    "precedes",
    "follows",
)
SYMMETRIC = frozenset({"related_to"})
# Structural edges written by ingestion (documents, chunks, pages).
STRUCTURAL = ("part_of", "next", "links_to", "mentions")
ALL_RELATIONS = RELATIONS + STRUCTURAL


def check_relation(rel: str, weight: float, *, structural: bool = False) -> float:
    allowed = ALL_RELATIONS if structural else RELATIONS
    if rel not in allowed:
        raise InvalidInput(f"unknown relation {shown(rel)}", f"use one of {', '.join(RELATIONS)}")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or math.isnan(weight):
        raise InvalidInput(
            f"weight must be a number in [0, 1], not {weight!r}", "e.g. 0.5; 1 is the default"
        )
    if not 0.0 <= float(weight) <= 1.0:
        raise InvalidInput(
            f"weight must be between 0 and 1, not {weight}", "e.g. 0.5; 1 is the default"
        )
    return float(weight)


def edge_payloads(
    ns: str, src: str, dst: str, rel: str, weight: float, ts: float, *, remove: bool = False
) -> list[dict[str, Any]]:
    """The log records for one relation; a symmetric one is written both ways."""
    op = "unedge" if remove else "edge"
    pairs = [(src, dst)]
    if rel in SYMMETRIC and src != dst:
        pairs.append((dst, src))
    out: list[dict[str, Any]] = []
    for a, b in pairs:
        payload: dict[str, Any] = {"op": op, "ns": ns, "src": a, "dst": b, "rel": rel, "ts": ts}
        if not remove:
            payload["weight"] = weight
        out.append(payload)
    return out
