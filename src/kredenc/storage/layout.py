"""A store directory: its layout, its self-description and its creation (opening it is
:class:`kredenc.storage.store.Store`).

Layout::

    <store>/store.json      format version, log id, embedding model id and dimension
    <store>/haystack.log    the append-only log (the truth)
    <store>/lock            flock'ed by the one writer
    <store>/index.db        the derived SQLite index (rebuildable)
    <store>/embeddings.db   embedding cache by text hash (survives rebuilds)
    <store>/ann/            persisted ANN graphs (derived)
    <store>/opcache.db      the operation cache's persistent tier (derived; dropped
                            with the index, and by a purge)
    <store>/kredenc.toml    optional settings
    <store>/reembed.new/    the index ``kredenc reembed`` builds for another model
                            (only while it runs, or left by one that was stopped)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kredenc.errors import FormatError, StoreError
from kredenc.storage.haystack import HEADER_SIZE, Haystack

STORE_FORMAT = 1
META_FILE = "store.json"
LOG_FILE = "haystack.log"
LOCK_FILE = "lock"
INDEX_FILE = "index.db"
ANN_DIR = "ann"
OPCACHE_FILE = "opcache.db"
#: Where ``kredenc reembed`` builds the new index before it switches (storage/reembed.py).
REEMBED_DIR = "reembed.new"


@dataclass(frozen=True)
class StoreMeta:
    format: int
    log_id: str
    model_id: str
    dim: int
    created_at: float
    #: Where the log lives when not in this folder (``"postgres"``) and its schema;
    #: None in a file store and in a store.json written before these were recorded.
    backend: str | None = None
    postgres_schema: str | None = None

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "format": self.format,
            "log_id": self.log_id,
            "model_id": self.model_id,
            "dim": self.dim,
            "created_at": self.created_at,
        }
        if self.backend is not None:  # never the DSN: it is a secret
            raw["backend"] = self.backend
            raw["postgres_schema"] = self.postgres_schema
        return raw


def check_directory(home: Path) -> None:
    if home.exists() and not home.is_dir():
        raise StoreError(
            f"store path {home} is a file, not a directory",
            "pass --store DIR (or KREDENC_HOME) naming a directory",
        )


def is_store(home: Path) -> bool:
    return (home / META_FILE).is_file()


def require_store(home: Path) -> None:
    """Refuse a ``home`` that holds no store (a read, or a write that changes records
    there, must not create an empty one under a mistyped path)."""
    if not is_store(home):
        raise missing_store(home)


def missing_store(home: Path) -> StoreError:
    """The error for a ``home`` without ``store.json``: a mistyped path (create one
    there, or check --store), or a store whose haystack outlived its ``store.json``
    (salvage its records into a new store; ``init`` refuses such a directory)."""
    where = shlex.quote(str(home))
    log_path = home / LOG_FILE
    if log_path.is_file() and log_path.stat().st_size > HEADER_SIZE:
        return StoreError(
            f"{home} has a haystack but no {META_FILE}",
            f"restore {META_FILE} from a backup, or copy the records into a new store"
            f" with 'kredenc --store {where} salvage NEW_DIR'",
        )
    return StoreError(
        f"no store at {home}",
        f"check --store, or create one there with 'kredenc --store {where} init'",
    )


def init_store(
    home: Path,
    model_id: str,
    dim: int,
    log_id: bytes | None = None,
    *,
    postgres_schema: str | None = None,
) -> StoreMeta:
    """Create a new store directory (or an empty existing one), private to its owner:
    folders 0700, files 0600 (whatever the umask). ``log_id``: the id of a log another
    backend keeps (PostgreSQL, in ``postgres_schema``, which store.json records);
    without one, an empty haystack file is created."""
    check_directory(home)
    if is_store(home):
        return read_meta(home)
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    if log_id is None:
        log_path = home / LOG_FILE
        if log_path.exists():
            if log_path.stat().st_size > HEADER_SIZE:
                raise missing_store(home)
            log_path.unlink()  # an init that crashed before store.json: nothing was filed
        log_id = Haystack.create(log_path)
    backend = "postgres" if postgres_schema is not None else None
    meta = StoreMeta(
        STORE_FORMAT, log_id.hex(), model_id, dim, time.time(), backend, postgres_schema
    )
    write_meta(home, meta.to_json())
    return meta


def write_meta(home: Path, raw: dict[str, Any]) -> None:
    """Write ``store.json`` (mode 0600) durably: a temporary file, then a rename."""
    tmp = home / f"{META_FILE}.{os.getpid()}.tmp"  # two processes creating one store
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(raw, indent=2) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, home / META_FILE)
    fd = os.open(home, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_meta(home: Path) -> StoreMeta:
    path = home / META_FILE
    try:
        raw = json.loads(path.read_text())
        meta = StoreMeta(
            int(raw["format"]),
            str(raw["log_id"]),
            str(raw["model_id"]),
            int(raw["dim"]),
            float(raw.get("created_at", 0.0)),
            str(raw["backend"]) if raw.get("backend") else None,
            str(raw["postgres_schema"]) if raw.get("postgres_schema") else None,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{path} is unreadable ({exc})", "restore it from a backup") from None
    if meta.format > STORE_FORMAT:
        raise FormatError(
            f"store format version {meta.format} is newer than this kredenc supports "
            f"({STORE_FORMAT})",
            "upgrade kredenc to open this store",
        )
    return meta


def check_backend(meta: StoreMeta, home: Path, backend: str) -> None:
    """Refuse to open a store whose store.json says its log is in PostgreSQL without
    the settings that reach it (the folder holds no log: a file backend would find
    none, and a new one would orphan the folder from its schema)."""
    if meta.backend == "postgres" and backend != "postgres":
        schema = meta.postgres_schema or "kredenc"
        raise StoreError(
            f"{home} is a PostgreSQL store (schema {schema}): its log is not in the folder",
            "set KREDENC_BACKEND=postgres and KREDENC_POSTGRES_DSN (or backend and "
            f"postgres_dsn in kredenc.toml), with postgres_schema {schema}",
        )


def check_model(meta: StoreMeta, model_id: str, dim: int) -> None:
    if meta.model_id != model_id or meta.dim != dim:
        raise FormatError(
            f"store was built with embedding model {meta.model_id} ({meta.dim}-d), "
            f"not {model_id} ({dim}-d)",
            "configure the store's model (embed_provider/embed_model/embed_model_path), "
            "move the store to this one with 'kredenc reembed', "
            "or ingest into a new store with this one",
        )


def drop_index(home: Path) -> None:
    """Delete the derived index (not the log, not the embedding cache) and the
    operation cache (its search entries point into the index)."""
    for name in (INDEX_FILE, INDEX_FILE + "-wal", INDEX_FILE + "-shm"):
        (home / name).unlink(missing_ok=True)
    shutil.rmtree(home / ANN_DIR, ignore_errors=True)
    drop_opcache(home)


def drop_opcache(home: Path) -> None:
    """Delete the operation cache's persistent tier (``opcache.db`` and its -wal/-shm)."""
    for name in (OPCACHE_FILE, OPCACHE_FILE + "-wal", OPCACHE_FILE + "-shm"):
        (home / name).unlink(missing_ok=True)
