"""What a recall returns: the messages to send, and what was recalled and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kredenc.records import LegScore


@dataclass(frozen=True)
class RecallItem:
    """One recalled record: what was injected (``line``, and its decoded ``text``) and
    why (its legs' ranks)."""

    n: int  # its number in the block: "#n"
    id: str
    type: str  # memory | turn
    kind: str  # a memory's kind; a turn's speaker role
    score: float  # fused score (the leg's own score when one leg ran)
    legs: dict[str, LegScore]
    created_at: float
    line: str  # the line as injected: one JSON object (kredenc.recall.render)
    truncated: bool
    relations: tuple[str, ...] = ()  # e.g. ("contradicts #2",)
    meta: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # the record's text as injected (cut with " …" when truncated)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "id": self.id,
            "type": self.type,
            "kind": self.kind,
            "score": self.score,
            "legs": {n: {"rank": v.rank, "score": v.score} for n, v in self.legs.items()},
            "created_at": self.created_at,
            "line": self.line,
            "text": self.text,
            "truncated": self.truncated,
            "relations": list(self.relations),
            "meta": self.meta,
        }


@dataclass
class RecallResult:
    """The messages to send, and what was recalled and why.

    ``messages`` is the input with one message (``block``, in the role the
    ``recall_role`` setting names: ``system`` by default) appended, or the input
    unchanged when nothing was recalled, in a dry run, or on any failure (``skipped``
    then says why).
    """

    messages: list[Any]
    items: list[RecallItem] = field(default_factory=list)
    block: str = ""
    injected: bool = False
    dry_run: bool = False
    terms: list[str] = field(default_factory=list)
    session_start: float | None = None
    elapsed_ms: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None
    error: str | None = None
    timed_out: bool = False  # a leg was not ready within the time budget
    warnings: list[str] = field(default_factory=list)
    #: Misspelt words of the message and the words searched for them (``recall_spelling``).
    corrections: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "injected": self.injected,
            "dry_run": self.dry_run,
            "block": self.block,
            "chars": len(self.block),
            "items": [i.to_dict() for i in self.items],
            "terms": self.terms,
            "session_start": self.session_start,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "skipped": self.skipped,
            "error": self.error,
            "timed_out": self.timed_out,
            "warnings": self.warnings,
            "corrections": self.corrections,
        }
