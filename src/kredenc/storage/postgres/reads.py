"""Reads of the PostgreSQL index: records, documents, sessions, edges and counts.

:class:`IndexReads` is the half of :class:`~kredenc.storage.postgres.index.PostgresIndex`
that only reads; each method is one short transaction (``_tx``) that sets the
namespace for row-level security and binds it in its SQL too. The same answers as the
SQLite index's ``storage/index/reads.py``, function for function.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import psycopg

from kredenc.storage.index.filters import Filters
from kredenc.storage.index.reads import IndexedRecord, RecordQuery, listing_filters
from kredenc.storage.index.schema import STATE_COLUMNS
from kredenc.storage.index.vectors import F32
from kredenc.storage.postgres.filters import record_conditions

#: The record types the legs search.
SEARCHABLE = ["memory", "chunk", "turn"]
#: The namespace of a transaction that may see every namespace.
ALL = "*"


class IndexReads:
    """The reading methods of the PostgreSQL index (mixed into ``PostgresIndex``)."""

    def _tx(self, ns: str) -> AbstractContextManager[psycopg.Connection]:
        """A transaction that sees namespace ``ns`` only (``ALL``: every namespace)."""
        raise NotImplementedError

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
                [list(ids), ns, SEARCHABLE, *args],
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
        with self._tx(ALL) as conn:
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
        return set(self._ids(ALL, "SELECT id FROM records WHERE id = ANY(%s::text[])", [list(ids)]))

    def namespaces(self) -> list[str]:
        return self._ids(ALL, "SELECT DISTINCT ns FROM records WHERE NOT deleted ORDER BY ns", [])

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

    def history_of(self, ns: str, rid: str) -> list[tuple[int, int]]:
        with self._tx(ns) as conn:
            rows = conn.execute(
                "SELECT seq, address FROM history WHERE ns = %s AND id = %s ORDER BY seq",
                [ns, rid],
            ).fetchall()
        return [(int(s), int(a)) for s, a in rows]

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
        with self._tx(ALL) as conn:
            recs = conn.execute(
                "SELECT id, ns, drawer, type, kind, seq, address, status, importance,"
                " confidence, stability, deleted FROM records ORDER BY seq"
            ).fetchall()
            edges = conn.execute(
                "SELECT src, dst, rel, weight FROM edges ORDER BY src, dst, rel"
            ).fetchall()
            history = conn.execute(
                "SELECT ns, id, seq FROM history ORDER BY ns, id, seq"
            ).fetchall()
        return {
            "records": [tuple(r) for r in recs],
            "edges": [tuple(e) for e in edges],
            "history": [tuple(h) for h in history],
        }

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
        with self._tx(ALL) as conn:
            row = conn.execute("SELECT count(*) FROM records WHERE NOT deleted").fetchone()
        return int(row[0]) if row else 0
