"""The index's tables, its meta rows and its connections.

The schema version is stored in ``meta``; an index built by another version raises
:class:`~kredenc.errors.IndexOutdated` on open and is rebuilt from the log.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kredenc.errors import IndexOutdated, StoreError
from kredenc.storage.index import lexical

# 3: records.session (the session of a turn), for a session's history.
# 4: records.user_id, agent_id, run_id (indexed), tags and meta (JSON), for the
#    scope, tag and meta filters of every leg and listing.
# 5: history (the log records that touched each memory), for a memory's history.
SCHEMA_VERSION = 5
INDEXED_TYPES = frozenset({"memory", "chunk", "turn"})

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
  session TEXT,
  user_id TEXT,
  agent_id TEXT,
  run_id TEXT,
  tags TEXT,
  meta TEXT,
  deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS records_scope ON records(ns, drawer, deleted);
CREATE INDEX IF NOT EXISTS records_doc ON records(doc_id);
CREATE INDEX IF NOT EXISTS records_origin ON records(ns, origin);
CREATE INDEX IF NOT EXISTS records_session ON records(ns, session, seq) WHERE session IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_user ON records(ns, user_id, seq) WHERE user_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_agent ON records(ns, agent_id, seq) WHERE agent_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_run ON records(ns, run_id, seq) WHERE run_id IS NOT NULL;
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
CREATE TABLE IF NOT EXISTS history(
  ns TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, offset INTEGER NOT NULL,
  PRIMARY KEY (ns, id, seq)
) WITHOUT ROWID;
"""

CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache.embeddings(
  hash BLOB NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, hash)
) WITHOUT ROWID;
"""

# Fields a ``score``/``status`` record may change (the index keeps the current value).
SCORE_FIELDS = (
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
    *SCORE_FIELDS,
    "source",
    "doc_id",
    "read_only",
)


def shard_key(ns: str, drawer: str) -> str:
    return f"{ns}\x1f{drawer}"


def connect(path: Path, cache_path: Path) -> sqlite3.Connection:
    """A connection to the index with the embedding cache attached as ``cache``.

    Either file that does not exist yet is created empty, mode 0600, first (SQLite would
    create it 0644 less the umask); SQLite gives its ``-wal`` and ``-shm`` files the
    mode of their database. The cache's directory is made (0700) when it is missing (a
    configured ``embed_cache`` may be anywhere), and the cache comes first: a cache that
    cannot be made leaves no empty index behind to be blamed for it."""
    if not cache_path.parent.exists():
        try:
            cache_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"{cache_path}: its directory cannot be made ({exc.strerror})",
                "set embed_cache to a file in a directory you can write",
            ) from exc
    private_file(cache_path, "set embed_cache to a file in a directory you can write")
    private_file(path)
    try:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("ATTACH DATABASE ? AS cache", (str(cache_path),))
        # 8 KiB pages keep a 1.5 KiB vector row inside its page (4 KiB pages spill
        # it to an overflow page: 3x the file, two reads per lookup); takes effect
        # only when the cache file is created. An attached database starts at
        # synchronous=FULL (an fsync per commit); the cache is derived, like main.
        conn.execute("PRAGMA cache.page_size=8192")
        conn.execute("PRAGMA cache.journal_mode=WAL")
        conn.execute("PRAGMA cache.synchronous=NORMAL")
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path}: index cannot be opened ({exc})", "run 'kredenc rebuild'"
        ) from exc
    return conn


def private_file(path: Path, hint: str = "check the store directory") -> None:
    """Create ``path`` empty with mode 0600 unless it exists (a new SQLite file)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"{path}: cannot be created ({exc.strerror})", hint) from exc


def check_version(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse an index another schema built, before this schema's statements run on it
    (an index of an older schema may lack a column they name)."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if has_meta is None:
        return
    row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    if row is not None and int(row[0]) != SCHEMA_VERSION:
        raise IndexOutdated(
            f"{path}: index schema {row[0]} is not {SCHEMA_VERSION}",
            "run 'kredenc rebuild'",
        )


def init_meta(conn: sqlite3.Connection, path: Path) -> None:
    """Write the meta rows of a new index; refuse one built by another schema."""
    cur = conn.execute("SELECT value FROM meta WHERE key='schema'")
    row = cur.fetchone()
    if row is None:
        conn.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [("schema", str(SCHEMA_VERSION)), ("applied_seq", "0"), ("applied_end", "0")],
        )
    elif int(row[0]) != SCHEMA_VERSION:
        raise IndexOutdated(
            f"{path}: index schema {row[0]} is not {SCHEMA_VERSION}",
            "run 'kredenc rebuild'",
        )


def applied(conn: sqlite3.Connection) -> tuple[int, int]:
    """(last applied seq, log end offset after it)."""
    rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return int(rows["applied_seq"]), int(rows["applied_end"])


@contextmanager
def write_txn(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: committed whole, or rolled back whole on any exception
    (a half-applied batch never stays)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
