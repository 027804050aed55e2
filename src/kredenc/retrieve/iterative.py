"""Iterative multi-hop search without an LLM: follow the bridge entities of the top hits.

A question whose second hop is named only by the answer of the first ("the government
position held by the woman who portrayed Corliss Archer") finds the first passage and
misses the second: nothing in the question names it. Each round here takes the names
of the previous round's top :data:`BRIDGE_TOP` new passages that the question lacks
(their titles first, :func:`bridge_names`), searches each with the question's other
content terms (:func:`rest_terms`), and keeps what is new; it stops after ``hops``
rounds or when a round brings nothing new. The lists of every round are fused
(:func:`fuse_hits`), deduplicated by id.

:func:`follow` is the one way: ``Kredenc.search(..., iterative=True, hops=N)``
(:func:`run`) and the answer loop's iterative retrieve mode both call it, each with its
own search callable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kredenc.records import Hit, Hits
from kredenc.retrieve.names import content_terms, names
from kredenc.retrieve.terms import tokens

#: Passages of a round whose names seed the next round, and names searched per round.
BRIDGE_TOP = 3
BRIDGE_NAMES = 2
#: How the rounds' lists are fused (:func:`fuse_hits`).
FUSIONS = ("interleave", "rrf")
RRF_K = 60
#: The weight of a round-``r`` list is ``HOP_WEIGHT ** r`` under "interleave" in
#: :func:`run` (1.0 would be a plain interleave, every list's best before any list's
#: second: what the answer loop fuses). 0.5 was chosen on MuSiQue-200 and reported on
#: HotpotQA-200 (HotpotQA-200 chose 0.4; benchmarks/bench_iterative.py, docs/benchmarks.md).
HOP_WEIGHT = 0.5

Find = Callable[[str], Sequence[Hit]]


@dataclass(frozen=True)
class Round:
    """One round of an iterative search: what it searched and what it brought."""

    hop: int  # 0: the question itself
    queries: tuple[str, ...]
    bridges: tuple[str, ...] = ()  # the names that made the queries (none at hop 0)
    hits: int = 0  # hits its searches returned
    new: int = 0  # of those, hits no earlier round had


class RoundHits(Hits):
    """The hits of an iterative search, best first, and its rounds (``rounds``);
    ``found_by`` maps a hit's id to the (hop, query) that first returned it;
    ``corrections`` are those of its first round's search (``Hits``)."""

    def __init__(
        self,
        hits: Sequence[Hit] = (),
        rounds: Sequence[Round] = (),
        corrections: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(hits, corrections)
        self.rounds: list[Round] = list(rounds)
        self.found_by: dict[str, tuple[int, str]] = {}

    @property
    def searches(self) -> int:
        """How many searches the rounds ran (the cost of the query)."""
        return sum(len(r.queries) for r in self.rounds)

    def explain(self) -> str:
        """What each round searched and brought, one line each, and why it stopped."""
        lines = []
        for r in self.rounds:
            asked = "; ".join(repr(q) for q in r.queries)
            via = f" (bridges {', '.join(repr(b) for b in r.bridges)})" if r.bridges else ""
            lines.append(f"round {r.hop}: searched {asked}{via}: {r.hits} hits, {r.new} new")
        last = self.rounds[-1] if self.rounds else None
        if last is not None and last.hop > 0 and last.new == 0:
            lines.append(f"stopped: round {last.hop} brought nothing new")
        return "\n".join(lines)


def rest_terms(query: str) -> str:
    """The query's content terms outside its names ("government position held woman
    portrayed film"), searched beside each bridge name."""
    in_names = {w for n in names(query) for w in tokens(n)}
    return " ".join(t for t in content_terms(query) if t not in in_names)


def bridge_names(
    query: str,
    hits: Sequence[Hit],
    seen: set[str],
    *,
    top: int = BRIDGE_TOP,
    limit: int = BRIDGE_NAMES,
) -> list[str]:
    """Names of the top hits the query does not hold, best first: each scores
    1 / rank of every hit it appears in, double in a hit's title, half again for a
    name of several words (a full name says more than "American"). A name holding one
    already followed (``seen``, lower-cased) is skipped."""
    lowered = query.lower()
    score: dict[str, float] = {}
    order: dict[str, int] = {}
    for rank, hit in enumerate(hits[:top], 1):
        found = ([hit.title] if hit.title else []) + names(hit.text)
        for name in dict.fromkeys(found):
            key = name.lower()
            if key in lowered or any(s in key for s in seen) or not any(c.isalpha() for c in name):
                continue
            weight = (2.0 if name == hit.title else 1.0) * (1.5 if " " in name else 1.0)
            score[name] = score.get(name, 0.0) + weight / rank
            order.setdefault(name, len(order))
    ranked = sorted(score, key=lambda n: (-score[n], order[n]))
    return ranked[:limit]


@dataclass
class Followed:
    """The lists the bridge rounds searched (in order) and the rounds themselves."""

    lists: list[list[Hit]] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    hops: list[int] = field(default_factory=list)  # the round of each list


def follow(
    query: str,
    first: Sequence[Hit],
    find: Find,
    *,
    hops: int,
    known: set[str] | None = None,
    top: int = BRIDGE_TOP,
    per_round: int = BRIDGE_NAMES,
) -> Followed:
    """Up to ``hops`` bridge rounds after ``first`` (the hits of the question itself):
    each searches ``"<name> <rest of the query>"`` for the names of the previous round's
    new top hits, and the next round starts from what this one brought new. Stops early
    when no name is left to follow or a round brings nothing new. ``known``: ids already
    found (default: those of ``first``)."""
    out = Followed()
    got = {h.id for h in first} if known is None else set(known)
    rest = rest_terms(query)
    seen: set[str] = set()
    latest = list(first)
    for hop in range(1, hops + 1):
        bridges = bridge_names(query, latest, seen, top=top, limit=per_round)
        if not bridges:
            break
        seen.update(b.lower() for b in bridges)
        new: list[Hit] = []  # in query order; one found by two queries counts twice
        asked: list[str] = []
        returned = 0
        for name in bridges:
            q = f"{name} {rest}".strip()
            hits = list(find(q))
            asked.append(q)
            out.lists.append(hits)
            out.hops.append(hop)
            returned += len(hits)
            new += [h for h in hits if h.id not in got]
        distinct = {h.id for h in new}
        out.rounds.append(Round(hop, tuple(asked), tuple(bridges), returned, len(distinct)))
        if not new:
            break
        got |= distinct
        latest = new
    return out


def fuse_hits(
    lists: Sequence[Sequence[Hit]],
    *,
    fusion: str = "interleave",
    weights: Sequence[float] | None = None,
    limit: int | None = None,
) -> list[Hit]:
    """``lists`` fused, deduplicated by id (the first copy kept). ``"interleave"``:
    a hit at rank r of list i scores ``weights[i] / r`` (best over the lists; ties go to
    the earlier rank, then the earlier list), so equal weights take each list's best,
    then each one's second, ... (every query's top hit has a place). ``"rrf"``: the
    reciprocal ranks summed over the lists (what many lists agree on first)."""
    if fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r}")
    if len(lists) == 1 and fusion == "interleave" and weights is None:
        # One list (most asks search once): its order, the first copy of each id.
        seen: dict[str, Hit] = {}
        for hit in lists[0]:
            seen.setdefault(hit.id, hit)
        return list(seen.values())[:limit]
    w = list(weights) if weights is not None else [1.0] * len(lists)
    first: dict[str, Hit] = {}
    score: dict[str, float] = {}
    place: dict[str, tuple[int, int]] = {}
    for i, hits in enumerate(lists):
        for rank, hit in enumerate(hits, 1):
            if fusion == "rrf":
                score[hit.id] = score.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
                if hit.id not in place or (rank, i) < place[hit.id]:
                    place[hit.id], first[hit.id] = (rank, i), hit
                continue
            value = w[i] / rank
            old = score.get(hit.id)
            if old is None or value > old or (value == old and (rank, i) < place[hit.id]):
                score[hit.id], place[hit.id], first[hit.id] = value, (rank, i), hit
    order = sorted(first, key=lambda d: (-score[d], place[d]))
    return [first[d] for d in order[:limit]]


def run(
    find: Find,
    query: str,
    *,
    hops: int,
    k: int,
    fusion: str = "interleave",
    hop_weight: float = HOP_WEIGHT,
) -> RoundHits:
    """Search ``query`` (round 0), then up to ``hops`` bridge rounds (:func:`follow`);
    the fused top ``k`` with the rounds. Each hit keeps the score its own search gave
    it (the order is the fusion's)."""
    found = find(query)
    first = list(found)
    followed = follow(query, first, find, hops=hops)
    lists = [first, *followed.lists]
    weights = [1.0] + [hop_weight**h for h in followed.hops]
    fused = fuse_hits(lists, fusion=fusion, weights=weights, limit=k)
    rounds = [Round(0, (query,), (), len(first), len(first)), *followed.rounds]
    out = RoundHits(fused, rounds, found.corrections if isinstance(found, Hits) else None)
    queries = [query, *(q for r in followed.rounds for q in r.queries)]
    hop_of = [0, *followed.hops]
    for hits, q, hop in zip(lists, queries, hop_of, strict=True):
        for h in hits:
            out.found_by.setdefault(h.id, (hop, q))
    return out
