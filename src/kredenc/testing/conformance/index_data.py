"""The made-up log and the records the index conformance suite applies.

``passes`` writes out what each :class:`~kredenc.storage.index.filters.Filters` field
means for a record: the reference the legs are checked against.
"""

from __future__ import annotations

import fnmatch
from dataclasses import fields
from typing import Any

from kredenc.storage.index.filters import Filters

__all__ = [
    "FILTERED",
    "FILTERS",
    "SCOPED",
    "SEARCHABLE",
    "Records",
    "edge",
    "label",
    "passes",
    "put",
    "tombstone",
]

SEARCHABLE = ("memory", "chunk", "turn")


class Records:
    """A made-up log: seqs and addresses for payloads, applied in batches."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, dict[str, Any]]] = []

    @property
    def seq(self) -> int:
        return len(self.entries)

    @property
    def end(self) -> int:
        return 100 + 10 * (self.seq + 1)

    def add(self, *payloads: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for payload in payloads:
            seq = self.seq + 1
            entry = (100 + 10 * seq, {"seq": seq, **payload})
            self.entries.append(entry)
            out.append(entry)
        return out


def put(
    ns: str,
    rid: str,
    text: str,
    *,
    type: str = "memory",
    drawer: str = "main",
    kind: str = "fact",
    ts: float = 1000.0,
    **extra: Any,
) -> dict[str, Any]:
    """A ``put`` payload as the engine and ingest write them."""
    payload: dict[str, Any] = {
        "op": "put",
        "ns": ns,
        "id": rid,
        "type": type,
        "drawer": drawer,
        "kind": kind,
        "ts": ts,
        "text": text,
    }
    payload.update(extra)
    return payload


def edge(ns: str, src: str, dst: str, rel: str, weight: float = 1.0) -> dict[str, Any]:
    return {"op": "edge", "ns": ns, "src": src, "dst": dst, "rel": rel, "weight": weight}


def tombstone(ns: str, rid: str) -> dict[str, Any]:
    return {"op": "tombstone", "ns": ns, "id": rid, "ts": 2000.0}


# The records of the filter test (namespace "a"): every card holds "marker".
FILTERED: list[dict[str, Any]] = [
    put(
        "a",
        "m1",
        "marker alpha",
        kind="fact",
        ts=100.0,
        user_id="u1",
        agent_id="ag1",
        tags=["red", "blue", "ñandú"],
        meta={"project": "apollo", "n": 1, "flag": True, "who": 'Ålex "the" \\ one'},
    ),
    put(
        "a",
        "m2",
        "marker beta",
        drawer="work",
        kind="task",
        ts=200.0,
        valid_from=150.0,
        valid_to=250.0,
        user_id="u2",
        run_id="r1",
        tags=["red"],
        meta={"project": "gemini", "n": "1", "flag": False, "none": None},
    ),
    put(
        "a",
        "m3",
        "marker gamma",
        kind="preference",
        ts=300.0,
        status="deprecated",
        user_id="u1",
        tags=["red"],
        meta={"project": "apollo"},
    ),
    put(
        "a",
        "c4",
        "marker delta",
        type="chunk",
        drawer="docs",
        kind="",
        ts=400.0,
        loader="markdown",
        origin="docs/a.md",
        page=1,
        doc_id="d1",
        user_id="u1",
        tags=["blue"],
        meta={"n": 1.0},
    ),
    put(
        "a",
        "c5",
        "marker epsilon",
        type="chunk",
        drawer="docs",
        kind="",
        ts=500.0,
        loader="pdf",
        origin="docs/b.pdf",
        page=3,
        doc_id="d2",
    ),
    put(
        "a",
        "c6",
        "marker zeta",
        type="chunk",
        drawer="docs",
        kind="",
        ts=600.0,
        loader="pdf",
        origin="notes/c.pdf",
        page=7,
    ),
    put(
        "a",
        "t7",
        "marker eta",
        type="turn",
        drawer="chat",
        kind="",
        ts=700.0,
        valid_to=800.0,
        user_id="u1",
        agent_id="ag2",
        run_id="r1",
        meta={"session": "s7", "project": "apollo"},
    ),
    put(
        "a",
        "m8",
        "marker theta",
        ts=800.0,
        valid_from=900.0,
        meta={"none": None, "nested": {"project": "apollo"}, "n": [1]},
    ),
    put(
        "a",
        "d1",
        "marker document",
        type="document",
        drawer="docs",
        kind="",
        ts=400.0,
        origin="docs/a.md",
        content_hash="h1",
        version=1,
    ),
]

# The scope, tag and meta filters (also compared between an index and its rebuild).
SCOPED: list[Filters] = [
    Filters(user_id="u1"),
    Filters(user_id="u1", include_deprecated=True),
    Filters(user_id="nobody"),
    Filters(agent_id="ag1"),
    Filters(run_id="r1"),
    Filters(user_id="u1", run_id="r1"),
    Filters(tags=("red",)),
    Filters(tags=("red", "blue")),
    Filters(tags=("blue",), types=("chunk",)),
    Filters(where=(("project", "apollo"),)),
    Filters(where=(("n", 1),)),
    Filters(where=(("n", "1"),)),
    Filters(where=(("flag", True),)),
    Filters(where=(("flag", False),)),
    Filters(where=(("none", None),)),
    Filters(where=(("n", 1), ("project", "apollo"))),
    Filters(user_id="u1", tags=("blue",), where=(("n", 1),)),
    # Text beyond ASCII, quotes and backslashes match as filed.
    Filters(tags=("ñandú",)),
    Filters(where=(("who", 'Ålex "the" \\ one'),)),
    Filters(where=(("who", "Ålex"),)),
]

FILTERS: list[Filters] = [
    Filters(),
    Filters(drawer="main"),
    Filters(drawer="docs"),
    Filters(drawer="nowhere"),
    Filters(types=("chunk",)),
    Filters(types=("memory", "turn")),
    Filters(kinds=("fact", "task")),
    Filters(include_deprecated=True),
    Filters(older_than=300.0),
    Filters(as_of=260.0),
    Filters(as_of=225.0),
    Filters(as_of=950.0, include_deprecated=True),
    Filters(loaders=("pdf",)),
    Filters(origin_glob="docs/*"),
    Filters(pages=(2, 7)),
    Filters(created_after=500.0),
    Filters(created_before=500.0),
    Filters(drawer="docs", loaders=("pdf", "markdown"), pages=(1, 3), created_after=450.0),
    *SCOPED,
]


def label(f: Filters) -> str:
    """A short test id for ``f``: the fields it sets."""
    default = Filters()
    return (
        ",".join(
            f"{k.name}={getattr(f, k.name)}"
            for k in fields(f)
            if getattr(f, k.name) != getattr(default, k.name)
        )
        or "none"
    )


def passes(p: dict[str, Any], f: Filters) -> bool:
    """What ``f`` means for a put payload, written out (the reference for the legs)."""
    ts = float(p["ts"])
    status = p.get("status", "unvalidated")
    checks = [
        p["type"] in SEARCHABLE,
        f.drawer is None or p["drawer"] == f.drawer,
        not f.types or p["type"] in f.types,
        not f.kinds or p["kind"] in f.kinds,
        f.include_deprecated or status != "deprecated",
        f.older_than is None or ts < f.older_than,
        not f.loaders or p.get("loader") in f.loaders,
        f.origin_glob is None
        or (p.get("origin") is not None and fnmatch.fnmatchcase(p["origin"], f.origin_glob)),
        f.pages is None or (p.get("page") is not None and f.pages[0] <= p["page"] <= f.pages[1]),
        f.created_after is None or ts >= f.created_after,
        f.created_before is None or ts < f.created_before,
        f.as_of is None
        or (
            ts <= f.as_of
            and (p.get("valid_from") is None or p["valid_from"] <= f.as_of)
            and (p.get("valid_to") is None or p["valid_to"] > f.as_of)
        ),
        f.user_id is None or p.get("user_id") == f.user_id,
        f.agent_id is None or p.get("agent_id") == f.agent_id,
        f.run_id is None or p.get("run_id") == f.run_id,
        all(tag in (p.get("tags") or ()) for tag in f.tags),
        all(_same_json(p.get("meta") or {}, key, value) for key, value in f.where),
    ]
    return all(checks)


def _same_json(meta: dict[str, Any], key: str, value: Any) -> bool:
    """``meta[key]`` is ``value`` as JSON: the same type (numbers are one type) and
    equal; a missing key never is."""
    if key not in meta:
        return False
    have = meta[key]
    if value is None or isinstance(value, bool | str):
        return type(have) is type(value) and have == value
    return type(have) in (int, float) and have == value
