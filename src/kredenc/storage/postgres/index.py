"""The derived index in PostgreSQL: the :class:`~kredenc.storage.base.Index` of a store
whose ``backend`` is ``postgres``.

Tables and walls: ``schema.py``; the projector: ``project.py``; the lexical leg (BM25
in SQL): ``lexical.py``; the reads of records, edges and counts: ``reads.py``.

The dense leg asks pgvector: exact inner product while a namespace holds fewer than
``ann.threshold`` vectors (where the SQLite index switches to its HNSW graph), the
HNSW index from there; the nearest vectors are checked against the filters, deeper
until ``k`` pass, and a search narrowed by scope ids, tags or meta (or one that would
fetch past ``DEEPEST_FETCH``) ranks exactly among the records that pass. The vectors
fetched are scored again in numpy as the SQLite index scores them (the same floats on
both backends), then sorted by score, then rowid.

Every read is one short transaction on a pooled connection that first sets
``kredenc.ns`` (row-level security) and binds the namespace in its SQL too. ``apply``
is one transaction (all of a batch or none of it) under ``kredenc.all``.

A rebuild does not empty the tables that other processes are searching: it fills a new
index in a staging schema (``PostgresIndex(..., staging=True)``, see
:func:`staging_schema`) while the old one keeps answering, then :meth:`PostgresIndex.swap_in`
moves the new tables into the store's schema in one transaction. A search in another
process waits for that transaction (milliseconds) and then reads the new tables; none
sees a missing table or a half-filled index.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from kredenc.errors import KredencError, StoreError
from kredenc.storage.index import projector
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import MAX_SCORED, Phrase
from kredenc.storage.index.projector import EmbedFn
from kredenc.storage.index.reads import (
    MEMORY_ROW_COLUMNS,
)
from kredenc.storage.index.schema import CACHE_SCHEMA, shard_key
from kredenc.storage.index.vectors import F32, AnnParams
from kredenc.storage.postgres import lexical, migrate, project, schema
from kredenc.storage.postgres.filters import record_conditions
from kredenc.storage.postgres.reads import ALL, IndexReads

log = logging.getLogger(__name__)

#: Past this many nearest vectors fetched, a filtered ANN search ranks exactly among
#: the records that pass instead (the scoping branch's rule for the SQLite index).
DEEPEST_FETCH = 2560
#: Nearest vectors fetched past those wanted and scored again here (``_rescored``), so
#: a near-tie at the cut falls as on SQLite.
RESCORE_MARGIN = 16
_CACHE_BATCH = 2000  # vectors per transaction when a file cache is copied in
#: Cards from which the housekeeper refreshes the planner's statistics (compaction_due).
ANALYZE_MIN = 500


def _rescored(rows: Sequence[Any], query: F32, k: int) -> list[tuple[int, float]]:
    """(rowid, vector) rows scored as the SQLite index scores them (``VectorShard``'s
    float32 ``einsum``, row by row), best first, ties by rowid, at most ``k``.

    pgvector sums the products in another order, so scores equal in exact arithmetic
    (two texts with the same words, a hash embedder's vectors) can differ in their
    last bit there and be cut or ordered apart from SQLite's; scoring the fetched rows
    here gives both backends the same floats and the same tie-break by rowid."""
    if not rows:
        return []
    ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
    # pgvector >= 0.4 hands back its Vector type, older versions numpy arrays.
    matrix = np.stack(
        [
            np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)
            for _, v in rows
        ]
    )
    scores = np.einsum("ij,j->i", matrix, query)
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


def _error(exc: psycopg.Error, schema_name: str) -> KredencError:
    return migrate.explain(exc, schema_name, what="index")


# How long the swap of a rebuilt index waits for a table lock before it lets go and
# tries again (PostgreSQL's deadlock check starts after 1 s by default).
_SWAP_LOCK_WAIT_MS = 100


def staging_schema(schema_name: str) -> str:
    """The schema a rebuild of ``schema_name`` fills before the swap (at most 63
    characters; a hash of the whole name keeps two long names apart)."""
    digest = hashlib.sha1(schema_name.encode()).hexdigest()[:8]
    return f"{schema_name[:51]}__rb{digest}"


class PostgresIndex(IndexReads):
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
        staging: bool = False,
    ) -> None:
        """With ``staging``, an empty index in :func:`staging_schema` (a leftover of a
        rebuild that died is dropped first), to fill and then :meth:`swap_in`; the
        embedding cache is still the store's."""
        self.schema = migrate.check_schema(schema_name)
        self.dim = dim
        self.model_id = model_id
        self.ann = ann or AnnParams()
        self.read_only = read_only
        path: str = self.schema
        also: tuple[str, ...] = ()
        if staging:
            path, also = staging_schema(self.schema), (self.schema,)
            self.drop_schema(dsn, path)
            steps = [s for s in schema.steps(dim) if s.name.startswith(schema.INDEX_PREFIX)]
            migrate.migrate(dsn, path, steps, also=also)
        elif not read_only:
            migrate.migrate(dsn, self.schema, schema.steps(dim))
        self._pool = migrate.pool(
            dsn, path, max_size=pool_size, configure=register_vector, also=also
        )
        self._closed = False
        try:
            self._stems = self._lexemes()
            self._terms = self._has_terms()
            self._warn_if_unbound()
        except BaseException:
            self.close()
            raise

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

    @staticmethod
    def swap_in(dsn: str, schema_name: str, *, patience: float = 60.0) -> None:
        """Replace the store's index tables by the ones a staging index filled, in one
        transaction (searches elsewhere wait for it, then read the new tables), and
        drop the staging schema.

        The transaction first locks every index table at once. A search holds one
        table while it reads another, so waiting for a lock could deadlock with it;
        the lock wait is cut at ``_SWAP_LOCK_WAIT_MS`` (well before PostgreSQL's deadlock
        check, which would pick a victim, perhaps the search) and the swap tries again,
        for up to ``patience`` seconds."""
        build = staging_schema(schema_name)
        deadline = time.monotonic() + patience
        with migrate.connect(dsn, schema_name) as conn:
            for attempt in itertools.count():
                try:
                    with conn.transaction():
                        PostgresIndex._swap(conn, schema_name, build)
                    return
                except psycopg.errors.LockNotAvailable:
                    if time.monotonic() > deadline:
                        raise StoreError(
                            f"the rebuilt index of schema {schema_name} could not be swapped"
                            f" in: its tables stayed busy for {patience:.0f} s",
                            "run 'kredenc rebuild' again when fewer searches run",
                        ) from None
                    time.sleep(min(0.02 * 2**attempt, 0.5))

    @staticmethod
    def _swap(conn: psycopg.Connection, schema_name: str, build: str) -> None:
        conn.execute(f"SET LOCAL lock_timeout = '{_SWAP_LOCK_WAIT_MS}ms'")
        held = [
            t
            for t in schema.INDEX_TABLES
            if conn.execute("SELECT to_regclass(%s)", [t]).fetchone() != (None,)
        ]
        if held:
            conn.execute(
                sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                    sql.SQL(", ").join(sql.Identifier(t) for t in held)
                )
            )
        for table in held:
            conn.execute(sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(table)))
        for table in schema.INDEX_TABLES:
            conn.execute(
                sql.SQL("ALTER TABLE {}.{} SET SCHEMA {}").format(
                    sql.Identifier(build), sql.Identifier(table), sql.Identifier(schema_name)
                )
            )
        migrate.forget_steps(conn, schema.INDEX_PREFIX)
        conn.execute(
            sql.SQL(
                "INSERT INTO migrations(name, applied_at) SELECT name, applied_at"
                " FROM {}.migrations WHERE starts_with(name, %s)"
            ).format(sql.Identifier(build)),
            [schema.INDEX_PREFIX],
        )
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(build)))

    @staticmethod
    def drop_schema(dsn: str, schema_name: str) -> None:
        """Drop the whole schema (log, index and embedding cache): a throwaway store's
        end (``kredenc eval`` makes one per configuration)."""
        with migrate.connect(dsn, schema_name, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(migrate.check_schema(schema_name))
                )
            )

    # -- connections --------------------------------------------------------------
    @contextmanager
    def _tx(self, ns: str) -> Iterator[psycopg.Connection]:
        """A transaction that sees namespace ``ns`` only (``ALL``: every namespace)."""
        try:
            with self._pool.connection() as conn:
                if ns == ALL:
                    conn.execute("SELECT set_config('kredenc.all', 'on', true)")
                else:
                    conn.execute(
                        "SELECT set_config('kredenc.ns', %s, true),"
                        " set_config('kredenc.all', 'off', true)",
                        [ns],
                    )
                yield conn
        except psycopg.Error as exc:
            raise _error(exc, self.schema) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()

    def _lexemes(self) -> lexical.Stems:
        """FTS5's Porter lexemes (``lexical.PorterStems``) for an index that has them,
        or has no cards yet (it is marked so then); PostgreSQL's Snowball lexemes for
        one built before them, until ``kredenc rebuild`` (a WARNING says so)."""
        with self._tx(ALL) as conn:
            if not self.read_only:
                conn.execute(
                    "INSERT INTO meta(key, value) SELECT 'lexemes', 'porter'"
                    " WHERE NOT EXISTS (SELECT FROM cards) ON CONFLICT (key) DO NOTHING"
                )
            row = conn.execute("SELECT value FROM meta WHERE key = 'lexemes'").fetchone()
            empty = conn.execute("SELECT NOT EXISTS (SELECT FROM cards)").fetchone()
        if (row is not None and row[0] == "porter") or (empty is not None and empty[0]):
            return lexical.PorterStems()
        log.warning(
            "the PostgreSQL index of schema %s has Snowball lexemes (built before FTS5's"
            " Porter ones): its lexical leg ranks a few words unlike SQLite's; run"
            " 'kredenc rebuild' to index it again",
            self.schema,
        )
        return lexical.Stems()

    def _warn_if_unbound(self) -> None:
        """Say so when the role bypasses row-level security (a superuser, or BYPASSRLS):
        namespaces are then kept apart by kredenc's own filters alone."""
        with self._tx(ALL) as conn:
            row = conn.execute(
                "SELECT current_user, rolsuper OR rolbypassrls FROM pg_roles"
                " WHERE rolname = current_user"
            ).fetchone()
        if row is not None and row[1]:
            log.warning(
                "PostgreSQL role %s is a superuser or has BYPASSRLS: row-level security "
                "does not bind it, so namespaces are kept apart by kredenc's own filters "
                "alone; connect as a role without them (docs/postgres.md)",
                row[0],
            )

    def _has_terms(self) -> bool:
        """Whether the index has its ``terms`` table (a read-only handle on an index
        made before the ``index/003 terms`` step has not: it corrects no spelling, and
        says so once)."""
        with self._tx(ALL) as conn:
            row = conn.execute("SELECT to_regclass('terms') IS NOT NULL").fetchone()
        if row is not None and row[0]:
            return True
        log.warning(
            "the PostgreSQL index of schema %s predates its term counts: this read-only"
            " handle corrects no misspelt words; open the store once writable (or run"
            " 'kredenc rebuild') to add them",
            self.schema,
        )
        return False

    # -- the position --------------------------------------------------------------
    def applied(self) -> tuple[int, int]:
        with self._tx(ALL) as conn:
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
        with self._tx(ALL) as conn:
            counts = project.Counts(project.reserve_rowids(conn, puts))
            # Pipeline mode: statements stream without a round trip each (only those
            # whose answer is read, a tombstone's or a score's, wait for the server).
            with conn.pipeline():
                for offset, payload in entries:
                    project.note_history(conn, offset, payload)
                    scope = project.apply_one(
                        conn, offset, payload, vectors, self.dim, counts, self._stems
                    )
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
            project.count_terms(conn, counts)

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
        with self._tx(ALL) as conn:
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
        with self._tx(ALL) as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO embeddings(model, hash, vec) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                rows,
            )

    def import_file_cache(self, path: Path) -> int:
        """Copy this model's vectors from a file embedding cache (a SQLite store's
        ``embeddings.db``; ``storage/index/schema.CACHE_SCHEMA``) into this cache, so
        both backends get the same vectors and nothing is embedded twice; how many.
        A missing file copies nothing."""
        if not path.is_file():
            return 0
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT hash, vec FROM embeddings WHERE model = ?", (self.model_id,)
            ).fetchall()
        finally:
            conn.close()
        items = [(bytes(h), np.frombuffer(bytes(v), dtype=np.float32)) for h, v in rows]
        for start in range(0, len(items), _CACHE_BATCH):
            self.cache_vectors(dict(items[start : start + _CACHE_BATCH]))
        return len(items)

    def export_file_cache(self, path: Path) -> int:
        """Copy this model's vectors that a file embedding cache lacks into it (made
        when missing), the other way from :meth:`import_file_cache`; how many."""
        with self._tx(ALL) as conn:
            rows = conn.execute(
                "SELECT hash, vec FROM embeddings WHERE model = %s", [self.model_id]
            ).fetchall()
        path.parent.mkdir(parents=True, exist_ok=True)
        out = sqlite3.connect(path)
        try:
            with out:
                out.execute(CACHE_SCHEMA.replace("cache.embeddings", "embeddings"))
                before = out.total_changes
                out.executemany(
                    "INSERT OR IGNORE INTO embeddings(hash, model, vec) VALUES (?, ?, ?)",
                    [(bytes(h), self.model_id, bytes(v)) for h, v in rows],
                )
                return out.total_changes - before
        finally:
            out.close()

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
            raise _error(exc, self.schema) from None

    def corrections(self, ns: str, words: Sequence[str], filters: Filters) -> dict[str, str]:
        """Each of ``words`` that no card holds, mapped to the word one typo away that
        cards of ``ns`` passing ``filters`` hold (``lexical.corrections``); none on a
        read-only handle of an index without term counts (``_has_terms``)."""
        if not self._terms:
            return {}
        with self._tx(ns) as conn:
            return lexical.corrections(conn, self._stems, ns, words, filters)

    def load_terms(self) -> int:
        """Nothing to load: a lookup counts its candidates in the database
        (``lexical.corrections``)."""
        return 0

    def vectors_ready(self, wait: float = 0.0) -> bool:
        """Always: PostgreSQL searches its own vectors (nothing to load here)."""
        return True

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
                    "SELECT v.rowid, v.vec FROM vectors v JOIN records r"
                    " ON r.rowid = v.rowid WHERE v.ns = %s AND r.ns = %s"
                    + shard
                    + where
                    + " ORDER BY (v.vec <#> %s) + 0, v.rowid LIMIT %s",
                    [ns, ns, *shard_args, *args, q, k + RESCORE_MARGIN],
                ).fetchall()
                return _rescored(rows, q, k)

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
                fetched = conn.execute(
                    "SELECT v.rowid, v.vec FROM vectors v WHERE v.ns = %s"
                    + shard
                    + f" ORDER BY {order} LIMIT %s",
                    [ns, *shard_args, q, fetch + RESCORE_MARGIN],
                ).fetchall()
                found = _rescored(fetched, q, fetch)
                passed = {
                    int(r[0])
                    for r in conn.execute(
                        "SELECT r.rowid FROM records r WHERE r.rowid = ANY(%s::bigint[])"
                        " AND r.ns = %s" + where,
                        [[r for r, _ in found], ns, *args],
                    ).fetchall()
                }
                kept = [(r, sc) for r, sc in found if r in passed]
                if len(kept) >= k or len(fetched) < fetch + RESCORE_MARGIN or fetch >= total:
                    return kept[:k]
                fetch = min(max(total, 1), fetch * 4)

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
            raise _error(exc, self.schema) from None
        return time.perf_counter() - started

    def _counts(self, *keys: str) -> list[int]:
        with self._tx(ALL) as conn:
            rows = dict(
                conn.execute(
                    "SELECT key, value FROM meta WHERE key = ANY(%s::text[])", [list(keys)]
                ).fetchall()
            )
        return [int(rows.get(key, 0)) for key in keys]

    def shards(self) -> Mapping[str, Sized]:
        """The vectors per shard key (the HNSW graph lives in the database: nothing
        to load)."""
        with self._tx(ALL) as conn:
            rows = conn.execute("SELECT shard, count(*) FROM vectors GROUP BY shard").fetchall()
        return {str(key): range(int(n)) for key, n in rows}

    def save_ann(self) -> None:
        """Nothing to save: the HNSW index is part of the database."""


if TYPE_CHECKING:
    # The protocol holds (checked by mypy, never run).
    from kredenc.storage.base import Index

    _index: type[Index] = PostgresIndex
