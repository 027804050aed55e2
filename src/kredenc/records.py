"""Records and result types shared by every layer.

A *record* is one JSON payload in the haystack. The types here are the typed views
the engine hands to callers; they are plain dataclasses so that every interface can
serialise them with :func:`dataclasses.asdict`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# Payload ``op`` values (docs/architecture.md, "The log format").
Op = Literal["put", "edge", "unedge", "score", "status", "tombstone", "access", "commit", "purged"]
OPS: frozenset[str] = frozenset(
    {"put", "edge", "unedge", "score", "status", "tombstone", "access", "commit", "purged"}
)

# What a ``put`` record holds.
RecordType = Literal["memory", "chunk", "document", "turn"]

MEMORY_KINDS = ("fact", "concept", "task", "event", "decision", "skill", "preference", "note")
STATUSES = ("unvalidated", "validated", "disputed", "deprecated")

_ID_PREFIX = {"memory": "m", "chunk": "c", "document": "d", "turn": "t"}


# Ids come from the OS's random source, drawn 4 KiB at a time rather than a system call
# per id (an ask makes three ids; each call let the filing thread take the interpreter).
# Not a seeded generator: ids then stay unpredictable from ids already seen. The pool is
# emptied in a forked child, so a forked server worker never repeats its parent's ids
# (tests/recall/test_filing.py).
class _RandomPool:
    SIZE = 4096

    def __init__(self) -> None:
        self.data = bytearray()
        self.lock = threading.Lock()

    def after_fork(self) -> None:
        self.data.clear()
        self.lock = threading.Lock()  # a lock another thread held at the fork stays held

    def take(self, n_bytes: int) -> bytes:
        with self.lock:
            if len(self.data) < n_bytes:
                self.data.extend(os.urandom(max(self.SIZE, n_bytes)))
            out = bytes(self.data[-n_bytes:])
            del self.data[-n_bytes:]
        return out


_POOL = _RandomPool()
os.register_at_fork(after_in_child=_POOL.after_fork)


def random_hex(n_bytes: int) -> str:
    """``2 * n_bytes`` random hex digits (from ``os.urandom``) for ids and names."""
    return _POOL.take(n_bytes).hex()


def new_id(record_type: str) -> str:
    """A new record id: a type letter, 12 hex digits of milliseconds, 8 random hex."""
    ms = int(time.time() * 1000)
    return f"{_ID_PREFIX.get(record_type, 'r')}{ms:012x}{random_hex(4)}"


def is_new_id(value: object, record_type: str) -> bool:
    """Whether ``value`` has the form :func:`new_id` gives ``record_type``'s ids (for
    ids a caller made in advance, e.g. a filing deferred to another thread)."""
    prefix = _ID_PREFIX.get(record_type, "r")
    return (
        isinstance(value, str)
        and len(value) == 21
        and value.startswith(prefix)
        and all(c in "0123456789abcdef" for c in value[1:])
    )


def now() -> float:
    return time.time()


@dataclass(frozen=True)
class Appended:
    """Where a record landed in the haystack."""

    seq: int
    offset: int


@dataclass
class Memory:
    """A filed memory (or any ``put`` record) as read back: the log's text, the
    index's current state (scores and status change through ``score`` records)."""

    id: str
    text: str
    kind: str = "note"
    drawer: str = "memories"
    namespace: str = "default"
    type: str = "memory"
    tags: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    importance: float = 0.5
    confidence: float = 0.5
    stability: float = 0.5
    status: str = "unvalidated"
    source: str = "user"
    read_only: bool = False
    episode_id: str | None = None
    task_status: str | None = None
    valid_from: float | None = None
    valid_to: float | None = None
    created_at: float = 0.0
    seq: int = 0
    offset: int = 0
    # Whose it is inside the namespace (fields.SCOPE_IDS): set when filed, or None.
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    @classmethod
    def from_payload(
        cls, payload: dict[str, Any], offset: int, state: dict[str, Any] | None = None
    ) -> Memory:
        scores = payload.get("scores") or {}
        cur = state or {}

        def pick(key: str, default: Any) -> Any:
            if key in cur:
                return cur[key]
            if key in scores:
                return scores[key]
            return payload.get(key, default)

        return cls(
            id=payload["id"],
            text=payload.get("text", ""),
            kind=payload.get("kind", "note"),
            drawer=payload.get("drawer", "memories"),
            namespace=payload.get("ns", "default"),
            type=payload.get("type", "memory"),
            tags=tuple(payload.get("tags") or ()),
            meta=dict(payload.get("meta") or {}),
            importance=float(pick("importance", 0.5)),
            confidence=float(pick("confidence", 0.5)),
            stability=float(pick("stability", 0.5)),
            status=str(pick("status", "unvalidated")),
            source=str(payload.get("source") or "user"),
            read_only=bool(payload.get("read_only", False)),
            episode_id=pick("episode_id", None),
            task_status=pick("task_status", None),
            valid_from=pick("valid_from", None),
            valid_to=pick("valid_to", None),
            created_at=float(payload.get("ts", 0.0)),
            seq=int(payload["seq"]),
            offset=offset,
            user_id=payload.get("user_id"),
            agent_id=payload.get("agent_id"),
            run_id=payload.get("run_id"),
        )


@dataclass(frozen=True)
class LegScore:
    """One retrieval leg's opinion of a hit: its 1-based rank and raw score."""

    rank: int
    score: float


@dataclass
class Hit:
    """One search result with its provenance and each leg's contribution."""

    id: str
    text: str
    score: float
    kind: str
    drawer: str
    type: str = "memory"
    legs: dict[str, LegScore] = field(default_factory=dict)
    fused: float = 0.0
    rerank: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    seq: int = 0
    offset: int = 0
    created_at: float = 0.0
    # Provenance of document chunks: where the text came from.
    title: str = ""
    origin: str = ""
    page: int | None = None
    start_s: float | None = None
    doc_id: str | None = None
    graph: str | None = None  # set when graph expansion added the hit: "<rel> of <id>"
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    # The calibrated probability that the hit is relevant to the query, in [0, 1], the
    # same scale across queries (retrieve/relevance.py); None when not computed (a
    # lexical-only search without min_score). ``score`` stays the rank score (``fused``
    # plus, in hybrid search's top 12, the coverage bonus: retrieve/coverage.py).
    relevance: float | None = None


class Hits(list[Hit]):
    """A search's hits, best first, and what the search read of its query:
    ``corrections`` maps each misspelt query word to the word searched for it (the
    ``spelling`` setting; empty when none was). A list: everything a list of hits
    does, it does."""

    def __init__(
        self, hits: Iterable[Hit] = (), corrections: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(hits)
        self.corrections: dict[str, str] = dict(corrections or {})


def corrections_of(hits: Sequence[Hit]) -> dict[str, str]:
    """The misspelt query words of a search and the words searched for them (``{}``
    for a plain list of hits)."""
    return dict(hits.corrections) if isinstance(hits, Hits) else {}


@dataclass
class GraphNode:
    """A record in a ContextGraph, with why it is there and how it ranked."""

    id: str
    type: str
    kind: str
    text: str
    score: float
    similarity: float
    importance: float
    recency: float
    hop: int = 0
    via: str | None = None
    created_at: float = 0.0
    status: str = "unvalidated"
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class GraphEdge:
    src: str
    dst: str
    rel: str
    weight: float = 1.0


@dataclass
class ContextGraph:
    """The structured result of ``context_graph``: ranked nodes and typed edges."""

    query: str
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)

    def to_prompt_text(self, budget_chars: int = 2000) -> str:
        """A compact, readable rendering that never exceeds ``budget_chars``."""
        if budget_chars <= 0:
            return ""
        lines: list[str] = []
        used = 0
        shown: set[str] = set()
        for node in self.nodes:
            when = (
                time.strftime("%Y-%m-%d", time.gmtime(node.created_at)) if node.created_at else ""
            )
            head = f"[{node.id}] ({node.kind or node.type}{', ' + when if when else ''}"
            head += f", {node.status})" if node.status not in ("", "unvalidated") else ")"
            text = " ".join(node.text.split())
            line = f"{head} {text}"
            room = budget_chars - used - (1 if lines else 0)
            if room <= len(head) + 8:
                break
            if len(line) > room:
                line = _cut_words(line, room)
            lines.append(line)
            used += len(line) + (1 if len(lines) > 1 else 0)
            shown.add(node.id)
        for edge in self.edges:
            if edge.src in shown and edge.dst in shown:
                line = f"[{edge.src}] {edge.rel} [{edge.dst}]"
                if used + 1 + len(line) > budget_chars:
                    break
                lines.append(line)
                used += 1 + len(line)
        return "\n".join(lines)


def _cut_words(text: str, limit: int, marker: str = " …") -> str:
    """``text`` cut on a word boundary to at most ``limit`` characters, with a marker."""
    if len(text) <= limit:
        return text
    room = max(0, limit - len(marker))
    cut = text[:room]
    space = cut.rfind(" ")
    if space > room // 2:
        cut = cut[:space]
    return (cut + marker)[:limit]
