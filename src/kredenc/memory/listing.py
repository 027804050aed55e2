"""Listing a namespace's memories, documents and sessions, page by page.

Every function takes the open :class:`~kredenc.storage.store.Store` and the namespace
``ns`` (the :class:`~kredenc.engine.Kredenc` facade calls them with its own) and reads
through the index's named methods (``Index.list_records``, ``Index.sessions``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kredenc import plugins
from kredenc.errors import InvalidInput, NotFound, shown
from kredenc.fields import parse_time
from kredenc.memory.writes import live_record
from kredenc.records import MEMORY_KINDS, STATUSES, GraphEdge, Memory
from kredenc.storage.index.filters import scope_filters
from kredenc.storage.index.reads import RecordQuery

if TYPE_CHECKING:
    from kredenc.storage.store import Store

MAX_LIMIT = 10_000


@dataclass(frozen=True)
class DocumentEntry:
    """A filed document: its id, where it came from, how it was read, its chunks."""

    id: str
    origin: str
    title: str
    loader: str
    drawer: str
    version: int
    chunks: int
    created_at: float


@dataclass(frozen=True)
class SessionEntry:
    """A session with live turns: how many, and the first and last turn's time."""

    session: str
    turns: int
    first_at: float
    last_at: float


def check_page(limit: int, offset: int) -> None:
    """Refuse a page that is not 1..MAX_LIMIT items from an offset of at least 0."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput(f"offset must be a whole number of at least 0, not {offset!r}")


def _choices(what: str, values: Sequence[str], allowed: Sequence[str]) -> tuple[str, ...]:
    for value in values:
        if value not in allowed:
            raise InvalidInput(f"unknown {what} {shown(value)}", f"use one of {', '.join(allowed)}")
    return tuple(values)


def list_memories(
    store: Store,
    ns: str,
    /,
    *,
    kinds: Sequence[str] = (),
    statuses: Sequence[str] = (),
    tags: Sequence[str] = (),
    drawer: str | None = None,
    since: Any = None,
    until: Any = None,
    limit: int = 50,
    offset: int = 0,
    user_id: str | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
) -> list[Memory]:
    """Live memories of ``ns`` in filing order (oldest first), ``offset`` skipped and
    at most ``limit``: of any of ``kinds`` and ``statuses``, carrying every one of
    ``tags``, in ``drawer``, filed at or after ``since`` and before ``until`` (ISO 8601
    or Unix seconds), filed with the ``user_id``, ``agent_id`` and ``run_id`` given."""
    check_page(limit, offset)
    scope = scope_filters(user_id=user_id, agent_id=agent_id, run_id=run_id, tags=tags)
    query = RecordQuery(
        types=("memory",),
        kinds=_choices("kind", kinds, MEMORY_KINDS),
        statuses=_choices("status", statuses, STATUSES),
        drawer=drawer,
        since=parse_time(since, "since"),
        until=parse_time(until, "until"),
        user_id=scope["user_id"],
        agent_id=scope["agent_id"],
        run_id=scope["run_id"],
        tags=scope["tags"],
    )
    rows = store.index.list_records(ns, query, limit, offset)
    return [_memory(store, ns, rid, off) for rid, off in rows]


def _memory(store: Store, ns: str, rid: str, offset: int) -> Memory:
    found = store.index.lookup(ns, rid)
    state = found.state if found is not None else None
    return Memory.from_payload(store.haystack.read(offset), offset, state)


def list_documents(
    store: Store,
    ns: str,
    /,
    *,
    loaders: Sequence[str] = (),
    source: str | None = None,
    drawer: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[DocumentEntry]:
    """Live documents of ``ns`` in filing order: read by any of ``loaders``, filed
    from an origin matching the glob ``source`` (``*.pdf``, ``docs/*``), in ``drawer``."""
    check_page(limit, offset)
    for loader in loaders:  # a mistyped loader would match nothing, silently (as search)
        plugins.get(plugins.LOADERS, loader)
    query = RecordQuery(
        types=("document",), loaders=tuple(loaders), origin_glob=source, drawer=drawer
    )
    rows = store.index.list_records(ns, query, limit, offset)
    return [_entry(store, ns, rid, store.haystack.read(off)) for rid, off in rows]


def _entry(store: Store, ns: str, rid: str, p: dict[str, Any]) -> DocumentEntry:
    return DocumentEntry(
        id=rid,
        origin=str(p.get("origin", "")),
        title=str(p.get("title", "")),
        loader=str(p.get("loader", "")),
        drawer=str(p.get("drawer", "")),
        version=int(p.get("version", 1)),
        chunks=len(store.index.parts_of(ns, rid)),
        created_at=float(p.get("ts", 0.0)),
    )


def read_document(store: Store, ns: str, /, doc_id: str) -> tuple[DocumentEntry, list[Memory]]:
    """A live document of ``ns`` and its live chunks in order; a record that is not a
    document is ``NotFound`` (as a missing one)."""
    found = live_record(store, ns, doc_id)
    if found.state["type"] != "document":
        raise NotFound(
            f"no document {doc_id!r} in namespace {ns!r}",
            "give the id of a document (list them with 'kredenc list documents')",
        )
    entry = _entry(store, ns, doc_id, store.haystack.read(found.offset))
    chunks = []
    for cid in store.index.parts_of(ns, doc_id):
        part = store.index.lookup(ns, cid)
        if part is not None and not part.deleted:
            payload = store.haystack.read(part.offset)
            chunks.append(Memory.from_payload(payload, part.offset, part.state))
    return entry, chunks


def list_sessions(
    store: Store, ns: str, /, *, limit: int = 50, offset: int = 0
) -> list[SessionEntry]:
    """Sessions with live turns in ``ns``, the most recently active first."""
    check_page(limit, offset)
    return [SessionEntry(*row) for row in store.index.sessions(ns, limit, offset)]


def list_relationships(
    store: Store, ns: str, /, *, limit: int = 50, offset: int = 0
) -> list[GraphEdge]:
    """The edges of ``ns`` in the order they were written, ``offset`` skipped and at
    most ``limit`` (the memory graph of the Neuro Core design, page by page)."""
    check_page(limit, offset)
    edges = store.index.edges_of(ns)[offset : offset + limit]
    return [GraphEdge(src, dst, rel, weight) for src, dst, rel, weight in edges]


def relationships_of(store: Store, ns: str, /, record_id: str) -> list[GraphEdge]:
    """The edges from or to the live record ``record_id`` of ``ns``, in the order
    written (NotFound for a missing or foreign id, like any read)."""
    live_record(store, ns, record_id)
    return [
        GraphEdge(src, dst, rel, weight)
        for src, dst, rel, weight in store.index.edges_of(ns)
        if record_id in (src, dst)
    ]


def provenance(store: Store, ns: str, /, record_id: str) -> dict[str, Any] | None:
    """Where a live chunk came from: its document's id and title, the file (origin),
    the page and the loader; None for a record that is not part of a document."""
    found = live_record(store, ns, record_id)
    payload = store.haystack.read(found.offset)
    doc_id = payload.get("doc_id")
    if payload.get("type") != "chunk" and not doc_id:
        return None
    title = payload.get("title") or ""
    if doc_id:
        doc = store.index.lookup(ns, str(doc_id))
        if doc is not None and not doc.deleted:
            title = store.haystack.read(doc.offset).get("title") or title
    return {
        "document": doc_id,
        "title": title,
        "file": payload.get("origin"),
        "page": payload.get("page"),
        "loader": payload.get("loader"),
    }
