"""The derived SQLite files (index.db, embeddings.db): tell a bad one, set it aside.

Both files can be rebuilt (the index from the log; the cache by embedding again), so
a file that does not open, fails ``PRAGMA quick_check`` or lacks its tables is never
repaired in place: it is renamed to ``<name>.bad-<UTC time>`` (its ``-wal``/``-shm``
with it) and rebuilt. Nothing here touches the log.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

from kredenc.errors import StoreError
from kredenc.storage import layout
from kredenc.storage.haystack import Haystack, aside_path

log = logging.getLogger(__name__)

CACHE_FILE = "embeddings.db"
INDEX_TABLES = frozenset({"meta", "records", "cards", "vectors", "edges", "documents", "access"})
CACHE_TABLES = frozenset({"embeddings"})


def connect_readonly(path: Path, *, live: bool = False) -> sqlite3.Connection:
    """The SQLite file at ``path`` opened read-only: ``immutable`` (no lock, no -shm,
    nothing written) for a store no process holds; ``live``: ``mode=ro``, which also
    reads the write-ahead log of the process that holds it open (the server's check)."""
    mode = "mode=ro" if live else "immutable=1"
    return sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True)


def sqlite_problem(path: Path, tables: frozenset[str], *, live: bool = False) -> str | None:
    """Why the SQLite file at ``path`` is unusable, or None when it is sound (or absent).

    Opens it read-only (:func:`connect_readonly`), then ``quick_check`` and the
    expected tables.
    """
    if not path.exists():
        return None
    try:
        conn = connect_readonly(path, live=live)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"cannot be read as SQLite ({exc})"
    verdict = "; ".join(str(r[0]) for r in rows[:3])
    if verdict != "ok":
        return f"fails SQLite's quick_check ({verdict})"
    missing = sorted(tables - names)
    if missing:
        return f"lacks the tables {', '.join(missing)}"
    return None


def set_aside(path: Path) -> Path:
    """Rename ``path`` (and its -wal/-shm) to ``<name>.bad-<time>``; return the new name."""
    target = aside_path(path, "bad")
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target


def cache_path_of(home: Path, configured: Path | None) -> Path:
    return configured or home / CACHE_FILE


def set_aside_bad_files(
    home: Path, cache: Path, *, dim: int | None = None, fresh_cache: bool = False
) -> list[str]:
    """Before a rebuild: set aside index.db and the embedding cache when they are bad
    (the cache also when a vector has the wrong size for ``dim``, or always with
    ``fresh_cache``). Returns one line per file set aside (each also logged)."""
    done: list[str] = []
    for path, tables in ((home / layout.INDEX_FILE, INDEX_TABLES), (cache, CACHE_TABLES)):
        problem = sqlite_problem(path, tables)
        if path == cache and problem is None and path.exists():
            if fresh_cache:
                problem = "was asked to be embedded afresh"
            elif dim is not None:
                problem = _wrong_vectors(path, dim)
        if problem is None:
            continue
        target = set_aside(path)
        line = f"{path.name} {problem}: set aside as {target.name}; it is rebuilt"
        log.warning("%s", line)
        done.append(line)
    return done


def _wrong_vectors(path: Path, dim: int) -> str | None:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    try:
        (n,) = conn.execute(
            "SELECT count(*) FROM embeddings WHERE length(vec) != ?", (4 * dim,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        return f"cannot be read ({exc})"
    finally:
        conn.close()
    return f"holds {n} vectors that are not {dim}-d" if n else None


def blame(home: Path, cache: Path) -> StoreError | None:
    """The error naming the derived file at fault (after opening the index failed)."""
    for path, tables in ((home / layout.INDEX_FILE, INDEX_TABLES), (cache, CACHE_TABLES)):
        problem = sqlite_problem(path, tables)
        if problem is not None:
            return StoreError(
                f"{path} {problem}",
                f"run 'kredenc --store {home} rebuild': it sets the file aside and rebuilds it",
            )
    return None


def start_new_log(home: Path) -> Path:
    """For a store whose haystack.log is gone: an empty log, store.json pointing at it,
    and the old index (which points into the lost log) set aside. Returns the log."""
    log_path = home / layout.LOG_FILE
    if log_path.exists():
        raise StoreError(f"{log_path} exists", "--new-log is only for a store whose log is gone")
    meta = layout.read_meta(home)
    index = home / layout.INDEX_FILE
    if index.exists():
        set_aside(index)
    layout.drop_index(home)
    log_id = Haystack.create(log_path)
    raw = meta.to_json()
    raw["log_id"] = log_id.hex()
    raw["created_at"] = time.time()
    layout.write_meta(home, raw)
    return log_path
