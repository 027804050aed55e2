"""The derived index in SQLite: records, full text, vectors, edges, documents.

Everything here can be dropped and rebuilt from the haystack. One connection writes
(the housekeeper's thread); each reading thread gets its own connection (WAL mode
lets them read while the writer writes). Every query binds the namespace inside the
SQL; user text reaches FTS5 only as quoted tokens (see ``retrieve.terms``).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kredenc.errors import StoreError
from kredenc.storage.index import lexical
from kredenc.storage.index.filters import Filters, record_conditions
from kredenc.storage.index.lexical import Phrase
from kredenc.storage.index.vectors import F32, I64, AnnParams, VectorShard

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
INDEXED_TYPES = frozenset({"memory", "chunk", "turn"})
#: The card index is merged into one FTS5 segment once it holds this many cards and
#: has grown by ``COMPACT_GROWTH`` since it was last merged (see ``compaction_due``).
COMPACT_MIN = 10_000
COMPACT_GROWTH = 1.25

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records(
  rowid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  ns TEXT NOT NULL,
  drawer TEXT NOT NULL,
  type TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT '',
  seq INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  created_at REAL NOT NULL,
  valid_from REAL,
  valid_to REAL,
  status TEXT NOT NULL DEFAULT 'unvalidated',
  importance REAL NOT NULL DEFAULT 0.5,
  confidence REAL NOT NULL DEFAULT 0.5,
  stability REAL NOT NULL DEFAULT 0.5,
  source TEXT,
  doc_id TEXT,
  episode_id TEXT,
  task_status TEXT,
  read_only INTEGER NOT NULL DEFAULT 0,
  origin TEXT,
  loader TEXT,
  page INTEGER,
  deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS records_scope ON records(ns, drawer, deleted);
CREATE INDEX IF NOT EXISTS records_doc ON records(doc_id);
CREATE INDEX IF NOT EXISTS records_origin ON records(ns, origin);
CREATE VIRTUAL TABLE IF NOT EXISTS cards USING fts5(
  card, context, scope, tokenize = '{lexical.TOKENIZE}'
);
CREATE TABLE IF NOT EXISTS vectors(
  rowid INTEGER PRIMARY KEY, shard TEXT NOT NULL, vec BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_shard ON vectors(shard);
CREATE TABLE IF NOT EXISTS edges(
  src TEXT NOT NULL, dst TEXT NOT NULL, rel TEXT NOT NULL,
  weight REAL NOT NULL DEFAULT 1.0, ns TEXT NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (src, dst, rel)
);
CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst);
CREATE TABLE IF NOT EXISTS documents(
  ns TEXT NOT NULL, source TEXT NOT NULL, drawer TEXT NOT NULL, doc_id TEXT NOT NULL,
  content_hash TEXT NOT NULL, version INTEGER NOT NULL,
  PRIMARY KEY (ns, source)
);
CREATE TABLE IF NOT EXISTS access(
  id TEXT PRIMARY KEY, count INTEGER NOT NULL, last_at REAL NOT NULL
);
"""

CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache.embeddings(
  hash BLOB NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, hash)
) WITHOUT ROWID;
"""


class IndexOutdated(StoreError):
    """The index was built by another schema version; it is rebuilt from the log."""


EmbedFn = Callable[[Sequence[str]], F32]


def scope_token(kind: str, value: str) -> str:
    """An FTS5-safe token naming a namespace or drawer (hex after a letter)."""
    return kind + hashlib.blake2b(value.encode("utf-8"), digest_size=8).hexdigest()


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def card_of(payload: dict[str, Any]) -> str:
    """What full-text search sees of a record itself: title, text and tags."""
    parts = [payload.get("title") or "", payload.get("text") or ""]
    if payload.get("tags"):
        parts.append(" ".join(str(t) for t in payload["tags"]))
    return "\n".join(p for p in parts if p)


def context_of(payload: dict[str, Any]) -> str:
    """The card's context column (heading path, session, speaker, neighbouring
    turns): searched too, but weighted below the record's own words."""
    return str(payload.get("context") or "")


def embed_text_of(payload: dict[str, Any]) -> str:
    """What the embedder sees of a record: title, ``embed_context`` (e.g. a chunk's
    heading path) and text. The card's ``context`` (session, speaker, terms) is for
    words only and stays out of the vector."""
    title = payload.get("title") or ""
    text = payload.get("text") or ""
    if title and title in text[: len(title) + 2]:
        title = ""
    context = str(payload.get("embed_context") or "")
    parts = [p for p in (title, context, text) if p]
    return "\n".join(parts)


@dataclass(frozen=True)
class IndexedRecord:
    rowid: int
    id: str
    offset: int
    deleted: bool
    state: dict[str, Any]


class SqliteIndex:
    def __init__(
        self,
        path: Path,
        *,
        dim: int,
        model_id: str,
        ann: AnnParams,
        cache_path: Path | None = None,
    ) -> None:
        self.path = path
        self.cache_path = cache_path or path.parent / "embeddings.db"
        self.dim = dim
        self.model_id = model_id
        self.ann = ann
        self._local = threading.local()
        self._writer = self._connect()
        self._writer.executescript(SCHEMA)
        self._writer.executescript(CACHE_SCHEMA)
        self._init_meta()
        self._shards: dict[str, VectorShard] | None = None
        self._shards_lock = threading.Lock()
        self._vocabulary = lexical.Vocabulary()
        self._compacted: int | None = None  # cards at the last merge, read on first use

    # -- connections ----------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("ATTACH DATABASE ? AS cache", (str(self.cache_path),))
            # 8 KiB pages keep a 1.5 KiB vector row inside its page (4 KiB pages spill
            # it to an overflow page: 3x the file, two reads per lookup); takes effect
            # only when the cache file is created. An attached database starts at
            # synchronous=FULL (an fsync per commit); the cache is derived, like main.
            conn.execute("PRAGMA cache.page_size=8192")
            conn.execute("PRAGMA cache.journal_mode=WAL")
            conn.execute("PRAGMA cache.synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path}: index cannot be opened ({exc})", "run 'kredenc rebuild'"
            ) from exc
        return conn

    def reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            readers: list[sqlite3.Connection] = getattr(self, "_readers", [])
            readers.append(conn)
            self._readers = readers
        return conn

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.save_ann()
        for conn in [*getattr(self, "_readers", []), self._writer]:
            conn.close()

    # -- meta -----------------------------------------------------------------
    def _init_meta(self) -> None:
        cur = self._writer.execute("SELECT value FROM meta WHERE key='schema'")
        row = cur.fetchone()
        if row is None:
            self._writer.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [("schema", str(SCHEMA_VERSION)), ("applied_seq", "0"), ("applied_end", "0")],
            )
        elif int(row[0]) != SCHEMA_VERSION:
            raise IndexOutdated(
                f"{self.path}: index schema {row[0]} is not {SCHEMA_VERSION}",
                "run 'kredenc rebuild'",
            )

    def applied(self) -> tuple[int, int]:
        """(last applied seq, log end offset after it)."""
        rows = dict(self._writer.execute("SELECT key, value FROM meta").fetchall())
        return int(rows["applied_seq"]), int(rows["applied_end"])

    @contextmanager
    def _write_txn(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the writer connection: committed whole, or rolled
        back whole on any exception (a half-applied batch never stays)."""
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- compaction (the housekeeper's thread, or no writer running) --------------
    def compaction_due(self) -> bool:
        """Whether the card index has grown enough since its last merge to merge it.

        FTS5 keeps the cards of each write in segments of their own and merges them
        only a few at a time (``automerge``); a query walks every segment's doclist for
        each of its words, and ranked lexical queries over 100,000 cards ran 13-18 %
        faster after a full merge (docs/benchmarks.md). A merge rewrites the whole card
        index (0.26-0.38 s at 100,000 cards here, so a few seconds at a million), so it
        waits until the cards have grown by a quarter: each card is merged about five
        times over the life of the store.
        """
        cards = lexical.card_count(self._writer)
        if cards < COMPACT_MIN:
            return False
        return cards >= self._compacted_at() * COMPACT_GROWTH

    def compact(self) -> float:
        """Merge the card index into one segment (FTS5 ``optimize``); seconds taken."""
        started = time.perf_counter()
        cards = lexical.card_count(self._writer)
        with self._write_txn() as conn:
            conn.execute("INSERT INTO cards(cards) VALUES ('optimize')")
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('compacted_at', ?)",
                (str(cards),),
            )
        self._compacted = cards
        return time.perf_counter() - started

    def _compacted_at(self) -> int:
        """The cards at the last merge (read once; this index's ``compact`` updates it)."""
        if self._compacted is None:
            row = self._writer.execute("SELECT value FROM meta WHERE key='compacted_at'").fetchone()
            self._compacted = int(row[0]) if row else 0
        return self._compacted

    # -- vectors --------------------------------------------------------------
    def shards(self) -> dict[str, VectorShard]:
        """Vector shards, loaded from SQLite on first use (open stays fast)."""
        if self._shards is not None:
            return self._shards
        with self._shards_lock:
            if self._shards is None:
                shards: dict[str, VectorShard] = {}
                # One read snapshot on this thread's own connection (never the writer's,
                # which the housekeeper may be using): the log position and the vectors
                # agree. Writes committed after the snapshot wait on _shards_lock in
                # apply() and are added to the loaded shards then.
                conn = self.reader()
                conn.execute("BEGIN")
                try:
                    row = conn.execute("SELECT value FROM meta WHERE key='applied_seq'")
                    applied_seq = int(row.fetchone()[0])
                    grouped = self._read_vectors(conn)
                finally:
                    conn.execute("COMMIT")
                for key in list(grouped):
                    ids, matrix = grouped.pop(key)
                    shard = self._new_shard(key)
                    shard.add(ids, matrix, build_ann=False)
                    if shard.wants_ann and not shard.load_ann(applied_seq):
                        shard.build_ann()
                    shards[key] = shard
                self._shards = shards
        return self._shards

    def _read_vectors(self, conn: sqlite3.Connection) -> dict[str, tuple[I64, F32]]:
        """Every stored vector, per shard key, in rowid order.

        Rows are copied one by one into arrays sized from a count, so no list of
        100,000 blobs is held and joined (that took the first search's peak memory
        150 MB higher and left the heap fragmented).
        """
        counts = dict(conn.execute("SELECT shard, count(*) FROM vectors GROUP BY shard"))
        ids = {key: np.empty(n, dtype=np.int64) for key, n in counts.items()}
        mats = {key: np.empty((n, self.dim), dtype=np.float32) for key, n in counts.items()}
        fill = dict.fromkeys(counts, 0)
        for rowid, key, vec in conn.execute("SELECT rowid, shard, vec FROM vectors ORDER BY rowid"):
            i = fill.get(key, 0)
            if key not in ids or i == len(ids[key]):  # rows written since the count
                more_ids = np.empty(2 * i + 64, dtype=np.int64)
                more = np.empty((2 * i + 64, self.dim), dtype=np.float32)
                if i:
                    more_ids[:i], more[:i] = ids[key][:i], mats[key][:i]
                ids[key], mats[key] = more_ids, more
            ids[key][i] = rowid
            mats[key][i] = np.frombuffer(vec, dtype=np.float32)
            fill[key] = i + 1
        return {key: (ids[key][:n], mats[key][:n]) for key, n in fill.items() if n}

    def _new_shard(self, key: str) -> VectorShard:
        name = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
        return VectorShard(self.dim, self.ann, self.path.parent / "ann" / f"{name}.usearch")

    def save_ann(self) -> None:
        if self._shards is None:
            return
        applied_seq, _ = self.applied()
        for shard in self._shards.values():
            shard.save(applied_seq)

    # -- applying log records (the housekeeper's thread only) ------------------
    def apply(
        self,
        entries: Iterable[tuple[int, dict[str, Any]]],
        vectors: dict[str, F32] | None,
        embed: EmbedFn | None,
        end: int,
        applied_through: int | None = None,
    ) -> None:
        """Apply log records (offset, payload) in one transaction; record the position."""
        entries = list(entries)
        if not entries:
            return
        vectors = dict(vectors or {})
        self._fill_vectors(entries, vectors, embed)
        shard_adds: dict[str, tuple[list[int], list[F32]]] = {}
        shard_removes: list[tuple[str, int]] = []
        with self._write_txn() as conn:
            for offset, payload in entries:
                self._apply_one(conn, offset, payload, vectors, shard_adds, shard_removes)
            last_seq = max(int(entries[-1][1]["seq"]), applied_through or 0)
            conn.execute("UPDATE meta SET value=? WHERE key='applied_seq'", (str(last_seq),))
            conn.execute("UPDATE meta SET value=? WHERE key='applied_end'", (str(end),))
        with self._shards_lock:
            if self._shards is not None:
                for key, rowid in shard_removes:
                    shard = self._shards.get(key)
                    if shard is not None:
                        shard.remove(rowid)
                for key, (ids, vecs) in shard_adds.items():
                    shard = self._shards.get(key)
                    if shard is None:
                        shard = self._shards[key] = self._new_shard(key)
                    shard.add(np.asarray(ids, dtype=np.int64), np.vstack(vecs))

    def _fill_vectors(
        self,
        entries: list[tuple[int, dict[str, Any]]],
        vectors: dict[str, F32],
        embed: EmbedFn | None,
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
            self.cache_vectors(given)  # INSERT OR IGNORE: a cached text keeps its vector
        cached = self.cached_vectors(list(wanted))
        missing = [h for h in wanted if h not in cached]
        if missing:
            if embed is None:
                raise StoreError("index needs embeddings that are not cached", "pass an embedder")
            fresh = embed([wanted[h] for h in missing])
            self.cache_vectors({h: fresh[i] for i, h in enumerate(missing)})
            cached.update({h: fresh[i] for i, h in enumerate(missing)})
        for _, p in entries:
            if p.get("op") == "put" and p.get("type") in INDEXED_TYPES and p["id"] not in vectors:
                vectors[p["id"]] = cached[text_hash(embed_text_of(p))]

    def cached_vectors(self, hashes: Sequence[bytes]) -> dict[bytes, F32]:
        out: dict[bytes, F32] = {}
        conn = self.reader()
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                f"SELECT hash, vec FROM cache.embeddings WHERE model=? AND hash IN ({marks})",
                (self.model_id, *part),
            )
            for h, vec in rows:
                out[h] = np.frombuffer(vec, dtype=np.float32)
        return out

    def cache_vectors(self, items: dict[bytes, F32]) -> None:
        self._writer.executemany(
            "INSERT OR IGNORE INTO cache.embeddings(hash, model, vec) VALUES (?, ?, ?)",
            [
                (h, self.model_id, np.asarray(v, dtype=np.float32).tobytes())
                for h, v in items.items()
            ],
        )

    def _apply_one(
        self,
        conn: sqlite3.Connection,
        offset: int,
        p: dict[str, Any],
        vectors: dict[str, F32],
        shard_adds: dict[str, tuple[list[int], list[F32]]],
        shard_removes: list[tuple[str, int]],
    ) -> None:
        op = p.get("op")
        if op == "put":
            self._put(conn, offset, p, vectors, shard_adds)
        elif op == "tombstone":
            self._tombstone(conn, p["id"], p["ns"], shard_removes)
        elif op == "edge":
            conn.execute(
                "INSERT OR REPLACE INTO edges(src, dst, rel, weight, ns, seq) VALUES (?,?,?,?,?,?)",
                (p["src"], p["dst"], p["rel"], float(p.get("weight", 1.0)), p["ns"], p["seq"]),
            )
        elif op == "unedge":
            conn.execute(
                "DELETE FROM edges WHERE src=? AND dst=? AND rel=?", (p["src"], p["dst"], p["rel"])
            )
        elif op in ("score", "status"):
            fields = {k: p[k] for k in _SCORE_FIELDS if k in p}
            if fields:
                sets = ", ".join(f"{k}=?" for k in fields)
                conn.execute(
                    f"UPDATE records SET {sets} WHERE id=? AND ns=?",
                    (*fields.values(), p["id"], p["ns"]),
                )
        elif op == "access":
            at = float(p.get("ts", 0.0))
            conn.executemany(
                "INSERT INTO access(id, count, last_at) VALUES (?, ?, ?) ON CONFLICT(id) DO "
                "UPDATE SET count=count+excluded.count, last_at=max(last_at, excluded.last_at)",
                [(rid, int(n), at) for rid, n in (p.get("counts") or {}).items()],
            )

    def _put(
        self,
        conn: sqlite3.Connection,
        offset: int,
        p: dict[str, Any],
        vectors: dict[str, F32],
        shard_adds: dict[str, tuple[list[int], list[F32]]],
    ) -> None:
        scores = p.get("scores") or {}
        cur = conn.execute(
            "INSERT INTO records(id, ns, drawer, type, kind, seq, offset, created_at, valid_from,"
            " valid_to, status, importance, confidence, stability, source, doc_id, episode_id,"
            " task_status, read_only, origin, loader, page)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
        if vec.shape != (self.dim,):
            raise StoreError(f"vector of shape {vec.shape} for {p['id']}, expected ({self.dim},)")
        key = shard_key(p["ns"], p["drawer"])
        conn.execute(
            "INSERT INTO vectors(rowid, shard, vec) VALUES (?,?,?)", (rowid, key, vec.tobytes())
        )
        ids, vecs = shard_adds.setdefault(key, ([], []))
        ids.append(rowid)
        vecs.append(vec)

    def _tombstone(
        self, conn: sqlite3.Connection, rid: str, ns: str, shard_removes: list[tuple[str, int]]
    ) -> None:
        row = conn.execute("SELECT rowid FROM records WHERE id=? AND ns=?", (rid, ns)).fetchone()
        if row is None:
            return
        rowid = int(row[0])
        conn.execute("UPDATE records SET deleted=1 WHERE rowid=?", (rowid,))
        conn.execute("DELETE FROM cards WHERE rowid=?", (rowid,))
        vrow = conn.execute("SELECT shard FROM vectors WHERE rowid=?", (rowid,)).fetchone()
        if vrow is not None:
            conn.execute("DELETE FROM vectors WHERE rowid=?", (rowid,))
            shard_removes.append((str(vrow[0]), rowid))
        conn.execute("DELETE FROM edges WHERE src=? OR dst=?", (rid, rid))

    # -- reads ----------------------------------------------------------------
    def lookup(self, ns: str, rid: str) -> IndexedRecord | None:
        """The record's place and current state (scores, status, validity)."""
        cols = ", ".join(STATE_COLUMNS)
        row = (
            self.reader()
            .execute(
                f"SELECT rowid, id, offset, deleted, {cols} FROM records WHERE ns=? AND id=?",
                (ns, rid),
            )
            .fetchone()
        )
        if row is None:
            return None
        state = dict(zip(STATE_COLUMNS, row[4:], strict=True))
        state["read_only"] = bool(state["read_only"])
        return IndexedRecord(row[0], row[1], row[2], bool(row[3]), state)

    def document(self, ns: str, origin: str) -> tuple[str, str, int] | None:
        """The live document filed from ``origin``: (doc id, content hash, version)."""
        row = (
            self.reader()
            .execute(
                "SELECT d.doc_id, d.content_hash, d.version FROM documents d JOIN records r"
                " ON r.id = d.doc_id WHERE d.ns=? AND d.source=? AND r.deleted=0",
                (ns, origin),
            )
            .fetchone()
        )
        return None if row is None else (str(row[0]), str(row[1]), int(row[2]))

    def parts_of(self, ns: str, doc_id: str) -> list[str]:
        """Ids of the live chunks of a document, in filing order."""
        rows = (
            self.reader()
            .execute(
                "SELECT id FROM records WHERE ns=? AND doc_id=? AND deleted=0 ORDER BY seq",
                (ns, doc_id),
            )
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def neighbours(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """Edges touching ``ids`` as (seed id, neighbour id, relation, weight), both ways."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        conn = self.reader()
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

    def rowids_for(self, ns: str, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        """id -> rowid for live, searchable records of ``ns`` that pass ``filters``."""
        if not ids:
            return {}
        where, args = record_conditions(filters)
        marks = ",".join("?" * len(ids))
        rows = (
            self.reader()
            .execute(
                f"SELECT r.id, r.rowid FROM records r WHERE r.id IN ({marks}) AND +r.ns = ?"
                f" AND r.type IN ('memory', 'chunk', 'turn')" + where,
                (*ids, ns, *args),
            )
            .fetchall()
        )
        return {str(i): int(r) for i, r in rows}

    def node_info(self, ns: str, rowids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Current state of live records for ranking: ids, offsets, scores, access."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = (
            self.reader()
            .execute(
                "SELECT r.rowid, r.id, r.offset, r.type, r.kind, r.importance, r.created_at,"
                " r.status, coalesce(a.count, 0), a.last_at FROM records r"
                f" LEFT JOIN access a ON a.id = r.id WHERE r.rowid IN ({marks})"
                " AND +r.ns=? AND r.deleted=0",
                (*rowids, ns),
            )
            .fetchall()
        )
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

    def doc_ids(self, ns: str, rowids: Sequence[int]) -> dict[int, str]:
        """rowid -> the document a chunk belongs to (only for records that have one)."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = self.reader().execute(
            f"SELECT rowid, doc_id FROM records WHERE rowid IN ({marks}) AND +ns=?"
            " AND doc_id IS NOT NULL",
            (*rowids, ns),
        )
        return {int(r): str(d) for r, d in rows}

    def vectors_of(self, rowids: Sequence[int]) -> dict[int, F32]:
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = self.reader().execute(
            f"SELECT rowid, vec FROM vectors WHERE rowid IN ({marks})", tuple(rowids)
        )
        return {int(r): np.frombuffer(v, dtype=np.float32) for r, v in rows}

    def edges_among(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """Edges whose both ends are in ``ids``."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.reader().execute(
            f"SELECT src, dst, rel, weight FROM edges WHERE ns=? AND src IN ({marks})"
            f" AND dst IN ({marks}) ORDER BY seq",
            (ns, *ids, *ids),
        )
        return [(str(a), str(b), str(r), float(w)) for a, b, r, w in rows]

    def sources_of(self, ns: str, dst: str, rel: str) -> list[str]:
        """Ids of live records with an edge ``rel`` pointing at ``dst``."""
        rows = (
            self.reader()
            .execute(
                "SELECT e.src FROM edges e JOIN records r ON r.id = e.src"
                " WHERE e.ns=? AND e.dst=? AND e.rel=? AND r.deleted=0 ORDER BY e.seq",
                (ns, dst, rel),
            )
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def lexical(
        self,
        ns: str,
        phrases: Sequence[Phrase],
        k: int,
        filters: Filters,
        *,
        context_weight: float = 0.5,
        max_scored: int = lexical.MAX_SCORED,
        deadline: float | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` rowids by BM25 for any of ``phrases`` (see ``index.lexical``); the
        context column counts ``context_weight`` as much as the record's words. Past
        ``deadline`` (``time.perf_counter()``) it stops with ``DeadlineExceeded``."""
        scopes = {"ns": scope_token("n", ns)}
        if filters.drawer is not None:
            scopes["drawer"] = scope_token("d", filters.drawer)
        return lexical.search(
            self.reader(),
            self._vocabulary,
            ns,
            phrases,
            k,
            filters,
            scopes=scopes,
            context_weight=context_weight,
            max_scored=max_scored,
            deadline=deadline,
        )

    def dense(self, ns: str, query: F32, k: int, filters: Filters) -> list[tuple[int, float]]:
        """Top ``k`` rowids by cosine within the namespace (and drawer) that pass
        ``filters``: shards are searched deeper until ``k`` survive or none are left."""
        prefix = shard_key(ns, filters.drawer) if filters.drawer is not None else ns + "\x1f"
        shards = [
            shard
            for key, shard in self.shards().items()
            if key == prefix or (filters.drawer is None and key.startswith(prefix))
        ]
        total = sum(len(s) for s in shards)
        fetch = k * 4 if any(s.uses_ann for s in shards) else k
        while True:
            found: list[tuple[int, float]] = []
            for shard in shards:
                found.extend(shard.search(query, fetch))
            found.sort(key=lambda t: (-t[1], t[0]))  # ties by rowid: shard order is not stable
            kept = self._keep(ns, found, k, filters)
            if len(kept) >= k or fetch >= total:
                return kept
            fetch = min(total, fetch * 4)

    def _keep(
        self, ns: str, found: list[tuple[int, float]], k: int, filters: Filters
    ) -> list[tuple[int, float]]:
        """Drop candidates that fail the namespace or filters (checked in SQL)."""
        if not found:
            return []
        where, args = record_conditions(filters)
        ok: set[int] = set()
        for start in range(0, len(found), 5000):
            ids = [r for r, _ in found[start : start + 5000]]
            marks = ",".join("?" * len(ids))
            rows = self.reader().execute(
                f"SELECT r.rowid FROM records r WHERE r.rowid IN ({marks}) AND +r.ns = ?" + where,
                (*ids, ns, *args),
            )
            ok.update(int(r[0]) for r in rows)
            if len(ok) >= k:
                break
        return [(r, s) for r, s in found if r in ok][:k]

    def resolve(self, ns: str, rowids: Sequence[int]) -> dict[int, tuple[str, int]]:
        """rowid -> (id, offset) for live records of ``ns``."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = (
            self.reader()
            .execute(
                f"SELECT rowid, id, offset FROM records WHERE rowid IN ({marks})"
                " AND +ns=? AND deleted=0",
                (*rowids, ns),
            )
            .fetchall()
        )
        return {int(r): (i, int(o)) for r, i, o in rows}

    def stats(self, ns: str) -> dict[str, Any]:
        conn = self.reader()
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

    def fingerprint(self) -> dict[str, Any]:
        """A content summary used to compare an index with its rebuild."""
        conn = self.reader()
        recs = conn.execute(
            "SELECT id, ns, drawer, type, kind, seq, offset, status, importance, confidence,"
            " stability, deleted FROM records ORDER BY seq"
        ).fetchall()
        edges = conn.execute(
            "SELECT src, dst, rel, weight FROM edges ORDER BY src, dst, rel"
        ).fetchall()
        return {"records": recs, "edges": edges}


# Fields a ``score``/``status`` record may change (the index keeps the current value).
_SCORE_FIELDS = (
    "importance",
    "confidence",
    "stability",
    "status",
    "valid_from",
    "valid_to",
    "episode_id",
    "task_status",
)
STATE_COLUMNS = (
    "kind",
    "drawer",
    "type",
    "created_at",
    *_SCORE_FIELDS,
    "source",
    "doc_id",
    "read_only",
)


def shard_key(ns: str, drawer: str) -> str:
    return f"{ns}\x1f{drawer}"
