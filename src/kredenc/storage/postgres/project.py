"""The log-to-index projector for PostgreSQL: what each log record changes.

The same rules as the SQLite projector (``storage/index/projector.py``), record for
record: ``put`` adds a record (row, card, vector; a document's row), ``tombstone``
marks it deleted and drops its card, vector and edges, ``edge``/``unedge``,
``score``/``status`` and ``access``; ``note_history`` before each. Everything runs in
the caller's transaction.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import psycopg

from kredenc.errors import StoreError
from kredenc.storage.index.cards import card_of, context_of
from kredenc.storage.index.projector import EDGES, Scope, history_subjects, session_of
from kredenc.storage.index.schema import INDEXED_TYPES, SCORE_FIELDS, shard_key
from kredenc.storage.index.vectors import F32
from kredenc.storage.postgres.lexical import PorterStems, Stems, tsvector, words

#: Tokens of the SQLite card's scope column (``cards.scope_token`` twice).
SCOPE_TOKENS = 2


class Counts:
    """What one transaction changes in the counts kept in ``meta`` and ``terms``, and
    the rowids it reserved for its puts (taken in order)."""

    def __init__(self, rowids: list[int] | None = None) -> None:
        self.cards = 0
        self.tokens = 0
        self.vectors: dict[str, int] = {}
        self.rowids = list(reversed(rowids or []))
        self.new_cards: set[int] = set()  # cards put (their lexemes are counted at the end)
        self.gone: Counter[str] = Counter()  # lexemes of the cards dropped

    def vector(self, ns: str, delta: int) -> None:
        self.vectors[ns] = self.vectors.get(ns, 0) + delta


def reserve_rowids(conn: psycopg.Connection, n: int) -> list[int]:
    """``n`` rowids from the records' identity sequence, in one round trip: with them a
    put needs no ``RETURNING``, so a whole apply streams in pipeline mode."""
    if n <= 0:
        return []
    rows = conn.execute(
        "SELECT nextval(pg_get_serial_sequence('records', 'rowid'))"
        " FROM generate_series(1, %s) ORDER BY 1",
        [n],
    ).fetchall()
    return [int(r[0]) for r in rows]


def note_history(conn: psycopg.Connection, offset: int, p: dict[str, Any]) -> None:
    """Add the record at address ``offset`` to the history of each memory it touches,
    before ``apply_one`` (``projector.note_history``: the same rows)."""
    starts, ids = history_subjects(p)
    if not ids:
        return
    ns, seq = p["ns"], p["seq"]
    if starts:
        conn.execute(
            "INSERT INTO history(ns, id, seq, address) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            [ns, ids[0], seq, offset],
        )
        return
    for rid in dict.fromkeys(ids):
        conn.execute(
            "INSERT INTO history(ns, id, seq, address) SELECT %s, %s, %s, %s"
            " WHERE EXISTS (SELECT 1 FROM history WHERE ns = %s AND id = %s)"
            " ON CONFLICT DO NOTHING",
            [ns, rid, seq, offset, ns, rid],
        )
    if p.get("op") == "tombstone":
        conn.execute(
            "INSERT INTO history(ns, id, seq, address)"
            " SELECT DISTINCT o.ns, o.other, %s::bigint, %s::bigint FROM (SELECT e.ns,"
            " CASE WHEN e.src = %s THEN e.dst ELSE e.src END AS other FROM edges e"
            " WHERE e.ns = %s AND (e.src = %s OR e.dst = %s)) o"
            " WHERE EXISTS (SELECT 1 FROM history h WHERE h.ns = o.ns AND h.id = o.other)"
            " ON CONFLICT DO NOTHING",
            [seq, offset, ids[0], ns, ids[0], ids[0]],
        )


def apply_one(
    conn: psycopg.Connection,
    offset: int,
    p: dict[str, Any],
    vectors: dict[str, F32],
    dim: int,
    counts: Counts,
    stems: Stems | None = None,
) -> Scope | None:
    """Apply one log record (written at address ``offset``); the scope whose search
    results it may change, or None (see ``projector.apply_one``). ``stems``: the
    index's (its cards' lexemes are FTS5's with :class:`~lexical.PorterStems`)."""
    op = p.get("op")
    if op == "put":
        put(conn, offset, p, vectors, dim, counts, stems)
        return (p["ns"], str(p["type"]))
    if op == "tombstone":
        kind = tombstone(conn, p["id"], p["ns"], counts)
        return None if kind is None else (p["ns"], kind)
    if op == "edge":
        conn.execute(
            "INSERT INTO edges(src, dst, rel, weight, ns, seq) VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (src, dst, rel) DO UPDATE SET weight = excluded.weight,"
            " ns = excluded.ns, seq = excluded.seq",
            [p["src"], p["dst"], p["rel"], float(p.get("weight", 1.0)), p["ns"], p["seq"]],
        )
        return (p["ns"], EDGES)
    if op == "unedge":
        conn.execute(
            "DELETE FROM edges WHERE src = %s AND dst = %s AND rel = %s",
            [p["src"], p["dst"], p["rel"]],
        )
        return (p["ns"], EDGES)
    if op in ("score", "status"):
        fields = {k: p[k] for k in SCORE_FIELDS if k in p}
        if not fields:
            return None
        sets = ", ".join(f"{k} = %s" for k in fields)
        row = conn.execute(
            f"UPDATE records SET {sets} WHERE id = %s AND ns = %s RETURNING type",
            [*fields.values(), p["id"], p["ns"]],
        ).fetchone()
        return None if row is None else (p["ns"], str(row[0]))
    if op == "access":
        at = float(p.get("ts", 0.0))
        items = [(rid, p["ns"], int(n), at) for rid, n in (p.get("counts") or {}).items()]
        if items:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO access(id, ns, count, last_at) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (id) DO UPDATE SET count = access.count + excluded.count,"
                    " last_at = greatest(access.last_at, excluded.last_at)",
                    items,
                )
    return None


def put(
    conn: psycopg.Connection,
    offset: int,
    p: dict[str, Any],
    vectors: dict[str, F32],
    dim: int,
    counts: Counts,
    stems: Stems | None = None,
) -> None:
    scores = p.get("scores") or {}
    vec: F32 | None = None
    if p["type"] in INDEXED_TYPES:
        vec = np.asarray(vectors[p["id"]], dtype=np.float32)
        if vec.shape != (dim,):
            raise StoreError(f"vector of shape {vec.shape} for {p['id']}, expected ({dim},)")
    rowid = counts.rowids.pop()
    conn.execute(
        "INSERT INTO records(rowid, id, ns, drawer, type, kind, seq, address, created_at,"
        " valid_from, valid_to, status, importance, confidence, stability, source, doc_id,"
        " episode_id, task_status, read_only, origin, loader, page, session, user_id,"
        " agent_id, run_id, tags, meta) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
        " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb,"
        " %s::jsonb)",
        [
            rowid,
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
            bool(p.get("read_only", False)),
            p.get("origin"),
            p.get("loader"),
            p.get("page"),
            session_of(p),
            p.get("user_id"),
            p.get("agent_id"),
            p.get("run_id"),
            _json_or_null(p.get("tags")),
            _json_or_null(p.get("meta")),
        ],
    )
    if p["type"] == "document":
        conn.execute(
            "INSERT INTO documents(ns, source, drawer, doc_id, content_hash, version)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (ns, source) DO UPDATE SET"
            " drawer = excluded.drawer, doc_id = excluded.doc_id,"
            " content_hash = excluded.content_hash, version = excluded.version",
            [
                p["ns"],
                p.get("origin", ""),
                p["drawer"],
                p["id"],
                p.get("content_hash", ""),
                int(p.get("version", 1)),
            ],
        )
    if vec is None:
        return
    own, context = words(card_of(p)), words(context_of(p))
    # FTS5's |D| counts every column: the SQLite card's scope column holds two tokens
    # (namespace and drawer), so the same lengths keep BM25 on the same scale.
    length = len(own) + len(context) + SCOPE_TOKENS
    if isinstance(stems, PorterStems):
        conn.execute(
            "INSERT INTO cards(rowid, ns, tsv, len) VALUES (%s, %s, %s::tsvector, %s)",
            [rowid, p["ns"], tsvector(stems.terms(own), stems.terms(context)), length],
        )
    else:  # an index built with PostgreSQL's Snowball lexemes (lexical.Stems)
        conn.execute(
            "INSERT INTO cards(rowid, ns, tsv, len) VALUES (%s, %s,"
            " setweight(to_tsvector('kredenc', %s), 'A')"
            " || setweight(to_tsvector('kredenc', %s), 'B'), %s)",
            [rowid, p["ns"], " ".join(own), " ".join(context), length],
        )
    counts.cards += 1
    counts.tokens += length
    counts.new_cards.add(rowid)
    conn.execute(
        "INSERT INTO vectors(rowid, ns, shard, vec) VALUES (%s, %s, %s, %s)",
        [rowid, p["ns"], shard_key(p["ns"], p["drawer"]), vec],
    )
    counts.vector(p["ns"], 1)


def _json_or_null(value: Any) -> str | None:
    """``tags`` or ``meta`` as JSON text for a ``jsonb`` column; NULL when empty (as the
    SQLite projector keeps them)."""
    if not value:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tombstone(conn: psycopg.Connection, rid: str, ns: str, counts: Counts) -> str | None:
    """Mark the record deleted; its type (None when there is no such record)."""
    row = conn.execute(
        "UPDATE records SET deleted = true WHERE id = %s AND ns = %s RETURNING rowid, type",
        [rid, ns],
    ).fetchone()
    if row is None:
        return None
    rowid = int(row[0])
    card = conn.execute(
        "DELETE FROM cards WHERE rowid = %s RETURNING len, tsvector_to_array(tsv)", [rowid]
    ).fetchone()
    if card is not None:
        counts.cards -= 1
        counts.tokens -= int(card[0])
        if rowid in counts.new_cards:  # put in this transaction: never counted
            counts.new_cards.discard(rowid)
        else:
            counts.gone.update(card[1])
    if conn.execute("DELETE FROM vectors WHERE rowid = %s RETURNING 1", [rowid]).fetchone():
        counts.vector(ns, -1)
    conn.execute("DELETE FROM edges WHERE src = %s OR dst = %s", [rid, rid])
    return str(row[1])


def count_terms(conn: psycopg.Connection, counts: Counts) -> None:
    """Add the lexemes of the cards this transaction put to ``terms`` and take away
    those of the cards it dropped, in one statement at its end, in lexeme order (so two
    applies lock the rows they share in the same order). A lexeme no card holds any
    more leaves the table."""
    if not counts.new_cards and not counts.gone:
        return
    gone = sorted(counts.gone.items())
    conn.execute(
        "INSERT INTO terms(lexeme, cards) SELECT lexeme, sum(n)::bigint FROM ("
        " SELECT u.lexeme, count(*) AS n FROM cards c CROSS JOIN LATERAL unnest(c.tsv) AS u"
        " WHERE c.rowid = ANY(%s::bigint[]) GROUP BY u.lexeme"
        " UNION ALL SELECT g.lexeme, -g.n FROM unnest(%s::text[], %s::bigint[]) AS g(lexeme, n)"
        ") d GROUP BY lexeme ORDER BY lexeme"
        " ON CONFLICT (lexeme) DO UPDATE SET cards = terms.cards + excluded.cards",
        [sorted(counts.new_cards), [t for t, _ in gone], [n for _, n in gone]],
    )
    if gone:
        conn.execute(
            "DELETE FROM terms WHERE lexeme = ANY(%s::text[]) AND cards <= 0",
            [[t for t, _ in gone]],
        )
