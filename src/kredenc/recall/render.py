"""The recall block: the picked records as one system message, fitted into a budget.

Pure functions of the picked records, the edges among them and the budget (no store,
no clock): the block is a preamble line and one line per record,
``#n [kind, YYYY-MM-DD, id] (relation #m; …) text``. Everything that decides how the
block reads is here (:data:`PREAMBLE`, :func:`head`, :func:`body`, :func:`block`), so a
different framing of recalled text changes this module alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from kredenc.recall.budget import Budget
from kredenc.recall.result import RecallItem
from kredenc.records import Hit

PREAMBLE = (
    "Memories recalled from earlier conversations (they may be outdated; "
    "use them only where they help):"
)

Edge = tuple[str, str, str, float]  # (src id, dst id, relation, weight)


@dataclass(frozen=True)
class Picked:
    """A record chosen for the block, best first, with its fused score."""

    hit: Hit
    score: float


@dataclass(frozen=True)
class Rendered:
    block: str
    items: list[RecallItem]


def render(picked: Sequence[Picked], edges: Sequence[Edge], budget: Budget) -> Rendered:
    """The block holding as many of ``picked`` (in order) as ``budget`` fits.

    ``edges`` are the relations among the picked records (others are ignored); each is
    shown on its source's line as ``relation #n`` of a record that made it into the
    block, so the block is fitted again when a record is left out. Nothing fits:
    an empty block and no items.
    """
    chosen = list(picked)
    while chosen:
        ids = [c.hit.id for c in chosen]
        number = {rid: n for n, rid in enumerate(ids, start=1)}
        relations: dict[str, list[str]] = {rid: [] for rid in ids}
        for src, dst, rel, _weight in edges:
            if src in number and dst in number:
                relations[src].append(f"{rel} #{number[dst]}")
        heads = [
            (head(n, c.hit), body(c.hit, relations[c.hit.id])) for n, c in enumerate(chosen, 1)
        ]
        lines = budget.fit(PREAMBLE, heads)
        if lines is None:
            break
        if len(lines) < len(chosen):
            chosen = chosen[: len(lines)]
            continue
        items = [
            RecallItem(
                n=n,
                id=c.hit.id,
                type=c.hit.type,
                kind=kind(c.hit),
                score=c.score,
                legs=c.hit.legs,
                created_at=c.hit.created_at,
                line=line,
                truncated=line != first + rest,
                relations=tuple(relations[c.hit.id]),
                meta=c.hit.meta,
            )
            for n, (c, line, (first, rest)) in enumerate(zip(chosen, lines, heads, strict=True), 1)
        ]
        return Rendered(block(lines), items)
    return Rendered("", [])


def block(lines: Sequence[str]) -> str:
    """The message text: the preamble, then the records' lines."""
    return "\n".join([PREAMBLE, *lines])


def kind(hit: Hit) -> str:
    """A memory's kind, or a turn's speaker."""
    if hit.type == "turn":
        return str(hit.meta.get("role") or "turn")
    return hit.kind or hit.type


def head(n: int, hit: Hit) -> str:
    """``#n [kind, date filed (UTC), id] `` (a turn's kind is ``<speaker> turn``)."""
    when = time.strftime("%Y-%m-%d", time.gmtime(hit.created_at)) if hit.created_at else "?"
    label = f"{kind(hit)} turn" if hit.type == "turn" else kind(hit)
    return f"#{n} [{label}, {when}, {hit.id}] "


def body(hit: Hit, relations: Sequence[str]) -> str:
    """The record's text on one line, after its relations to the other records."""
    text = " ".join(hit.text.split())
    return f"({'; '.join(relations)}) {text}" if relations else text
