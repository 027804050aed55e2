"""The derived index in PostgreSQL: the :class:`~kredenc.storage.base.Index` of a store
whose ``backend`` is ``postgres``.

Tables and walls: ``schema.py``; the projector: ``project.py``; the lexical leg (BM25
in SQL): ``lexical.py``. The dense leg asks pgvector: exact inner product while a
namespace holds at most ``ann.threshold`` vectors (the same threshold at which the
SQLite index switches to its HNSW graph), the HNSW index past it, with pgvector's
iterative scan so that filters still return ``k`` rows; either way the results are
sorted by score, then rowid.

Every read is one short transaction on a pooled connection that first sets
``kredenc.ns`` (row-level security) and binds the namespace in its SQL too. ``apply``
is one transaction (all of a batch or none of it) under ``kredenc.all``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from kredenc.errors import StoreError
from kredenc.storage.index import projector
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import MAX_SCORED, Phrase
from kredenc.storage.index.projector import EmbedFn
from kredenc.storage.index.reads import (
    MEMORY_ROW_COLUMNS,
    IndexedRecord,
    RecordQuery,
    listing_filters,
)
from kredenc.storage.index.schema import STATE_COLUMNS, shard_key
from kredenc.storage.index.vectors import F32, AnnParams
from kredenc.storage.postgres import lexical, migrate, project, schema
from kredenc.storage.postgres.filters import record_conditions

log = logging.getLogger(__name__)

_SEARCHABLE = ["memory", "chunk", "turn"]
#: Past this many nearest vectors fetched, a filtered ANN search ranks exactly among
#: the records that pass instead (the scoping branch's rule for the SQLite index).
DEEPEST_FETCH = 2560
#: Cards from which the housekeeper refreshes the planner's statistics (compaction_due).
ANALYZE_MIN = 500
_ALL = "*"  # the namespace of a transaction that may see every namespace


def _ranked(rows: Sequence[Any], k: int) -> list[tuple[int, float]]:
    """(rowid, score) best first, ties by rowid, at most ``k``."""
    found = [(int(r), float(sc)) for r, sc in rows]
    found.sort(key=lambda t: (-t[1], t[0]))
    return found[:k]


def _error(exc: psycopg.Error) -> StoreError:
    return StoreError(f"PostgreSQL index: {exc}".strip(), "check the database server")


class PostgresIndex:
    """The PostgreSQL :class:`~kredenc.storage.base.Index` in one schema of a database."""

    errors: tuple[type[Exception], ...] = (psycopg.Error,)
    MEMORY_ROW_COLUMNS = MEMORY_ROW_COLUMNS

    def __init__(
        self,
        dsn: str,
        schema_name: str,
        *,
        dim: int,
        model_id: str,
        ann: AnnParams | None = None,
        read_only: bool = False,
        pool_size: int = 8,
    ) -> None:
        self.schema = migrate.check_schema(schema_name)
        self.dim = dim
        self.model_id = model_id
        self.ann = ann or AnnParams()
        self.read_only = read_only
        if not read_only:
            migrate.migrate(dsn, self.schema, schema.steps(dim))
        self._pool = migrate.pool(dsn, self.schema, max_size=pool_size, configure=register_vector)
        self._stems = lexical.Stems()
        self._closed = False

    @staticmethod
    def drop(dsn: str, schema_name: str) -> None:
        """Drop the index's tables (not the embedding cache): a rebuild starts empty."""
        with migrate.connect(dsn, schema_name) as conn, conn.transaction():
            for table in schema.INDEX_TABLES:
                conn.execute(
                    sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(table))
                )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations(name text PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            migrate.forget_steps(conn, schema.INDEX_PREFIX)

    # -- connections --------------------------------------------------------------
    @contextmanager
    def _tx(self, ns: str) -> Iterator[psycopg.Connection]:
        """A transaction that sees namespace ``ns`` only (``_ALL``: every namespace)."""
        try:
            with self._pool.connection() as conn:
                if ns == _ALL:
                    conn.execute("SELECT set_config('kredenc.all', 'on', true)")
                else:
                    conn.execute(
                        "SELECT set_config('kredenc.ns', %s, true),"
                        " set_config('kredenc.all', 'off', true)",
                        [ns],
                    )
                yield conn
        except psycopg.Error as exc:
            raise _error(exc) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()

    # -- the position --------------------------------------------------------------
    def applied(self) -> tuple[int, int]:
        with self._tx(_ALL) as conn:
            rows = dict(
                conn.execute(
                    "SELECT key, value FROM meta WHERE key IN ('applied_seq', 'applied_end')"
                ).fetchall()
            )
        return int(rows["applied_seq"]), int(rows["applied_end"])

    def apply(
        self,
        entries: Iterable[tuple[int, dict[str, Any]]],
        vectors: dict[str, F32] | None,
        embed: EmbedFn | None,
        end: int,
        applied_through: int | None = None,
    ) -> None:
        """Apply log records (address, payload) in one transaction; record the position."""
        entries = list(entries)
        if not entries:
            return
        vectors = dict(vectors or {})
        projector.fill_vectors(entries, vectors, embed, self)
        touched: dict[projector.Scope, int] = {}
        puts = sum(1 for _, p in entries if p.get("op") == "put")
        with self._tx(_ALL) as conn:
            counts = project.Counts(project.reserve_rowids(conn, puts))
            # Pipeline mode: statements stream without a round trip each (only those
            # whose answer is read, a tombstone's or a score's, wait for the server).
            with conn.pipeline():
                for offset, payload in entries:
                    scope = project.apply_one(conn, offset, payload, vectors, self.dim, counts)
                    if scope is not None:
                        touched[scope] = int(payload["seq"])
            last_seq = max(int(entries[-1][1]["seq"]), applied_through or 0)
            values: list[tuple[str, str]] = [
                (projector.generation_key(ns, scope), str(seq))
                for (ns, scope), seq in touched.items()
            ]
            values += [("applied_seq", str(last_seq)), ("applied_end", str(end))]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO meta(key, value) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    values,
                )
                adds = [("cards", counts.cards), ("tokens", counts.tokens)]
                adds += [(f"vectors\x1f{ns}", n) for ns, n in counts.vectors.items()]
                cur.executemany(
                    "INSERT INTO meta(key, value) VALUES (%s, %s::text)"
                    " ON CONFLICT (key) DO UPDATE SET"
                    " value = (meta.value::bigint + excluded.value::bigint)::text",
                    [(key, str(n)) for key, n in adds if n],
                )

    def generation(self, ns: str, types: Sequence[str] = (), *, edges: bool = False) -> int:
        """The sum of the last-write seqs of the scopes a search reads (see
        ``SqliteIndex.generation``)."""
        lo = projector.generation_key(ns, "")
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT key, value FROM meta WHERE starts_with(key, %s)", [lo]
            ).fetchall()
        gens = {str(k)[len(lo) :]: int(v) for k, v in rows}
        if not types:
            return sum(v for k, v in gens.items() if edges or k != projector.EDGES)
        total = sum(gens.get(t, 0) for t in types)
        return total + gens.get(projector.EDGES, 0) if edges else total

    # -- the embedding cache ----------------------------------------------------------
    def cached_vectors(self, hashes: Sequence[bytes]) -> dict[bytes, F32]:
        if not hashes:
            return {}
        with self._tx(_ALL) as conn:
            rows = conn.execute(
                "SELECT hash, vec FROM embeddings WHERE model = %s AND hash = ANY(%s::bytea[])",
                [self.model_id, list(hashes)],
            ).fetchall()
        return {bytes(h): np.frombuffer(bytes(v), dtype=np.float32) for h, v in rows}

    def cache_vectors(self, items: dict[bytes, F32]) -> None:
        if not items:
            return
        rows = [
            (self.model_id, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()
        ]
        with self._tx(_ALL) as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO embeddings(model, hash, vec) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                rows,
            )

    # -- the legs ----------------------------------------------------------------------
    def lexical(
        self,
        ns: str,
        phrases: Sequence[Phrase],
        k: int,
        filters: Filters,
        *,
        context_weight: float = 0.5,
        max_scored: int = MAX_SCORED,
        deadline: float | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` rowids by BM25 (``lexical.search``), past ``max_scored`` matching
        cards ranked by the SQLite leg's plan (the rarest phrases required)."""
        if not phrases or k <= 0:
            return []
        try:
            with self._pool.connection() as conn:
                conn.execute(
                    "SELECT set_config('kredenc.ns', %s, true),"
                    " set_config('kredenc.all', 'off', true)",
                    [ns],
                )
                return lexical.search(
                    conn,
                    self._stems,
                    ns,
                    phrases,
                    k,
                    filters,
                    context_weight=context_weight,
                    max_scored=max_scored,
                    deadline=deadline,
                )
        except psycopg.Error as exc:
            raise _error(exc) from None

    def dense(self, ns: str, query: F32, k: int, filters: Filters) -> list[tuple[int, float]]:
        """Top ``k`` rowids by inner product (cosine: unit vectors), ties by rowid.

        Exact below ``ann.threshold`` vectors in the namespace (the SQLite index's own
        switch to its graph), HNSW from there. Filters that name a scope id, tags or
        meta values are selective by design: the records that pass are found first and
        ranked among themselves. Otherwise the nearest vectors are fetched and checked
        against the filters, deeper (4x) until ``k`` pass or none are left, as the
        SQLite index does: the join would score every vector of the namespace."""
        if k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        shard, shard_args = "", []
        if filters.drawer is not None:
            shard, shard_args = " AND v.shard = %s", [shard_key(ns, filters.drawer)]
        with self._tx(ns) as conn:
            size = conn.execute(
                "SELECT value FROM meta WHERE key = %s", [f"vectors\x1f{ns}"]
            ).fetchone()
            total = int(size[0]) if size is not None else 0
            exact = total < self.ann.threshold
            # An expression the HNSW index cannot serve: an exact scan and sort.
            order = "(v.vec <#> %s) + 0, v.rowid" if exact else "v.vec <#> %s"
            if not exact:
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            where, args = record_conditions(filters)

            def among_passing() -> list[tuple[int, float]]:
                # Exact among the records that pass (the planner reads them first).
                rows = conn.execute(
                    "SELECT v.rowid, -(v.vec <#> %s) FROM vectors v JOIN records r"
                    " ON r.rowid = v.rowid WHERE v.ns = %s AND r.ns = %s"
                    + shard
                    + where
                    + " ORDER BY (v.vec <#> %s) + 0, v.rowid LIMIT %s",
                    [q, ns, ns, *shard_args, *args, q, k],
                ).fetchall()
                return _ranked(rows, k)

            narrow = (filters.user_id, filters.agent_id, filters.run_id, filters.tags)
            if any(narrow) or filters.where:
                return among_passing()
            fetch = k if exact else 4 * k
            while True:
                if not exact and fetch > DEEPEST_FETCH:
                    # Few records pass: walking the graph deeper would visit all of it.
                    return among_passing()
                if not exact:  # pgvector's ef_search is at most 1000
                    ef = min(1000, max(self.ann.expansion_search, fetch))
                    conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                found = _ranked(
                    conn.execute(
                        "SELECT v.rowid, -(v.vec <#> %s) FROM vectors v WHERE v.ns = %s"
                        + shard
                        + f" ORDER BY {order} LIMIT %s",
                        [q, ns, *shard_args, q, fetch],
                    ).fetchall(),
                    fetch,
                )
                passed = {
                    int(r[0])
                    for r in conn.execute(
                        "SELECT r.rowid FROM records r WHERE r.rowid = ANY(%s::bigint[])"
                        " AND r.ns = %s" + where,
                        [[r for r, _ in found], ns, *args],
                    ).fetchall()
                }
                kept = [(r, sc) for r, sc in found if r in passed]
                if len(kept) >= k or len(found) < fetch or fetch >= total:
                    return kept[:k]
                fetch = min(max(total, 1), fetch * 4)

    # -- records and documents -----------------------------------------------------------
    def lookup(self, ns: str, rid: str) -> IndexedRecord | None:
        cols = ", ".join(STATE_COLUMNS)
        with self._tx(ns) as conn:
            row = conn.execute(
                f"SELECT rowid, id, address, deleted, {cols} FROM records"
                " WHERE ns = %s AND id = %s",
                [ns, rid],
            ).fetchone()
        if row is None:
            return None
        state = dict(zip(STATE_COLUMNS, row[4:], strict=True))
        state["read_only"] = bool(state["read_only"])
        return IndexedRecord(int(row[0]), str(row[1]), int(row[2]), bool(row[3]), state)

    def resolve(self, ns: str, rowids: Sequence[int]) -> dict[int, tuple[str, int]]:
        if not rowids:
            return {}
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT rowid, id, address FROM records WHERE rowid = ANY(%s::bigint[]) AND ns = %s"
                " AND NOT deleted",
                [list(rowids), ns],
            ).fetchall()
        return {int(r): (str(i), int(o)) for r, i, o in rows}

    def rowids_for(self, ns: str, ids: Sequence[str], filters: Filters) -> dict[str, int]:
        if not ids:
            return {}
        where, args = record_conditions(filters)
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT r.id, r.rowid FROM records r WHERE r.id = ANY(%s::text[]) AND r.ns = %s"
                " AND r.type = ANY(%s::text[])" + where,
                [list(ids), ns, _SEARCHABLE, *args],
            ).fetchall()
        return {str(i): int(r) for i, r in rows}

    def node_info(self, ns: str, rowids: Sequence[int]) -> dict[int, dict[str, Any]]:
        if not rowids:
            return {}
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT r.rowid, r.id, r.address, r.type, r.kind, r.importance, r.created_at,"
                " r.status, coalesce(a.count, 0), a.last_at FROM records r"
                " LEFT JOIN access a ON a.id = r.id AND a.ns = r.ns"
                " WHERE r.rowid = ANY(%s::bigint[]) AND r.ns = %s AND NOT r.deleted",
                [list(rowids), ns],
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
        out: dict[int, dict[str, Any]] = {}
        for row in rows:
            info = dict(zip(keys, row[1:], strict=True))
            info["access_count"] = int(info["access_count"])
            out[int(row[0])] = info
        return out

    def doc_ids(self, ns: str, rowids: Sequence[int]) -> dict[int, str]:
        if not rowids:
            return {}
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT rowid, doc_id FROM records WHERE rowid = ANY(%s::bigint[]) AND ns = %s"
                " AND doc_id IS NOT NULL",
                [list(rowids), ns],
            ).fetchall()
        return {int(r): str(d) for r, d in rows}

    def vectors_of(self, rowids: Sequence[int]) -> dict[int, F32]:
        if not rowids:
            return {}
        with self._tx(_ALL) as conn:
            rows = conn.execute(
                "SELECT rowid, vec FROM vectors WHERE rowid = ANY(%s::bigint[])", [list(rowids)]
            ).fetchall()
        # pgvector >= 0.4 hands back its Vector type, older versions numpy arrays.
        return {
            int(r): np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)
            for r, v in rows
        }

    def document(self, ns: str, origin: str) -> tuple[str, str, int] | None:
        with self._tx(ns) as conn:
            row = conn.execute(
                "SELECT d.doc_id, d.content_hash, d.version FROM documents d JOIN records r"
                " ON r.id = d.doc_id AND r.ns = d.ns WHERE d.ns = %s AND d.source = %s"
                " AND NOT r.deleted",
                [ns, origin],
            ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]), int(row[2]))

    def parts_of(self, ns: str, doc_id: str) -> list[str]:
        return self._ids(
            ns,
            "SELECT id FROM records WHERE ns = %s AND doc_id = %s AND NOT deleted ORDER BY seq",
            [ns, doc_id],
        )

    def session_turns(self, ns: str, session: str, limit: int) -> list[tuple[str, int]]:
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT id, address FROM records WHERE ns = %s AND session = %s"
                " AND type = 'turn' AND NOT deleted ORDER BY seq DESC LIMIT %s",
                [ns, session, max(0, int(limit))],
            ).fetchall()
        return [(str(i), int(o)) for i, o in rows]

    def list_records(
        self, ns: str, query: RecordQuery, limit: int | None = None, offset: int = 0
    ) -> list[tuple[str, int]]:
        where, args = record_conditions(listing_filters(query))
        if query.statuses:
            where += " AND r.status = ANY(%s::text[])"
            args.append(list(query.statuses))
        if query.session is not None:
            where += " AND r.session = %s"
            args.append(query.session)
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT r.id, r.address FROM records r WHERE r.ns = %s" + where + " ORDER BY"
                " r.seq LIMIT %s OFFSET %s",
                [ns, *args, None if limit is None else max(0, int(limit)), max(0, int(offset))],
            ).fetchall()
        return [(str(i), int(o)) for i, o in rows]

    def sessions(
        self, ns: str, limit: int | None = None, offset: int = 0
    ) -> list[tuple[str, int, float, float]]:
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT session, count(*), min(created_at), max(created_at) FROM records"
                " WHERE ns = %s AND session IS NOT NULL AND type = 'turn' AND NOT deleted"
                " GROUP BY session ORDER BY max(seq) DESC, session LIMIT %s OFFSET %s",
                [ns, None if limit is None else max(0, int(limit)), max(0, int(offset))],
            ).fetchall()
        return [(str(s), int(n), float(a), float(b)) for s, n, a, b in rows]

    def taken_ids(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        return set(
            self._ids(_ALL, "SELECT id FROM records WHERE id = ANY(%s::text[])", [list(ids)])
        )

    def namespaces(self) -> list[str]:
        return self._ids(_ALL, "SELECT DISTINCT ns FROM records WHERE NOT deleted ORDER BY ns", [])

    def _ids(self, ns: str, query: str, params: list[Any]) -> list[str]:
        with self._tx(ns) as conn:
            return [str(r[0]) for r in conn.execute(query.encode(), params).fetchall()]

    # -- edges ----------------------------------------------------------------------
    def _edges(self, ns: str, query: str, params: list[Any]) -> list[tuple[str, str, str, float]]:
        with self._tx(ns) as conn:
            rows = conn.execute(query.encode(), params).fetchall()
        return [(str(a), str(b), str(r), float(w)) for a, b, r, w in rows]

    def edges_of(self, ns: str) -> list[tuple[str, str, str, float]]:
        return self._edges(
            ns,
            "SELECT src, dst, rel, weight FROM edges WHERE ns = %s ORDER BY seq, src, dst, rel",
            [ns],
        )

    def neighbours(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        if not ids:
            return []
        out = self._edges(
            ns,
            "SELECT src, dst, rel, weight FROM edges WHERE ns = %s AND src = ANY(%s::text[])",
            [ns, list(ids)],
        )
        out += [
            (b, a, r, w)
            for a, b, r, w in self._edges(
                ns,
                "SELECT src, dst, rel, weight FROM edges WHERE ns = %s AND dst = ANY(%s::text[])",
                [ns, list(ids)],
            )
        ]
        return out

    def edges_among(self, ns: str, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
        if not ids:
            return []
        return self._edges(
            ns,
            "SELECT src, dst, rel, weight FROM edges WHERE ns = %s AND src = ANY(%s::text[])"
            " AND dst = ANY(%s::text[]) ORDER BY seq",
            [ns, list(ids), list(ids)],
        )

    def sources_of(self, ns: str, dst: str, rel: str) -> list[str]:
        return self._ids(
            ns,
            "SELECT e.src FROM edges e JOIN records r ON r.id = e.src WHERE e.ns = %s"
            " AND e.dst = %s AND e.rel = %s AND NOT r.deleted ORDER BY e.seq",
            [ns, dst, rel],
        )

    def targets_of(self, ns: str, src: str, rel: str) -> set[str]:
        return set(
            self._ids(
                ns,
                "SELECT dst FROM edges WHERE ns = %s AND src = %s AND rel = %s",
                [ns, src, rel],
            )
        )

    def edge_pairs(self, ns: str, rel: str) -> list[tuple[str, str]]:
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT src, dst FROM edges WHERE ns = %s AND rel = %s", [ns, rel]
            ).fetchall()
        return [(str(a), str(b)) for a, b in rows]

    # -- counts ---------------------------------------------------------------------
    def stats(self, ns: str) -> dict[str, Any]:
        with self._tx(ns) as conn:
            by_drawer = conn.execute(
                "SELECT drawer, type, count(*) FROM records WHERE ns = %s AND NOT deleted"
                " GROUP BY drawer, type ORDER BY drawer, type",
                [ns],
            ).fetchall()
            row = conn.execute("SELECT count(*) FROM edges WHERE ns = %s", [ns]).fetchone()
        return {
            "records": sum(int(n) for _, _, n in by_drawer),
            "drawers": [{"drawer": d, "type": t, "records": int(n)} for d, t, n in by_drawer],
            "edges": int(row[0]) if row else 0,
        }

    def fingerprint(self) -> dict[str, Any]:
        with self._tx(_ALL) as conn:
            recs = conn.execute(
                "SELECT id, ns, drawer, type, kind, seq, address, status, importance,"
                " confidence, stability, deleted FROM records ORDER BY seq"
            ).fetchall()
            edges = conn.execute(
                "SELECT src, dst, rel, weight FROM edges ORDER BY src, dst, rel"
            ).fetchall()
        return {"records": [tuple(r) for r in recs], "edges": [tuple(e) for e in edges]}

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
        """Live memories of ``ns`` in filing order (``reads.live_memory_rows``)."""
        where = ["ns = %s", "type = 'memory'", "NOT deleted"]
        args: list[Any] = [ns]
        if in_episode:
            where.append("episode_id IS NOT NULL")
        if not_status is not None:
            where.append("status <> %s")
            args.append(not_status)
        if reflections is not None:
            where.append(f"coalesce(source, 'user') {'=' if reflections else '<>'} 'reflection'")
        if writable_only:
            where.append("NOT read_only")
        if episode_id is not None:
            where.append("episode_id = %s")
            args.append(episode_id)
        with self._tx(ns) as conn:
            rows = conn.execute(
                (
                    "SELECT rowid, id, address, created_at, kind, drawer, importance, status,"
                    " coalesce(source, 'user'), episode_id, read_only::int FROM records WHERE "
                    + " AND ".join(where)
                    + " ORDER BY created_at, seq"
                ).encode(),
                args,
            ).fetchall()
        return [tuple(r) for r in rows]

    def live_count(self) -> int:
        with self._tx(_ALL) as conn:
            row = conn.execute("SELECT count(*) FROM records WHERE NOT deleted").fetchone()
        return int(row[0]) if row else 0

    # -- maintenance -------------------------------------------------------------------
    def compaction_due(self) -> bool:
        """Whether the planner's statistics are due a refresh: the cards have doubled
        since the last ``ANALYZE`` (and number at least ``ANALYZE_MIN``). A store filled
        faster than autovacuum looks (a minute) would otherwise be planned as the empty
        tables it started as: 3-5x slower searches were measured at 2,000 records.
        (GIN's pending list and the HNSW graph need no merge: PostgreSQL keeps them.)"""
        cards, analyzed = self._counts("cards", "analyzed_cards")
        return cards >= ANALYZE_MIN and cards >= 2 * analyzed

    def compact(self) -> float:
        """Refresh the planner's statistics (``ANALYZE``); seconds taken."""
        started = time.perf_counter()
        try:
            with self._pool.connection() as conn:
                conn.execute("ANALYZE records, cards, vectors, edges, access")
                conn.execute(
                    "INSERT INTO meta(key, value) SELECT 'analyzed_cards', value FROM meta"
                    " WHERE key = 'cards' ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                )
        except psycopg.Error as exc:
            raise _error(exc) from None
        return time.perf_counter() - started

    def _counts(self, *keys: str) -> list[int]:
        with self._tx(_ALL) as conn:
            rows = dict(
                conn.execute(
                    "SELECT key, value FROM meta WHERE key = ANY(%s::text[])", [list(keys)]
                ).fetchall()
            )
        return [int(rows.get(key, 0)) for key in keys]

    def shards(self) -> Mapping[str, Sized]:
        """The vectors per shard key (the HNSW graph lives in the database: nothing
        to load)."""
        with self._tx(_ALL) as conn:
            rows = conn.execute("SELECT shard, count(*) FROM vectors GROUP BY shard").fetchall()
        return {str(key): range(int(n)) for key, n in rows}

    def save_ann(self) -> None:
        """Nothing to save: the HNSW index is part of the database."""


if TYPE_CHECKING:
    # The protocol holds (checked by mypy, never run).
    from kredenc.storage.base import Index

    _index: type[Index] = PostgresIndex
