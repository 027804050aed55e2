"""Reads of the index: records, documents, edges, scores, vectors and stats.

Each function runs on the connection it is given (a reading thread's own); every
query binds the namespace inside the SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kredenc.storage.index.filters import Filters, record_conditions
from kredenc.storage.index.schema import STATE_COLUMNS, shard_key
from kredenc.storage.index.vectors import F32, I64


@dataclass(frozen=True)
class IndexedRecord:
    rowid: int
    id: str
    offset: int
    deleted: bool
    state: dict[str, Any]


def lookup(conn: sqlite3.Connection, ns: str, rid: str) -> IndexedRecord | None:
    """The record's place and current state (scores, status, validity)."""
    cols = ", ".join(STATE_COLUMNS)
    row = conn.execute(
        f"SELECT rowid, id, offset, deleted, {cols} FROM records WHERE ns=? AND id=?",
        (ns, rid),
    ).fetchone()
    if row is None:
        return None
    state = dict(zip(STATE_COLUMNS, row[4:], strict=True))
    state["read_only"] = bool(state["read_only"])
    return IndexedRecord(row[0], row[1], row[2], bool(row[3]), state)


def document(conn: sqlite3.Connection, ns: str, origin: str) -> tuple[str, str, int] | None:
    """The live document filed from ``origin``: (doc id, content hash, version)."""
    row = conn.execute(
        "SELECT d.doc_id, d.content_hash, d.version FROM documents d JOIN records r"
        " ON r.id = d.doc_id WHERE d.ns=? AND d.source=? AND r.deleted=0",
        (ns, origin),
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), int(row[2]))


def parts_of(conn: sqlite3.Connection, ns: str, doc_id: str) -> list[str]:
    """Ids of the live chunks of a document, in filing order."""
    rows = conn.execute(
        "SELECT id FROM records WHERE ns=? AND doc_id=? AND deleted=0 ORDER BY seq",
        (ns, doc_id),
    ).fetchall()
    return [str(r[0]) for r in rows]


def session_turns(
    conn: sqlite3.Connection, ns: str, session: str, limit: int
) -> list[tuple[str, int]]:
    """The live turns of ``session`` in ``ns`` as (id, address), newest first, at most
    ``limit``."""
    rows = conn.execute(
        "SELECT id, offset FROM records WHERE ns=? AND session=? AND type='turn'"
        " AND deleted=0 ORDER BY seq DESC LIMIT ?",
        (ns, session, max(0, int(limit))),
    ).fetchall()
    return [(str(i), int(o)) for i, o in rows]


def history_of(conn: sqlite3.Connection, ns: str, rid: str) -> list[tuple[int, int]]:
    """(seq, address) of every log record in the history of memory ``rid`` of ``ns``
    (its put, then each change that touched it), oldest first; empty for an id ``ns``
    never had a memory by, forgotten and erased ones included."""
    rows = conn.execute(
        "SELECT seq, offset FROM history WHERE ns=? AND id=? ORDER BY seq", (ns, rid)
    ).fetchall()
    return [(int(s), int(o)) for s, o in rows]


def neighbours(
    conn: sqlite3.Connection, ns: str, ids: Sequence[str]
) -> list[tuple[str, str, str, float]]:
    """Edges touching ``ids`` as (seed id, neighbour id, relation, weight), both ways."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    out = [
        (str(a), str(b), str(rel), float(w))
        for a, b, rel, w in conn.execute(
            f"SELECT src, dst, rel, weight FROM edges WHERE ns=? AND src IN ({marks})",
            (ns, *ids),
        )
    ]
    out.extend(
        (str(b), str(a), str(rel), float(w))
        for a, b, rel, w in conn.execute(
            f"SELECT src, dst, rel, weight FROM edges WHERE ns=? AND dst IN ({marks})",
            (ns, *ids),
        )
    )
    return out


def rowids_for(
    conn: sqlite3.Connection, ns: str, ids: Sequence[str], filters: Filters
) -> dict[str, int]:
    """id -> rowid for live, searchable records of ``ns`` that pass ``filters``."""
    if not ids:
        return {}
    where, args = record_conditions(filters)
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT r.id, r.rowid FROM records r WHERE r.id IN ({marks}) AND +r.ns = ?"
        f" AND r.type IN ('memory', 'chunk', 'turn')" + where,
        (*ids, ns, *args),
    ).fetchall()
    return {str(i): int(r) for i, r in rows}


def node_info(
    conn: sqlite3.Connection, ns: str, rowids: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """Current state of live records for ranking: ids, offsets, scores, access."""
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(
        "SELECT r.rowid, r.id, r.offset, r.type, r.kind, r.importance, r.created_at,"
        " r.status, coalesce(a.count, 0), a.last_at FROM records r"
        f" LEFT JOIN access a ON a.id = r.id WHERE r.rowid IN ({marks})"
        " AND +r.ns=? AND r.deleted=0",
        (*rowids, ns),
    ).fetchall()
    keys = (
        "id",
        "offset",
        "type",
        "kind",
        "importance",
        "created_at",
        "status",
        "access_count",
        "last_accessed_at",
    )
    return {int(r[0]): dict(zip(keys, r[1:], strict=True)) for r in rows}


def doc_ids(conn: sqlite3.Connection, ns: str, rowids: Sequence[int]) -> dict[int, str]:
    """rowid -> the document a chunk belongs to (only for records that have one)."""
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(
        f"SELECT rowid, doc_id FROM records WHERE rowid IN ({marks}) AND +ns=?"
        " AND doc_id IS NOT NULL",
        (*rowids, ns),
    )
    return {int(r): str(d) for r, d in rows}


def vectors_of(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, F32]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(f"SELECT rowid, vec FROM vectors WHERE rowid IN ({marks})", tuple(rowids))
    return {int(r): np.frombuffer(v, dtype=np.float32) for r, v in rows}


def edges_among(
    conn: sqlite3.Connection, ns: str, ids: Sequence[str]
) -> list[tuple[str, str, str, float]]:
    """Edges whose both ends are in ``ids``."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT src, dst, rel, weight FROM edges WHERE ns=? AND src IN ({marks})"
        f" AND dst IN ({marks}) ORDER BY seq",
        (ns, *ids, *ids),
    )
    return [(str(a), str(b), str(r), float(w)) for a, b, r, w in rows]


def sources_of(conn: sqlite3.Connection, ns: str, dst: str, rel: str) -> list[str]:
    """Ids of live records with an edge ``rel`` pointing at ``dst``."""
    rows = conn.execute(
        "SELECT e.src FROM edges e JOIN records r ON r.id = e.src"
        " WHERE e.ns=? AND e.dst=? AND e.rel=? AND r.deleted=0 ORDER BY e.seq",
        (ns, dst, rel),
    ).fetchall()
    return [str(r[0]) for r in rows]


def keep(
    conn: sqlite3.Connection, ns: str, found: list[tuple[int, float]], k: int, filters: Filters
) -> list[tuple[int, float]]:
    """Drop candidates that fail the namespace or filters (checked in SQL)."""
    if not found:
        return []
    where, args = record_conditions(filters)
    ok: set[int] = set()
    for start in range(0, len(found), 5000):
        ids = [r for r, _ in found[start : start + 5000]]
        marks = ",".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT r.rowid FROM records r WHERE r.rowid IN ({marks}) AND +r.ns = ?" + where,
            (*ids, ns, *args),
        )
        ok.update(int(r[0]) for r in rows)
        if len(ok) >= k:
            break
    return [(r, s) for r, s in found if r in ok][:k]


def passing_rowids(
    conn: sqlite3.Connection, ns: str, filters: Filters, limit: int
) -> dict[str, list[int]]:
    """The searchable records of ``ns`` that pass ``filters``, per shard key
    (``schema.shard_key``), at most ``limit`` in all (the caller asks for one more than
    it will take, to tell a small set from a cut one)."""
    where, args = record_conditions(filters)
    rows = conn.execute(
        "SELECT r.rowid, r.drawer FROM records r WHERE r.ns = ?"
        " AND r.type IN ('memory', 'chunk', 'turn')" + where + " LIMIT ?",
        (ns, *args, max(0, int(limit))),
    )
    out: dict[str, list[int]] = {}
    for rowid, drawer in rows:
        out.setdefault(shard_key(ns, str(drawer)), []).append(int(rowid))
    return out


def resolve(conn: sqlite3.Connection, ns: str, rowids: Sequence[int]) -> dict[int, tuple[str, int]]:
    """rowid -> (id, offset) for live records of ``ns``."""
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(
        f"SELECT rowid, id, offset FROM records WHERE rowid IN ({marks}) AND +ns=? AND deleted=0",
        (*rowids, ns),
    ).fetchall()
    return {int(r): (i, int(o)) for r, i, o in rows}


def stats(conn: sqlite3.Connection, ns: str) -> dict[str, Any]:
    by_drawer = conn.execute(
        "SELECT drawer, type, count(*) FROM records WHERE ns=? AND deleted=0"
        " GROUP BY drawer, type ORDER BY drawer, type",
        (ns,),
    ).fetchall()
    return {
        "records": sum(n for _, _, n in by_drawer),
        "drawers": [{"drawer": d, "type": t, "records": n} for d, t, n in by_drawer],
        "edges": conn.execute("SELECT count(*) FROM edges WHERE ns=?", (ns,)).fetchone()[0],
    }


def read_vectors(conn: sqlite3.Connection, dim: int) -> dict[str, tuple[I64, F32]]:
    """Every stored vector, per shard key, in rowid order.

    Rows are copied one by one into arrays sized from a count, so no list of
    100,000 blobs is held and joined (that took the first search's peak memory
    150 MB higher and left the heap fragmented).
    """
    counts = dict(conn.execute("SELECT shard, count(*) FROM vectors GROUP BY shard"))
    ids = {key: np.empty(n, dtype=np.int64) for key, n in counts.items()}
    mats = {key: np.empty((n, dim), dtype=np.float32) for key, n in counts.items()}
    fill = dict.fromkeys(counts, 0)
    for rowid, key, vec in conn.execute("SELECT rowid, shard, vec FROM vectors ORDER BY rowid"):
        i = fill.get(key, 0)
        if key not in ids or i == len(ids[key]):  # rows written since the count
            more_ids = np.empty(2 * i + 64, dtype=np.int64)
            more = np.empty((2 * i + 64, dim), dtype=np.float32)
            if i:
                more_ids[:i], more[:i] = ids[key][:i], mats[key][:i]
            ids[key], mats[key] = more_ids, more
        ids[key][i] = rowid
        mats[key][i] = np.frombuffer(vec, dtype=np.float32)
        fill[key] = i + 1
    return {key: (ids[key][:n], mats[key][:n]) for key, n in fill.items() if n}


def vectors_after(conn: sqlite3.Connection, rowid: int, dim: int) -> dict[str, tuple[I64, F32]]:
    """The vectors of records after ``rowid``, per shard key, in rowid order."""
    grouped: dict[str, tuple[list[int], list[F32]]] = {}
    for rid, key, vec in conn.execute(
        "SELECT rowid, shard, vec FROM vectors WHERE rowid > ? ORDER BY rowid", (rowid,)
    ):
        ids, vecs = grouped.setdefault(key, ([], []))
        ids.append(int(rid))
        vecs.append(np.frombuffer(vec, dtype=np.float32))
    return {
        key: (np.asarray(ids, dtype=np.int64), np.vstack(vecs).reshape(len(ids), dim))
        for key, (ids, vecs) in grouped.items()
    }


def cached_vectors(
    conn: sqlite3.Connection, model_id: str, hashes: Sequence[bytes]
) -> dict[bytes, F32]:
    out: dict[bytes, F32] = {}
    for start in range(0, len(hashes), 500):
        part = hashes[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"SELECT hash, vec FROM cache.embeddings WHERE model=? AND hash IN ({marks})",
            (model_id, *part),
        )
        for h, vec in rows:
            out[h] = np.frombuffer(vec, dtype=np.float32)
    return out


# -- queries for the memory jobs (the lifecycle jobs and reflection read through these)
MEMORY_ROW_COLUMNS = (
    "rowid",
    "id",
    "offset",
    "created_at",
    "kind",
    "drawer",
    "importance",
    "status",
    "source",
    "episode_id",
    "read_only",
)


def live_memory_rows(
    conn: sqlite3.Connection,
    ns: str,
    *,
    not_status: str | None = None,
    reflections: bool | None = None,
    writable_only: bool = False,
    in_episode: bool = False,
    episode_id: str | None = None,
) -> list[tuple[Any, ...]]:
    """Live memories of ``ns`` in filing order, one tuple of :data:`MEMORY_ROW_COLUMNS`
    each (a missing source reads ``'user'``).

    ``not_status`` leaves out that status; ``reflections`` keeps only memories whose
    source is ``reflection`` (True) or leaves them out (False); ``writable_only`` leaves
    out read-only ones; ``in_episode`` keeps those with an episode, and ``episode_id``
    those of that episode.
    """
    where = ["ns = ?", "type = 'memory'", "deleted = 0"]
    args: list[Any] = [ns]
    if in_episode:
        where.append("episode_id IS NOT NULL")
    if not_status is not None:
        where.append("status != ?")
        args.append(not_status)
    if reflections is not None:
        where.append(f"coalesce(source, 'user') {'=' if reflections else '!='} 'reflection'")
    if writable_only:
        where.append("read_only = 0")
    if episode_id is not None:
        where.append("episode_id = ?")
        args.append(episode_id)
    sql = (
        "SELECT rowid, id, offset, created_at, kind, drawer, importance, status,"
        " coalesce(source, 'user'), episode_id, read_only FROM records WHERE "
        + " AND ".join(where)
        + " ORDER BY created_at, seq"
    )
    return [tuple(r) for r in conn.execute(sql, args).fetchall()]


def targets_of(conn: sqlite3.Connection, ns: str, src: str, rel: str) -> set[str]:
    """Ids ``src`` has an edge ``rel`` to (deleted ends included: edges of a forgotten
    record go with its tombstone)."""
    rows = conn.execute(
        "SELECT dst FROM edges WHERE ns = ? AND src = ? AND rel = ?", (ns, src, rel)
    )
    return {str(r[0]) for r in rows}


def edge_pairs(conn: sqlite3.Connection, ns: str, rel: str) -> list[tuple[str, str]]:
    """Every edge ``rel`` of ``ns`` as (src, dst)."""
    rows = conn.execute("SELECT src, dst FROM edges WHERE ns = ? AND rel = ?", (ns, rel))
    return [(str(a), str(b)) for a, b in rows]


def live_count(conn: sqlite3.Connection) -> int:
    """Live (not forgotten) records of every namespace."""
    return int(conn.execute("SELECT count(*) FROM records WHERE deleted=0").fetchone()[0])


@dataclass(frozen=True)
class RecordQuery:
    """What ``list_records`` selects: live records of one namespace (all when a field
    is empty or None), in filing order. Times are Unix seconds (``created_at``)."""

    types: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    drawer: str | None = None
    loaders: tuple[str, ...] = ()
    origin_glob: str | None = None
    since: float | None = None
    until: float | None = None
    session: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    tags: tuple[str, ...] = ()


def listing_filters(query: RecordQuery) -> Filters:
    """The legs' filters a listing shares (every status included); ``statuses`` and
    ``session`` are the listing's own (each backend adds them)."""
    return Filters(
        drawer=query.drawer,
        types=tuple(query.types),
        kinds=tuple(query.kinds),
        include_deprecated=True,
        loaders=tuple(query.loaders),
        origin_glob=query.origin_glob,
        created_after=None if query.since is None else float(query.since),
        created_before=None if query.until is None else float(query.until),
        user_id=query.user_id,
        agent_id=query.agent_id,
        run_id=query.run_id,
        tags=tuple(query.tags),
    )


def list_records(
    conn: sqlite3.Connection, ns: str, query: RecordQuery, limit: int | None, offset: int
) -> list[tuple[str, int]]:
    """Live records of ``ns`` that ``query`` selects as (id, address), in filing order
    (seq), ``offset`` skipped and at most ``limit`` (all when None)."""
    # The conditions every leg applies (filters.py), every status included; then the
    # two only a listing asks for.
    common, common_args = record_conditions(listing_filters(query))
    where = "r.ns=?" + common
    args: list[Any] = [ns, *common_args]
    if query.statuses:
        where += f" AND r.status IN ({','.join('?' * len(query.statuses))})"
        args.extend(query.statuses)
    if query.session is not None:
        where += " AND r.session=?"
        args.append(query.session)
    rows = conn.execute(
        f"SELECT r.id, r.offset FROM records r WHERE {where} ORDER BY r.seq LIMIT ? OFFSET ?",
        (*args, -1 if limit is None else max(0, int(limit)), max(0, int(offset))),
    ).fetchall()
    return [(str(i), int(o)) for i, o in rows]


def sessions(
    conn: sqlite3.Connection, ns: str, limit: int | None, offset: int
) -> list[tuple[str, int, float, float]]:
    """The sessions with live turns in ``ns`` as (session, turns, first turn's time,
    last turn's time), the most recently active first (ties by name)."""
    rows = conn.execute(
        "SELECT session, count(*), min(created_at), max(created_at) FROM records"
        " WHERE ns=? AND session IS NOT NULL AND type='turn' AND deleted=0"
        " GROUP BY session ORDER BY max(seq) DESC, session LIMIT ? OFFSET ?",
        (ns, -1 if limit is None else max(0, int(limit)), max(0, int(offset))),
    ).fetchall()
    return [(str(s), int(n), float(a), float(b)) for s, n, a, b in rows]


def namespaces(conn: sqlite3.Connection) -> list[str]:
    """Every namespace with a live record, sorted."""
    rows = conn.execute("SELECT DISTINCT ns FROM records WHERE deleted=0 ORDER BY ns").fetchall()
    return [str(r[0]) for r in rows]


def edges_of(conn: sqlite3.Connection, ns: str) -> list[tuple[str, str, str, float]]:
    """Every edge of ``ns`` as (src, dst, rel, weight), in the order they were written."""
    rows = conn.execute(
        "SELECT src, dst, rel, weight FROM edges WHERE ns=? ORDER BY seq, src, dst, rel", (ns,)
    ).fetchall()
    return [(str(a), str(b), str(r), float(w)) for a, b, r, w in rows]


def taken_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` the index holds in any namespace, forgotten records included."""
    out: set[str] = set()
    for start in range(0, len(ids), 500):
        part = list(ids[start : start + 500])
        marks = ",".join("?" * len(part))
        rows = conn.execute(f"SELECT id FROM records WHERE id IN ({marks})", part).fetchall()
        out.update(str(r[0]) for r in rows)
    return out
