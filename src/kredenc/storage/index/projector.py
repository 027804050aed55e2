"""The log-to-index projector: how each log record changes the index's tables.

``put`` adds a record (its row, card and vector; a document's row in ``documents``),
``tombstone`` marks it deleted and drops its card, vector and edges, ``edge`` and
``unedge`` add and remove edges, ``score``/``status`` update the current scores and
state, ``access`` adds to access counts. Before each record, :func:`note_history`
adds its address to the ``history`` of every memory it touches. Everything runs inside the caller's
transaction; the vector shards in memory are changed by the caller after it commits,
from the adds and removes collected here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from kredenc.errors import StoreError
from kredenc.storage.index.cards import card_of, context_of, embed_text_of, scope_token, text_hash
from kredenc.storage.index.schema import INDEXED_TYPES, SCORE_FIELDS, shard_key
from kredenc.storage.index.vectors import F32

EmbedFn = Callable[[Sequence[str]], F32]
#: Per shard key: the rowids and vectors added by one transaction.
ShardAdds = dict[str, tuple[list[int], list[F32]]]
#: (shard key, rowid) of each vector removed by one transaction.
ShardRemoves = list[tuple[str, int]]
#: What a search may see change: (namespace, record type), or (namespace, EDGES).
Scope = tuple[str, str]
EDGES = "~edges"


class EmbeddingCache(Protocol):
    """Vectors by text hash, for the index's embedding model."""

    def cached_vectors(self, hashes: Sequence[bytes]) -> dict[bytes, F32]: ...

    def cache_vectors(self, items: dict[bytes, F32]) -> None: ...


def fill_vectors(
    entries: list[tuple[int, dict[str, Any]]],
    vectors: dict[str, F32],
    embed: EmbedFn | None,
    cache: EmbeddingCache,
) -> None:
    """Vectors for every indexed put: given, cached by text hash, or embedded now.

    Given vectors (embedded by the caller) go into the cache too, so that a
    rebuild finds every vector there and re-embeds nothing.
    """
    wanted: dict[bytes, str] = {}
    given: dict[bytes, F32] = {}
    for _, p in entries:
        if p.get("op") == "put" and p.get("type") in INDEXED_TYPES:
            text = embed_text_of(p)
            if p["id"] in vectors:
                given[text_hash(text)] = vectors[p["id"]]
            else:
                wanted[text_hash(text)] = text
    if given:
        cache.cache_vectors(given)  # INSERT OR IGNORE: a cached text keeps its vector
    cached = cache.cached_vectors(list(wanted))
    missing = [h for h in wanted if h not in cached]
    if missing:
        if embed is None:
            raise StoreError("index needs embeddings that are not cached", "pass an embedder")
        fresh = embed([wanted[h] for h in missing])
        cache.cache_vectors({h: fresh[i] for i, h in enumerate(missing)})
        cached.update({h: fresh[i] for i, h in enumerate(missing)})
    for _, p in entries:
        if p.get("op") == "put" and p.get("type") in INDEXED_TYPES and p["id"] not in vectors:
            vectors[p["id"]] = cached[text_hash(embed_text_of(p))]


#: Log ops that start a record's history (a ``purged`` stub stands for an erased put).
HISTORY_START = frozenset({"put", "purged"})
#: Log ops that change a record already filed.
HISTORY_CHANGES = frozenset({"score", "status", "tombstone", "edge", "unedge"})


def history_subjects(p: dict[str, Any]) -> tuple[bool, tuple[str, ...]]:
    """Whose history the log record ``p`` belongs in: (whether it starts a memory's
    history, the ids it names). A ``put`` (or ``purged`` stub) of a memory starts its
    id's; a change joins the history of each id it names that has one already (the
    index checks), so chunks and documents keep none. ``access`` counts are no change."""
    op = p.get("op")
    if op in HISTORY_START:
        return p.get("type") == "memory", (str(p["id"]),)
    if op in ("edge", "unedge"):
        return False, (str(p["src"]), str(p["dst"]))
    if op in HISTORY_CHANGES:
        return False, (str(p["id"]),)
    return False, ()


def note_history(conn: sqlite3.Connection, offset: int, p: dict[str, Any]) -> None:
    """Add the record at ``offset`` to the history of each memory it touches (before
    :func:`apply_one` applies it: a tombstone's edges are still there, so the memories
    at their other ends note that they lost them)."""
    starts, ids = history_subjects(p)
    if not ids:
        return
    ns, seq = p["ns"], p["seq"]
    if starts:
        conn.execute(
            "INSERT OR IGNORE INTO history(ns, id, seq, offset) VALUES (?,?,?,?)",
            (ns, ids[0], seq, offset),
        )
        return
    conn.executemany(
        "INSERT OR IGNORE INTO history(ns, id, seq, offset) SELECT ?,?,?,?"
        " WHERE EXISTS (SELECT 1 FROM history WHERE ns=? AND id=?)",
        [(ns, rid, seq, offset, ns, rid) for rid in dict.fromkeys(ids)],
    )
    if p.get("op") == "tombstone":
        conn.execute(
            "INSERT OR IGNORE INTO history(ns, id, seq, offset)"
            " SELECT DISTINCT e.ns, CASE WHEN e.src=? THEN e.dst ELSE e.src END, ?, ?"
            " FROM edges e WHERE e.ns=? AND (e.src=? OR e.dst=?) AND EXISTS (SELECT 1 FROM"
            " history h WHERE h.ns=e.ns AND h.id=CASE WHEN e.src=? THEN e.dst ELSE e.src END)",
            (ids[0], seq, offset, ns, ids[0], ids[0], ids[0]),
        )


def apply_one(
    conn: sqlite3.Connection,
    offset: int,
    p: dict[str, Any],
    vectors: dict[str, F32],
    dim: int,
    shard_adds: ShardAdds,
    shard_removes: ShardRemoves,
) -> Scope | None:
    """Apply one log record (written at ``offset``) on ``conn``. Returns the scope whose
    search results it may change (see :func:`bump_generations`); None for ``access``
    records (counts no search ranks by) and records that change nothing."""
    op = p.get("op")
    if op == "put":
        put(conn, offset, p, vectors, dim, shard_adds)
        return (p["ns"], str(p["type"]))
    if op == "tombstone":
        kind = tombstone(conn, p["id"], p["ns"], shard_removes)
        return None if kind is None else (p["ns"], kind)
    if op in ("edge", "unedge"):
        _edge(conn, op, p)
        return (p["ns"], EDGES)
    if op in ("score", "status"):
        fields = {k: p[k] for k in SCORE_FIELDS if k in p}
        if not fields:
            return None
        sets = ", ".join(f"{k}=?" for k in fields)
        row = conn.execute(
            f"UPDATE records SET {sets} WHERE id=? AND ns=? RETURNING type",
            (*fields.values(), p["id"], p["ns"]),
        ).fetchone()
        return None if row is None else (p["ns"], str(row[0]))
    if op == "access":
        at = float(p.get("ts", 0.0))
        conn.executemany(
            "INSERT INTO access(id, count, last_at) VALUES (?, ?, ?) ON CONFLICT(id) DO "
            "UPDATE SET count=count+excluded.count, last_at=max(last_at, excluded.last_at)",
            [(rid, int(n), at) for rid, n in (p.get("counts") or {}).items()],
        )
    return None


def _edge(conn: sqlite3.Connection, op: str, p: dict[str, Any]) -> None:
    if op == "edge":
        conn.execute(
            "INSERT OR REPLACE INTO edges(src, dst, rel, weight, ns, seq) VALUES (?,?,?,?,?,?)",
            (p["src"], p["dst"], p["rel"], float(p.get("weight", 1.0)), p["ns"], p["seq"]),
        )
    else:
        conn.execute(
            "DELETE FROM edges WHERE src=? AND dst=? AND rel=?", (p["src"], p["dst"], p["rel"])
        )


def generation_key(ns: str, scope: str) -> str:
    """The ``meta`` row holding the generation of ``scope`` (a record type or
    :data:`EDGES`) in namespace ``ns``."""
    return f"gen\x1f{ns}\x1f{scope}"


def bump_generations(conn: sqlite3.Connection, touched: dict[Scope, int]) -> None:
    """Record, per scope, the seq of the last record that changed it (in ``meta``).

    A search's cache key carries the sum of the generations of the scopes it reads:
    seqs only grow, so the sum changes on every write that could change its results,
    and a write to another namespace or type (a filed turn, when only chunks are
    searched) leaves it as it was. A replay of the same log sets the same values.
    """
    conn.executemany(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        [(generation_key(ns, scope), str(seq)) for (ns, scope), seq in touched.items()],
    )


def generations(conn: sqlite3.Connection, ns: str) -> dict[str, int]:
    """Every scope's generation in ``ns`` (one range read on ``meta``'s key)."""
    lo = generation_key(ns, "")
    rows = conn.execute(
        "SELECT key, value FROM meta WHERE key >= ? AND key < ?", (lo, lo + "\U0010ffff")
    ).fetchall()
    return {str(k)[len(lo) :]: int(v) for k, v in rows}


def put(
    conn: sqlite3.Connection,
    offset: int,
    p: dict[str, Any],
    vectors: dict[str, F32],
    dim: int,
    shard_adds: ShardAdds,
) -> None:
    scores = p.get("scores") or {}
    cur = conn.execute(
        "INSERT INTO records(id, ns, drawer, type, kind, seq, offset, created_at, valid_from,"
        " valid_to, status, importance, confidence, stability, source, doc_id, episode_id,"
        " task_status, read_only, origin, loader, page, session, user_id, agent_id, run_id,"
        " tags, meta) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            p["id"],
            p["ns"],
            p["drawer"],
            p["type"],
            p.get("kind", ""),
            p["seq"],
            offset,
            float(p.get("ts", 0.0)),
            p.get("valid_from"),
            p.get("valid_to"),
            p.get("status", "unvalidated"),
            float(scores.get("importance", 0.5)),
            float(scores.get("confidence", 0.5)),
            float(scores.get("stability", 0.5)),
            p.get("source"),
            p.get("doc_id"),
            p.get("episode_id"),
            p.get("task_status"),
            int(bool(p.get("read_only", False))),
            p.get("origin"),
            p.get("loader"),
            p.get("page"),
            session_of(p),
            p.get("user_id"),
            p.get("agent_id"),
            p.get("run_id"),
            _json_or_null(p.get("tags")),
            _json_or_null(p.get("meta")),
        ),
    )
    rowid = int(cur.lastrowid or 0)
    if p["type"] == "document":
        conn.execute(
            "INSERT OR REPLACE INTO documents(ns, source, drawer, doc_id, content_hash,"
            " version) VALUES (?,?,?,?,?,?)",
            (
                p["ns"],
                p.get("origin", ""),
                p["drawer"],
                p["id"],
                p.get("content_hash", ""),
                int(p.get("version", 1)),
            ),
        )
    if p["type"] not in INDEXED_TYPES:
        return
    scope = f"{scope_token('n', p['ns'])} {scope_token('d', p['drawer'])}"
    conn.execute(
        "INSERT INTO cards(rowid, card, context, scope) VALUES (?,?,?,?)",
        (rowid, card_of(p), context_of(p), scope),
    )
    vec = np.asarray(vectors[p["id"]], dtype=np.float32)
    if vec.shape != (dim,):
        raise StoreError(f"vector of shape {vec.shape} for {p['id']}, expected ({dim},)")
    key = shard_key(p["ns"], p["drawer"])
    conn.execute(
        "INSERT INTO vectors(rowid, shard, vec) VALUES (?,?,?)", (rowid, key, vec.tobytes())
    )
    ids, vecs = shard_adds.setdefault(key, ([], []))
    ids.append(rowid)
    vecs.append(vec)


def _json_or_null(value: Any) -> str | None:
    """``tags`` or ``meta`` as the JSON the filters read (``json_each``,
    ``json_extract``); NULL when empty, so records without any cost nothing."""
    if not value:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def session_of(p: dict[str, Any]) -> str | None:
    """The session a turn belongs to (``meta.session``, as ``memory.turns`` files it)."""
    if p.get("type") != "turn":
        return None
    session = (p.get("meta") or {}).get("session")
    return str(session) if session else None


def tombstone(
    conn: sqlite3.Connection, rid: str, ns: str, shard_removes: ShardRemoves
) -> str | None:
    """Mark the record deleted; returns its type (None when there is no such record)."""
    row = conn.execute("SELECT rowid, type FROM records WHERE id=? AND ns=?", (rid, ns)).fetchone()
    if row is None:
        return None
    rowid = int(row[0])
    conn.execute("UPDATE records SET deleted=1 WHERE rowid=?", (rowid,))
    conn.execute("DELETE FROM cards WHERE rowid=?", (rowid,))
    vrow = conn.execute("SELECT shard FROM vectors WHERE rowid=?", (rowid,)).fetchone()
    if vrow is not None:
        conn.execute("DELETE FROM vectors WHERE rowid=?", (rowid,))
        shard_removes.append((str(vrow[0]), rowid))
    conn.execute("DELETE FROM edges WHERE src=? OR dst=?", (rid, rid))
    return str(row[1])
