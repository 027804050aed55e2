"""The operation cache's persistent tier: JSON text by (kind, key) in ``<store>/opcache.db``.

The tier under the in-process LRU of :class:`kredenc.loop.cache.OpCache` (a
:class:`~kredenc.storage.base.CacheTier`). Like the index it is derived: losing it
costs only time, so nothing here raises into an ask.

- The file is created 0600 (``schema.private_file``), in WAL mode with
  ``synchronous=NORMAL`` (no fsync per entry) and a short busy timeout: a cache that
  waits for a lock is slower than a miss.
- A file that is not SQLite, fails a read, or holds another format is set aside as
  ``opcache.db.bad-<time>`` (a purge deletes such copies) and recreated empty; the
  call that found it misses.
- A read-only store (a reader process beside the writer) opens an existing file for
  reading only: it creates nothing and stores nothing (its puts stay in its LRU). It
  notices when the writer replaced the file (a rebuild or purge) by its inode.
- Bounded: past ``max_bytes`` of values the oldest entries go (checked every
  :data:`PRUNE_EVERY` puts).
- :meth:`SqliteTier.clear` (rebuild, ``compact --purge``) deletes the file and bumps
  :attr:`SqliteTier.epoch`, so the LRU above drops what it holds as well.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kredenc.storage import layout, repair
from kredenc.storage.index.schema import private_file

log = logging.getLogger(__name__)

FORMAT = "1"
PRUNE_EVERY = 256
BUSY_TIMEOUT_MS = 200
TABLES = frozenset({"meta", "entries"})

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries(
  kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  size INTEGER NOT NULL, created REAL NOT NULL,
  PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_created ON entries(created);
"""


class SqliteTier:
    """``opcache.db`` as a :class:`~kredenc.storage.base.CacheTier` (thread-safe: one
    connection under a lock; an entry costs one indexed read or one write)."""

    def __init__(
        self, path: Path, *, read_only: bool = False, max_bytes: int = 256 * 1024 * 1024
    ) -> None:
        self.path = path
        self.read_only = read_only
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._inode: int | None = None
        self._epoch = 0
        self._puts = 0
        self._closed = False
        self._listeners: list[Callable[[], None]] = []

    @classmethod
    def for_store(cls, home: Path, *, read_only: bool, max_bytes: int) -> SqliteTier:
        return cls(home / layout.OPCACHE_FILE, read_only=read_only, max_bytes=max_bytes)

    @property
    def epoch(self) -> int:
        return self._epoch

    # -- the protocol ---------------------------------------------------------
    def get(self, kind: str, key: str) -> str | None:
        with self._lock:
            conn = self._connection()
            if conn is None:
                return None
            try:
                row = conn.execute(
                    "SELECT value FROM entries WHERE kind=? AND key=?", (kind, key)
                ).fetchone()
            except sqlite3.Error as exc:
                self._failed(exc)
                return None
        return None if row is None else str(row[0])

    def put(self, kind: str, key: str, value: str) -> None:
        if self.read_only:
            return
        with self._lock:
            conn = self._connection()
            if conn is None:
                return
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO entries(kind, key, value, size, created)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (kind, key, value, len(value), time.time()),
                )
                self._puts += 1
                if self._puts % PRUNE_EVERY == 0:
                    self._prune(conn)
            except sqlite3.Error as exc:
                self._failed(exc)

    def clear(self) -> None:
        """Close and delete the file (a writer; a reader only lets go of it)."""
        with self._lock:
            self._drop_connection()
            if not self.read_only:
                for suffix in ("", "-wal", "-shm"):
                    self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)

    def listen(self, on_clear: Callable[[], None]) -> None:
        self._listeners.append(on_clear)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def stats(self) -> dict[str, int]:
        """Entries and value bytes held (0 and 0 when there is no file)."""
        with self._lock:
            conn = self._connection()
            if conn is None:
                return {"entries": 0, "bytes": 0}
            try:
                n, size = conn.execute(
                    "SELECT count(*), coalesce(sum(size), 0) FROM entries"
                ).fetchone()
            except sqlite3.Error as exc:
                self._failed(exc)
                return {"entries": 0, "bytes": 0}
        return {"entries": int(n), "bytes": int(size)}

    # -- the connection (under the lock) -------------------------------------------
    def _connection(self) -> sqlite3.Connection | None:
        if self._closed:
            return None
        if self._conn is not None:
            if self.read_only and self._replaced():
                self._drop_connection()
            else:
                return self._conn
        if self.read_only and not self.path.exists():
            return None
        try:
            self._conn = self._open()
        except sqlite3.Error as exc:
            if self.read_only or not self.path.exists():
                log.warning("%s cannot be opened (%s); the cache tier is skipped", self.path, exc)
                return None
            self._set_aside(str(exc))
            try:
                self._conn = self._open()
            except sqlite3.Error as again:
                log.warning("%s cannot be created (%s); the cache tier is off", self.path, again)
                self._closed = True
                return None
        return self._conn

    def _open(self) -> sqlite3.Connection:
        if self.read_only:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        else:
            private_file(self.path)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if not self.read_only:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(SCHEMA)
                conn.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('format', ?)", (FORMAT,)
                )
            row = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
            if row is None or row[0] != FORMAT:
                raise sqlite3.DatabaseError(f"holds cache format {row and row[0]!r}, not {FORMAT}")
            self._inode = os.stat(self.path).st_ino
        except BaseException:
            conn.close()
            raise
        return conn

    def _replaced(self) -> bool:
        try:
            return os.stat(self.path).st_ino != self._inode
        except OSError:
            return True

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._emptied()

    def _emptied(self) -> None:
        self._epoch += 1
        for on_clear in self._listeners:
            on_clear()

    def _failed(self, exc: sqlite3.Error) -> None:
        """A failed statement: busy or locked is a miss; anything else sets the file aside."""
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            log.debug("%s is busy (%s): a miss", self.path, exc)
            return
        self._drop_connection()
        if self.read_only:
            log.warning("%s cannot be read (%s); it is reopened on the next call", self.path, exc)
        else:
            self._set_aside(str(exc))

    def _set_aside(self, problem: str) -> None:
        if not self.path.exists():
            return
        target = repair.set_aside(self.path)
        log.warning(
            "%s %s: set aside as %s; the operation cache starts empty",
            self.path.name,
            problem,
            target.name,
        )
        self._emptied()

    def _prune(self, conn: sqlite3.Connection) -> None:
        """Delete the oldest entries until the values fit in three quarters of the bound."""
        (total,) = conn.execute("SELECT coalesce(sum(size), 0) FROM entries").fetchone()
        if int(total) <= self.max_bytes:
            return
        excess = int(total) - self.max_bytes * 3 // 4
        doomed: list[tuple[str, str]] = []
        for kind, key, size in conn.execute("SELECT kind, key, size FROM entries ORDER BY created"):
            doomed.append((kind, key))
            excess -= int(size)
            if excess <= 0:
                break
        conn.executemany("DELETE FROM entries WHERE kind=? AND key=?", doomed)
