"""The operation cache's cold tier on PostgreSQL: ``opcache_entries`` in the store's schema.

With ``backend = "postgres"`` the persistent tier under the in-process LRU (and under
Redis, when configured: ``storage/opcache_chain.py``) is this table instead of
``<store>/opcache.db``, so every process of the store, on any machine, shares it.
A :class:`~kredenc.storage.base.CacheTier` with the SQLite file tier's semantics:

- JSON text by (kind, key), stored as UTF-8 ``bytea`` (a ``text`` column refuses NUL);
  one upsert per put, one indexed read per get.
- ``clear`` (rebuild, purge) empties the table and bumps ``opcache_meta.epoch`` in one
  transaction. Every get reads the epoch in the same statement, so a process whose
  tier another process emptied notices on its next lookup, bumps its own
  :attr:`PostgresTier.epoch` and tells its listeners (its LRU drops what it holds), as
  a reader of ``opcache.db`` notices a replaced file.
- Bounded: past ``max_bytes`` of values the oldest entries go (checked every
  :data:`PRUNE_EVERY` puts), to three quarters of the bound.
- Derived data: a server that is down or refuses is a miss, one WARNING, then no
  call for :data:`RETRY_S` seconds; statements time out after
  :data:`STATEMENT_TIMEOUT_MS` (a cache that waits is slower than a miss).
- A read-only store's handle reads but never writes or empties the table.

Its tables are migration steps (``opcache/...``) applied when the tier first connects.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from kredenc.storage.outage import Outage
from kredenc.storage.postgres import migrate
from kredenc.storage.postgres.migrate import Step

log = logging.getLogger(__name__)

PRUNE_EVERY = 256
RETRY_S = 5.0
STATEMENT_TIMEOUT_MS = 2000
POOL_TIMEOUT_S = 2.0

STEPS = (
    Step(
        "opcache/001 entries",
        (
            "CREATE TABLE opcache_meta(one boolean PRIMARY KEY DEFAULT true CHECK (one),"
            " epoch bigint NOT NULL)",
            "INSERT INTO opcache_meta(epoch) VALUES (0)",
            "CREATE TABLE opcache_entries(kind text NOT NULL, key text NOT NULL,"
            " value bytea NOT NULL, size bigint NOT NULL,"
            " created timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (kind, key))",
            "CREATE INDEX opcache_entries_created ON opcache_entries(created)",
        ),
    ),
)

_GET = (
    "SELECT m.epoch, e.value FROM opcache_meta m"
    " LEFT JOIN opcache_entries e ON e.kind = %s AND e.key = %s"
)
_PUT = (
    "INSERT INTO opcache_entries(kind, key, value, size) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, size = excluded.size,"
    " created = excluded.created"
)
_PRUNE = (
    "DELETE FROM opcache_entries WHERE (kind, key) IN ("
    " SELECT kind, key FROM (SELECT kind, key,"
    "  sum(size) OVER (ORDER BY created DESC, kind, key) AS newer FROM opcache_entries) s"
    " WHERE newer > %s)"
)


class PostgresTier:
    """``opcache_entries`` in ``schema`` as a :class:`~kredenc.storage.base.CacheTier`
    (thread-safe: a small pool, opened on first use)."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        read_only: bool = False,
        max_bytes: int = 256 * 1024 * 1024,
        pool_size: int = 4,
    ) -> None:
        self.schema = migrate.check_schema(schema)
        self.read_only = read_only
        self.max_bytes = max_bytes
        self._dsn = dsn
        self._pool_size = pool_size
        self._pool: ConnectionPool | None = None
        self._lock = threading.Lock()
        self._epoch = 0
        self._seen: int | None = None  # the table's epoch this tier last saw
        self._puts = 0
        self._closed = False
        self._outage = Outage(
            f"PostgreSQL (schema {self.schema})",
            what="operation cache",
            then="its lookups miss",
            log=log,
            retry_s=RETRY_S,
        )
        self._listeners: list[Callable[[], None]] = []

    @property
    def epoch(self) -> int:
        return self._epoch

    # -- the protocol ---------------------------------------------------------
    def get(self, kind: str, key: str) -> str | None:
        row = self._run(lambda c: c.execute(_GET, (kind, key)).fetchone())
        if row is None:
            return None
        self._saw(int(row[0]))
        if row[1] is None:
            return None
        try:
            return bytes(row[1]).decode("utf-8")
        except UnicodeDecodeError:
            log.warning("an operation cache entry in %s is not UTF-8; a miss", self.schema)
            return None

    def put(self, kind: str, key: str, value: str) -> None:
        if self.read_only:
            return
        data = value.encode("utf-8")

        def upsert(conn: psycopg.Connection) -> bool:
            conn.execute(_PUT, (kind, key, data, len(data)))
            return True

        if self._run(upsert):
            with self._lock:
                self._puts += 1
                due = self._puts % PRUNE_EVERY == 0
            if due:
                self._run(self._prune)

    def clear(self) -> None:
        """Empty the table and bump its epoch (a writer; a reader only drops its LRU)."""

        def empty(conn: psycopg.Connection) -> int:
            conn.execute("TRUNCATE opcache_entries")
            row = conn.execute("UPDATE opcache_meta SET epoch = epoch + 1 RETURNING epoch")
            found = row.fetchone()
            return int(found[0]) if found is not None else 0

        if not self.read_only:
            epoch = self._run(empty)
            if epoch is not None:
                self._seen = epoch
        self._emptied()

    def listen(self, on_clear: Callable[[], None]) -> None:
        self._listeners.append(on_clear)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def stats(self) -> dict[str, int]:
        """Entries and value bytes held (zeros when the server does not answer)."""
        row = self._run(
            lambda c: c.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM opcache_entries"
            ).fetchone()
        )
        return {"entries": int(row[0]), "bytes": int(row[1])} if row else {"entries": 0, "bytes": 0}

    # -- inside -----------------------------------------------------------------
    def _saw(self, epoch: int) -> None:
        """The table's epoch as a lookup found it: another process emptied it since."""
        with self._lock:
            before, self._seen = self._seen, epoch
        if before is not None and before != epoch:
            self._emptied()

    def _emptied(self) -> None:
        self._epoch += 1
        for on_clear in self._listeners:
            on_clear()

    def _run(self, work: Callable[[psycopg.Connection], Any]) -> Any:
        """``work(conn)`` in one transaction, or None when the tier is closed, the
        server is in its quiet time after a failure, or the call fails."""
        pool = self._connected()
        if pool is None:
            return None
        try:
            with pool.connection(timeout=POOL_TIMEOUT_S) as conn:
                result = work(conn)
        except Exception as exc:  # noqa: BLE001 - psycopg and pool errors alike are a miss
            self._failed(exc)
            return None
        self._up()
        return result

    def _connected(self) -> ConnectionPool | None:
        with self._lock:
            if self._closed or not self._outage.usable():
                return None
            if self._pool is not None:
                return self._pool
        try:
            if not self.read_only:
                migrate.migrate(self._dsn, self.schema, STEPS)
            pool = migrate.pool(
                self._dsn, self.schema, max_size=self._pool_size, configure=_timeouts
            )
        except Exception as exc:  # noqa: BLE001 - StoreError or psycopg's: the tier is skipped
            self._failed(exc)
            return None
        with self._lock:
            if self._pool is None and not self._closed:
                self._pool = pool
                return pool
        pool.close()
        return self._pool

    def _failed(self, exc: BaseException) -> None:
        self._outage.failed(exc)

    def _up(self) -> None:
        self._outage.up()

    def _prune(self, conn: psycopg.Connection) -> None:
        row = conn.execute("SELECT coalesce(sum(size), 0) FROM opcache_entries").fetchone()
        if row is not None and int(row[0]) > self.max_bytes:
            conn.execute(_PRUNE, (self.max_bytes * 3 // 4,))


def _timeouts(conn: psycopg.Connection) -> None:
    conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
