"""The derived index in SQLite: records, full text, vectors, edges, documents.

Everything here can be dropped and rebuilt from the haystack. One connection writes
(the housekeeper's thread); each reading thread gets its own connection (WAL mode
lets them read while the writer writes). Every query binds the namespace inside the
SQL; user text reaches FTS5 only as quoted tokens (see ``retrieve.terms``).

:class:`SqliteIndex` composes the modules beside this one: ``schema`` (tables, meta,
connections), ``cards`` (what the index sees of a record), ``projector`` (the
log-to-index projector), ``reads`` (lookups, documents, edges, stats) and the legs
(``lexical``, and ``vectors`` for the dense leg).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from kredenc.errors import IndexOutdated, StoreClosed
from kredenc.storage.index import lexical, projector, reads, schema
from kredenc.storage.index.cards import (
    card_of,
    context_of,
    embed_text_of,
    scope_token,
    text_hash,
)
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import Phrase
from kredenc.storage.index.projector import EmbedFn
from kredenc.storage.index.reads import IndexedRecord, RecordQuery
from kredenc.storage.index.schema import (
    CACHE_SCHEMA,
    INDEXED_TYPES,
    SCHEMA,
    SCHEMA_VERSION,
    STATE_COLUMNS,
    shard_key,
)
from kredenc.storage.index.vectors import F32, AnnParams, VectorShard

__all__ = [
    "COMPACT_GROWTH",
    "COMPACT_MIN",
    "INDEXED_TYPES",
    "SCHEMA_VERSION",
    "STATE_COLUMNS",
    "EmbedFn",
    "IndexOutdated",
    "IndexedRecord",
    "SqliteIndex",
    "card_of",
    "context_of",
    "embed_text_of",
    "scope_token",
    "shard_key",
    "text_hash",
]

log = logging.getLogger(__name__)

#: The name of the thread that loads the vector shards off a recall's thread.
VECTOR_LOAD_THREAD = "kredenc-vector-load"

#: The card index is merged into one FTS5 segment once it holds this many cards and
#: has grown by ``COMPACT_GROWTH`` since it was last merged (see ``compaction_due``).
COMPACT_MIN = 10_000
COMPACT_GROWTH = 1.25
#: A dense search with a scope id reads the records that pass first and scores them
#: exactly when they are at most this many (else it fetches deeper, as unscoped); so
#: does any filtered dense search whose fetch would grow past ``EXACT_AFTER_FETCH``.
EXACT_AMONG_MAX = 5_000
EXACT_AFTER_FETCH = 2_560


class SqliteIndex:
    """The SQLite :class:`~kredenc.storage.base.Index`: one file, plus the embedding
    cache (``embeddings.db``) and the ANN graphs (``ann/``) beside it."""

    #: What a failed query raises here, for callers that degrade instead of stopping.
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(
        self,
        path: Path,
        *,
        dim: int,
        model_id: str,
        ann: AnnParams,
        cache_path: Path | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = path
        #: A reader beside a writer in another process: its vector shards follow the
        #: index (``_follow_shards``) and it never saves ANN graphs.
        self.read_only = read_only
        self.cache_path = cache_path or path.parent / "embeddings.db"
        self.dim = dim
        self.model_id = model_id
        self.ann = ann
        self._local = threading.local()
        self._writer = self._connect()
        schema.check_version(self._writer, path)
        self._writer.executescript(SCHEMA)
        self._writer.executescript(CACHE_SCHEMA)
        self._init_meta()
        self._shards: dict[str, VectorShard] | None = None
        self._shards_lock = threading.Lock()
        self._closed = False
        self._loader: threading.Thread | None = None  # loads the shards off the caller's
        self._loader_lock = threading.Lock()  # thread (``vectors_ready``)
        self._terms_load_lock = threading.Lock()  # held by ``load_terms``
        self._load_failed = False  # the background load raised (``vectors_ready``)
        # The writer's copy of each namespace's generations (``generation``): this
        # process is the only one that writes the file, so after one read the copy is
        # kept current by ``apply`` itself. A reader (another process) reads the file.
        self._gens: dict[str, dict[str, int]] = {}
        self._gens_lock = threading.Lock()
        self._shards_seq = 0  # applied_seq of the index when the shards last caught up
        self._shards_rowid = 0  # the highest record rowid the shards have looked at
        self._vocabulary = lexical.Vocabulary()
        self._compacted: int | None = None  # cards at the last merge, read on first use

    # -- connections ----------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        return schema.connect(self.path, self.cache_path)

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
        if self._closed:
            return
        self._closed = True
        # A load of the vectors in flight (``vectors_ready`` started it on a thread of
        # its own) finishes first, or stops at its next shard, and so does a load of
        # the term set (the warm-up's): a rebuild or purge closes the index and then
        # replaces its files, never under those reads.
        with self._shards_lock, self._terms_load_lock:
            if not self.read_only:
                self.save_ann()
            for conn in [*getattr(self, "_readers", []), self._writer]:
                conn.close()

    # -- meta -----------------------------------------------------------------
    def _init_meta(self) -> None:
        schema.init_meta(self._writer, self.path)

    def applied(self) -> tuple[int, int]:
        """(last applied seq, log end offset after it)."""
        return schema.applied(self._writer)

    @contextmanager
    def _write_txn(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the writer connection: committed whole, or rolled
        back whole on any exception (a half-applied batch never stays)."""
        with schema.write_txn(self._writer) as conn:
            yield conn

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
        """Vector shards, loaded from SQLite on first use (open stays fast). A read-only
        index first catches them up with what another process's writer applied."""
        if self._shards is not None:
            if self.read_only:
                self._follow_shards()
            return self._shards
        with self._shards_lock:
            if self._shards is None:
                self._shards = self._load_shards()
        return self._shards

    def vectors_ready(self, wait: float = 0.0) -> bool:
        """Whether :meth:`dense` can search without loading the vector shards first.
        When they are not loaded, their load starts on a thread of its own (once; it
        takes about 0.9 s at 100,000 vectors with saved ANN graphs) and this waits up
        to ``wait`` seconds for it. A recall asks this with what is left of its time
        budget, so that the first recall of a process never loads the shards on its
        own thread past the budget. False once the index is closed."""
        if self._shards is not None or self._load_failed:
            return True  # loaded; or a failed load, which dense() tries again and raises
        with self._loader_lock:
            if self._closed:
                return False
            loader = self._loader
            if loader is None or not loader.is_alive():
                if self._shards is not None or self._load_failed:
                    return True
                loader = self._loader = threading.Thread(
                    target=self._load_in_background, name=VECTOR_LOAD_THREAD, daemon=False
                )
                loader.start()
        if wait > 0:
            loader.join(wait)
        return self._shards is not None

    def _load_in_background(self) -> None:
        """The body of the thread :meth:`vectors_ready` starts: loads the shards unless
        the index closed first. A failure is logged once and not retried here: from
        then on ``vectors_ready`` says True, so the next dense search loads them on its
        own thread and raises what the load raised."""
        started = time.perf_counter()
        try:
            with self._shards_lock:
                if self._closed or self._shards is not None:
                    return
                self._shards = self._load_shards()
        except StoreClosed:
            return  # closed while loading: nothing left to load for
        except Exception as exc:  # noqa: BLE001 - a background load must never break the host
            # Not started again in the background: the next dense search loads on its
            # own thread, as before there was a background load, and raises the error.
            self._load_failed = True
            log.warning("loading the vector shards failed: %s: %s", type(exc).__name__, exc)
        else:
            log.debug("vector shards loaded in %.2f s", time.perf_counter() - started)

    def _load_shards(self) -> dict[str, VectorShard]:
        """Every shard's vectors (and its saved ANN graph, or one built now) from one
        read snapshot, on a connection of the load's own: never the writer's, which
        the housekeeper may be using, nor a thread's reader, which :meth:`close`
        closes. The caller holds ``_shards_lock``: writes committed after the
        snapshot wait on it in :meth:`apply` and are added to the loaded shards then.
        Raises ``StoreClosed`` when the index is closed first, or between shards once
        it is closing."""
        if self._closed:
            raise StoreClosed()
        shards: dict[str, VectorShard] = {}
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            try:
                row = conn.execute("SELECT value FROM meta WHERE key='applied_seq'")
                applied_seq = int(row.fetchone()[0])
                grouped = reads.read_vectors(conn, self.dim)
                top = conn.execute("SELECT coalesce(max(rowid), 0) FROM records")
                top_rowid = int(top.fetchone()[0])
            finally:
                conn.execute("COMMIT")
        finally:
            conn.close()
        for key in list(grouped):
            if self._closed:
                raise StoreClosed()
            ids, matrix = grouped.pop(key)
            shard = self._new_shard(key)
            shard.add(ids, matrix, build_ann=False)
            if shard.wants_ann and not shard.load_ann(applied_seq):
                shard.build_ann()
            shards[key] = shard
        self._shards_rowid = top_rowid
        self._shards_seq = applied_seq
        return shards

    def _follow_shards(self) -> None:
        """Catch the loaded shards up with the index another process writes, when its
        applied position moved: add the vectors of records filed since (rowids only
        grow: records are tombstoned, never deleted), and when the index holds fewer
        vectors than the shards would, drop those it no longer has (forgotten records).
        Costs one indexed read per call while nothing moved."""
        conn = self.reader()
        row = conn.execute("SELECT value FROM meta WHERE key='applied_seq'").fetchone()
        if int(row[0]) == self._shards_seq:
            return
        with self._shards_lock:
            assert self._shards is not None
            conn.execute("BEGIN")  # one snapshot: position, new vectors and count agree
            try:
                row = conn.execute("SELECT value FROM meta WHERE key='applied_seq'").fetchone()
                applied_seq = int(row[0])
                if applied_seq == self._shards_seq:
                    return
                fresh = reads.vectors_after(conn, self._shards_rowid, self.dim)
                top = conn.execute("SELECT coalesce(max(rowid), 0) FROM records")
                top_rowid = int(top.fetchone()[0])
                stored = int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
                held = sum(len(s) for s in self._shards.values())
                held += sum(len(ids) for ids, _ in fresh.values())
                present = (
                    None
                    if stored == held
                    else {int(r) for (r,) in conn.execute("SELECT rowid FROM vectors")}
                )
            finally:
                conn.execute("COMMIT")
            for key, (ids, matrix) in fresh.items():
                shard = self._shards.get(key)
                if shard is None:
                    shard = self._shards[key] = self._new_shard(key)
                shard.add(ids, matrix)
            if present is not None:
                for shard in self._shards.values():
                    for rowid in shard.rowids():
                        if rowid not in present:
                            shard.remove(rowid)
            self._shards_rowid = top_rowid
            self._shards_seq = applied_seq

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
        projector.fill_vectors(entries, vectors, embed, self)
        shard_adds: projector.ShardAdds = {}
        shard_removes: projector.ShardRemoves = []
        touched: dict[projector.Scope, int] = {}
        with self._write_txn() as conn:
            for offset, payload in entries:
                projector.note_history(conn, offset, payload)
                scope = projector.apply_one(
                    conn, offset, payload, vectors, self.dim, shard_adds, shard_removes
                )
                if scope is not None:
                    touched[scope] = int(payload["seq"])
            projector.bump_generations(conn, touched)
            last_seq = max(int(entries[-1][1]["seq"]), applied_through or 0)
            conn.execute("UPDATE meta SET value=? WHERE key='applied_seq'", (str(last_seq),))
            conn.execute("UPDATE meta SET value=? WHERE key='applied_end'", (str(end),))
        if touched:  # after the commit: a search that saw the old number read old rows
            with self._gens_lock:
                for (touched_ns, touched_scope), seq in touched.items():
                    kept = self._gens.get(touched_ns)
                    if kept is not None:
                        kept[touched_scope] = seq
        with self._shards_lock:
            if self._shards is not None:
                self._shards_seq = last_seq
                for key, rowid in shard_removes:
                    shard = self._shards.get(key)
                    if shard is not None:
                        shard.remove(rowid)
                for key, (ids, vecs) in shard_adds.items():
                    shard = self._shards.get(key)
                    if shard is None:
                        shard = self._shards[key] = self._new_shard(key)
                    shard.add(np.asarray(ids, dtype=np.int64), np.vstack(vecs))

    def generation(self, ns: str, types: Sequence[str] = (), *, edges: bool = False) -> int:
        """A number that changes whenever a write could change what a search of ``ns``
        over ``types`` (every type when empty; and the edges with ``edges``) finds: the
        sum of those scopes' last-write seqs (``projector.bump_generations``). Writes to
        other namespaces or types, and access counts, leave it unchanged."""
        gens = self._generations(ns)
        if not types:
            return sum(v for k, v in gens.items() if edges or k != projector.EDGES)
        total = sum(gens.get(t, 0) for t in types)
        return total + gens.get(projector.EDGES, 0) if edges else total

    def _generations(self, ns: str) -> dict[str, int]:
        if self.read_only:
            return projector.generations(self.reader(), ns)
        with self._gens_lock:
            kept = self._gens.get(ns)
            if kept is None:
                kept = self._gens[ns] = projector.generations(self.reader(), ns)
            return dict(kept)

    # -- embedding cache --------------------------------------------------------
    def cached_vectors(self, hashes: Sequence[bytes]) -> dict[bytes, F32]:
        return reads.cached_vectors(self.reader(), self.model_id, hashes)

    def cache_vectors(self, items: dict[bytes, F32]) -> None:
        self._writer.executemany(
            "INSERT OR IGNORE INTO cache.embeddings(hash, model, vec) VALUES (?, ?, ?)",
            [
                (h, self.model_id, np.asarray(v, dtype=np.float32).tobytes())
                for h, v in items.items()
            ],
        )

    # -- reads ----------------------------------------------------------------
    def lookup(self, ns: str, rid: str) -> IndexedRecord | None:
        """The record's place and current state (scores, status, validity)."""
        return reads.lookup(self.reader(), ns, rid)

    def document(self, ns: str, origin: str) -> tuple[str, str, int] | None:
        """The live document filed from ``origin``: (doc id, content hash, version)."""
        return reads.document(self.reader(), ns, origin)

    def parts_of(self, ns: str, doc_id: str) -> list[str]:
        """Ids of the live chunks of a document, in filing order."""
        return reads.parts_of(self.reader(), ns, doc_id)

    def session_turns(self, ns: str, session: str, limit: int) -> list[tuple[str, int]]:
        """The live turns of a session, newest first (see :func:`reads.session_turns`)."""
        return reads.session_turns(self.reader(), ns, session, limit)

    def list_records(
        self, ns: str, query: RecordQuery, limit: int | None = None, offset: int = 0
    ) -> list[tuple[str, int]]:
        """Live records ``query`` selects as (id, address), in filing order."""
        return reads.list_records(self.reader(), ns, query, limit, offset)

    def sessions(
        self, ns: str, limit: int | None = None, offset: int = 0
    ) -> list[tuple[str, int, float, float]]:
        """Sessions with live turns: (session, turns, first time, last time)."""
        return reads.sessions(self.reader(), ns, limit, offset)

    def taken_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are held in any namespace, forgotten ones included."""
        return reads.taken_ids(self.reader(), ids)

    def namespaces(self) -> list[str]:
        """Every namespace with a live record, sorted."""
        return reads.namespaces(self.reader())

    def history_of(self, ns: str, rid: str) -> list[tuple[int, int]]:
        """The log records in ``rid``'s history, oldest first (see
        :func:`reads.history_of`)."""
        return reads.history_of(self.reader(), ns, rid)

    def edges_of(self, ns: str) -> list[tuple[str, str, str, float]]:
        """Every edge of ``ns`` (src, dst, rel, weight), in writing order."""
        return reads.edges_of(self.reader(), ns)

    def neighbours(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """Edges touching ``ids`` as (seed id, neighbour id, relation, weight), both ways."""
        return reads.neighbours(self.reader(), ns, ids)

    def rowids_for(self, ns: str, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        """id -> rowid for live, searchable records of ``ns`` that pass ``filters``."""
        return reads.rowids_for(self.reader(), ns, ids, filters)

    def node_info(self, ns: str, rowids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Current state of live records for ranking: ids, offsets, scores, access."""
        return reads.node_info(self.reader(), ns, rowids)

    def doc_ids(self, ns: str, rowids: Sequence[int]) -> dict[int, str]:
        """rowid -> the document a chunk belongs to (only for records that have one)."""
        return reads.doc_ids(self.reader(), ns, rowids)

    def vectors_of(self, rowids: Sequence[int]) -> dict[int, F32]:
        return reads.vectors_of(self.reader(), rowids)

    def edges_among(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        """Edges whose both ends are in ``ids``."""
        return reads.edges_among(self.reader(), ns, ids)

    def sources_of(self, ns: str, dst: str, rel: str) -> list[str]:
        """Ids of live records with an edge ``rel`` pointing at ``dst``."""
        return reads.sources_of(self.reader(), ns, dst, rel)

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

    def corrections(self, ns: str, words: Sequence[str], filters: Filters) -> dict[str, str]:
        """Each of ``words`` that no card holds, mapped to the word one typo away that
        cards of ``ns`` passing ``filters`` hold (``index.lexical.corrections``)."""
        scopes = {"ns": scope_token("n", ns)}
        if filters.drawer is not None:
            scopes["drawer"] = scope_token("d", filters.drawer)
        return lexical.corrections(
            self.reader(), self._vocabulary, ns, words, filters, scopes=scopes
        )

    def load_terms(self) -> int:
        """Read the index's term counts (``lexical.Vocabulary.known``) now: the first
        correction would, about 0.05 s at 100,000 cards. The terms held. Safe on any
        thread (the recall warm-up's): it reads on a connection of its own, and
        :meth:`close` waits for it."""
        with self._terms_load_lock:
            if self._closed:
                raise StoreClosed()
            conn = self._connect()
            try:
                return self._vocabulary.load(conn)
            finally:
                self._vocabulary.forget(conn)
                conn.close()

    def dense(self, ns: str, query: F32, k: int, filters: Filters) -> list[tuple[int, float]]:
        """Top ``k`` rowids by cosine within the namespace (and drawer) that pass
        ``filters``: shards are searched deeper until ``k`` survive or none are left.
        A filter that passes few records is searched exactly among them instead
        (:meth:`_dense_among`, when at most :data:`EXACT_AMONG_MAX` pass): at once with
        a scope id (``user_id``, ``agent_id``, ``run_id``: indexed, and usually a small
        share of the namespace), and for any other filter once the fetch would pass
        :data:`EXACT_AFTER_FETCH` (a filter that matches little or nothing would
        otherwise walk the whole shard through the ANN graph)."""
        if k > 0 and (filters.user_id or filters.agent_id or filters.run_id):
            among = self._dense_among(ns, query, k, filters)
            if among is not None:
                return among
        prefix = shard_key(ns, filters.drawer) if filters.drawer is not None else ns + "\x1f"
        shards = [
            shard
            for key, shard in self.shards().items()
            if key == prefix or (filters.drawer is None and key.startswith(prefix))
        ]
        total = sum(len(s) for s in shards)
        fetch = k * 4 if any(s.uses_ann for s in shards) else k
        tried_among = False
        while True:
            found: list[tuple[int, float]] = []
            for shard in shards:
                found.extend(shard.search(query, fetch))
            found.sort(key=lambda t: (-t[1], t[0]))  # ties by rowid: shard order is not stable
            kept = self._keep(ns, found, k, filters)
            if len(kept) >= k or fetch >= total:
                return kept
            if fetch * 4 > EXACT_AFTER_FETCH and not tried_among:
                tried_among = True
                among = self._dense_among(ns, query, k, filters)
                if among is not None:
                    return among
            fetch = min(total, fetch * 4)

    def _dense_among(
        self, ns: str, query: F32, k: int, filters: Filters
    ) -> list[tuple[int, float]] | None:
        """The exact top ``k`` among the records of ``ns`` that pass ``filters`` (read
        in SQL first), or None when more than :data:`EXACT_AMONG_MAX` pass."""
        passing = reads.passing_rowids(self.reader(), ns, filters, EXACT_AMONG_MAX + 1)
        if sum(map(len, passing.values())) > EXACT_AMONG_MAX:
            return None
        shards = self.shards()
        found = [
            hit
            for key, rowids in passing.items()
            if key in shards
            for hit in shards[key].search_among(query, rowids, k)
        ]
        found.sort(key=lambda t: (-t[1], t[0]))  # ties by rowid, across shards
        return found[:k]

    def _keep(
        self, ns: str, found: list[tuple[int, float]], k: int, filters: Filters
    ) -> list[tuple[int, float]]:
        """Drop candidates that fail the namespace or filters (checked in SQL)."""
        return reads.keep(self.reader(), ns, found, k, filters)

    def resolve(self, ns: str, rowids: Sequence[int]) -> dict[int, tuple[str, int]]:
        """rowid -> (id, offset) for live records of ``ns``."""
        return reads.resolve(self.reader(), ns, rowids)

    def stats(self, ns: str) -> dict[str, Any]:
        return reads.stats(self.reader(), ns)

    def fingerprint(self) -> dict[str, Any]:
        """A content summary used to compare an index with its rebuild."""
        conn = self.reader()
        recs = conn.execute(
            "SELECT id, ns, drawer, type, kind, seq, offset, status, importance, confidence,"
            " stability, user_id, agent_id, run_id, tags, meta, deleted FROM records"
            " ORDER BY seq"
        ).fetchall()
        edges = conn.execute(
            "SELECT src, dst, rel, weight FROM edges ORDER BY src, dst, rel"
        ).fetchall()
        history = conn.execute("SELECT ns, id, seq FROM history ORDER BY ns, id, seq").fetchall()
        return {"records": recs, "edges": edges, "history": history}

    # -- queries for the memory jobs ------------------------------------------
    MEMORY_ROW_COLUMNS = reads.MEMORY_ROW_COLUMNS

    def live_memory_rows(
        self,
        ns: str,
        *,
        not_status: str | None = None,
        reflections: bool | None = None,
        writable_only: bool = False,
        in_episode: bool = False,
        episode_id: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """Live memories of ``ns`` in filing order (see :func:`reads.live_memory_rows`)."""
        return reads.live_memory_rows(
            self.reader(),
            ns,
            not_status=not_status,
            reflections=reflections,
            writable_only=writable_only,
            in_episode=in_episode,
            episode_id=episode_id,
        )

    def targets_of(self, ns: str, src: str, rel: str) -> set[str]:
        """Ids ``src`` has an edge ``rel`` to (deleted ends included)."""
        return reads.targets_of(self.reader(), ns, src, rel)

    def edge_pairs(self, ns: str, rel: str) -> list[tuple[str, str]]:
        """Every edge ``rel`` of ``ns`` as (src, dst)."""
        return reads.edge_pairs(self.reader(), ns, rel)

    def live_count(self) -> int:
        """Live (not forgotten) records of every namespace."""
        return reads.live_count(self.reader())
