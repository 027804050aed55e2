"""A memory's history: every log record that touched it, in order, told as changes.

The index keeps, per memory, the addresses of the log records in its history
(``Index.history_of``, filled when the housekeeper applies them, so a rebuild makes it
again); the records themselves are read from the log, the truth. Folding them in seq
order gives each change its old value: the ``put`` sets the first scores, each ``score``
or ``status`` record says the new values of the fields it names.

A forgotten memory keeps its history, but shows no more of it than an erasure
(``kredenc compact --purge``) keeps in the log: ids, relation names, numbers and times
(``storage.purge.KEPT_FIELDS``); no text, no reasons. So its history reads the same
before the purge as after it, when the log holds no more than that anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kredenc.checks import check_utf8
from kredenc.errors import InvalidInput, NotFound
from kredenc.memory.listing import check_page
from kredenc.storage.index.schema import SCORE_FIELDS
from kredenc.storage.purge import KEPT_FIELDS, PURGED_OP

if TYPE_CHECKING:
    from kredenc.storage.store import Store

__all__ = ["CHANGES", "FieldChange", "HistoryEntry", "memory_history"]

#: What a history entry can say happened.
CHANGES = ("created", "changed", "related", "unrelated", "forgotten")
#: The fields a ``put`` starts a memory with, as its first entry lists them.
_FIRST = ("importance", "confidence", "stability", "status")


@dataclass(frozen=True)
class FieldChange:
    """One field a change set: its value before (None at creation) and after."""

    field: str
    old: Any
    new: Any


@dataclass(frozen=True)
class HistoryEntry:
    """One log record in a memory's history.

    ``change`` is one of :data:`CHANGES`: ``created`` (``text``, ``kind``, ``source``
    and the first scores in ``fields``), ``changed`` (a score, status, validity, episode
    or task status edit: ``fields`` old to new, with its ``reason``), ``related`` and
    ``unrelated`` (an edge ``rel`` to or from ``other``; ``outgoing`` when this memory is
    its source), ``forgotten`` (its tombstone). ``by`` names the lifecycle job that wrote
    it (decay, episodes, contradictions, reflect); None for a caller's write.
    ``redacted``: the memory was forgotten, so text and reasons are not shown.
    """

    seq: int
    at: float | None
    change: str
    fields: tuple[FieldChange, ...] = ()
    text: str | None = None
    kind: str | None = None
    source: str | None = None
    reason: str | None = None
    by: str | None = None
    rel: str | None = None
    other: str | None = None
    outgoing: bool | None = None
    weight: float | None = None
    redacted: bool = False


def memory_history(
    store: Store, ns: str, /, record_id: str, *, limit: int = 100, offset: int = 0
) -> list[HistoryEntry]:
    """The history of memory ``record_id`` of ``ns``, oldest first: ``offset`` entries
    skipped, at most ``limit``. A forgotten memory's history ends with ``forgotten``
    and shows no text; an id ``ns`` has no memory under is NotFound, as for any read."""
    if not isinstance(record_id, str):
        raise InvalidInput("record id must be a string")
    check_utf8("record id", record_id)
    check_page(limit, offset)
    places = store.index.history_of(ns, record_id)
    if not places:
        raise NotFound(
            f"no memory {record_id!r} in namespace {ns!r}",
            "only memories have a history; check the id and the namespace",
        )
    payloads = [(seq, store.haystack.read(address)) for seq, address in places]
    forgotten = any(
        p.get("op") in ("tombstone", PURGED_OP) and p.get("id") == record_id for _, p in payloads
    )
    if forgotten:
        payloads = [(seq, _as_purged(p)) for seq, p in payloads]
    entries = list(_fold(record_id, payloads, redacted=forgotten))
    return entries[offset : offset + limit]


def _as_purged(p: dict[str, Any]) -> dict[str, Any]:
    """What an erasure keeps of a forgotten memory's record (``storage.purge``): its put
    becomes a stub, any other record keeps ids, relation names, numbers and times."""
    if p.get("op") == "put":
        return {"op": PURGED_OP, "ns": p.get("ns"), "id": p.get("id"), "type": p.get("type")}
    return {k: v for k, v in p.items() if k in KEPT_FIELDS}


def _fold(
    rid: str, payloads: list[tuple[int, dict[str, Any]]], *, redacted: bool
) -> list[HistoryEntry]:
    state: dict[str, Any] = {}
    edges: dict[tuple[str, str, str], None] = {}  # this memory's edges now (src, dst, rel)
    out: list[HistoryEntry] = []
    for seq, p in payloads:
        op = p.get("op")
        at = p.get("ts")
        common: dict[str, Any] = {
            "seq": seq,
            "at": None if at is None else float(at),
            "by": p.get("by"),
            "redacted": redacted,
        }
        if op in ("put", PURGED_OP):
            scores = p.get("scores") or {}
            first = {k: scores.get(k, p.get(k)) for k in _FIRST}
            first.update({k: p[k] for k in SCORE_FIELDS if k in p and k not in first})
            first = {k: v for k, v in first.items() if v is not None}
            state.update(first)
            out.append(
                HistoryEntry(
                    change="created",
                    fields=tuple(FieldChange(k, None, v) for k, v in first.items()),
                    text=p.get("text"),
                    kind=p.get("kind"),
                    source=p.get("source"),
                    **common,
                )
            )
        elif op in ("score", "status"):
            changed = tuple(FieldChange(k, state.get(k), p[k]) for k in SCORE_FIELDS if k in p)
            state.update({c.field: c.new for c in changed})
            out.append(
                HistoryEntry(change="changed", fields=changed, reason=p.get("reason"), **common)
            )
        elif op in ("edge", "unedge"):
            key = (str(p["src"]), str(p["dst"]), str(p["rel"]))
            if op == "edge":
                edges[key] = None
            else:
                edges.pop(key, None)
            outgoing = key[0] == rid
            out.append(
                HistoryEntry(
                    change="related" if op == "edge" else "unrelated",
                    rel=key[2],
                    other=key[1] if outgoing else key[0],
                    outgoing=outgoing,
                    weight=float(p.get("weight", 1.0)) if op == "edge" else None,
                    **common,
                )
            )
        elif op == "tombstone" and p.get("id") == rid:
            out.append(HistoryEntry(change="forgotten", **common))
        elif op == "tombstone":
            # The record at the other end of some of this memory's edges was forgotten.
            other = str(p.get("id"))
            lost = [k for k in edges if other in (k[0], k[1])]
            for key in lost:
                del edges[key]
                out.append(
                    HistoryEntry(
                        change="unrelated",
                        rel=key[2],
                        other=other,
                        outgoing=key[0] == rid,
                        reason=None if redacted else f"{other} was forgotten",
                        **common,
                    )
                )
    return out
