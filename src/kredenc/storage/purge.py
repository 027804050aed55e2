"""Purge: a new log generation without the text of forgotten records.

``forget`` appends a tombstone; the record's text stays in the log (and, until the
index is rebuilt, in index.db pages; its vector stays in the embedding cache). A
purge rewrites the log record by record, in the same order, with the same seqs and
batches (so the history of ids is kept):

- a ``put`` whose id was later tombstoned becomes ``{"op": "purged", "ns", "id",
  "type"}``: no text, title, tags, meta, source or context;
- any other record that names a forgotten id (a ``score`` on it, an ``edge`` to it)
  keeps only ids, relation names and numbers: free text such as a ``reason`` goes;
- every other record is copied byte for byte.

The swap, with the writer lock held and the log and index closed by the caller:

1. write ``haystack.log.new`` and fsync it;
2. delete the index (it points at the old generation's offsets);
3. ``rename(haystack.log.new, haystack.log)`` and fsync the directory;
4. drop the purged texts' vectors from the embedding cache (and, when the cache is
   the store's own, every vector no live record uses), then VACUUM it; delete the
   operation cache (``opcache.db``: hits, prompts and replies may quote the text);
5. delete the files set aside earlier (cut tails, bad index copies): they may hold
   forgotten text.

A crash before 3 leaves the old generation (a stale ``.new`` is discarded when a
writer next opens); a crash after 3 leaves the new one. Either way the index, if
missing, is rebuilt from the log when a writer opens the store.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kredenc.storage import layout
from kredenc.storage.haystack import (
    HEADER_SIZE,
    RECORD_HEADER,
    RECORD_HEADER_SIZE,
    encode_payload,
    frame,
    scan,
)
from kredenc.storage.index.cards import embed_text_of, text_hash
from kredenc.storage.index.schema import INDEXED_TYPES

NEW_SUFFIX = ".new"
PURGED_OP = "purged"
# What a record naming a forgotten id keeps: ids, relation names, numbers, times, the
# job that wrote it. A forgotten memory's history shows no more than this
# (memory.history), before a purge as after it.
KEPT_FIELDS = frozenset(
    {
        "seq", "txn", "op", "ns", "id", "src", "dst", "rel", "weight", "ts", "counts",
        "importance", "confidence", "stability", "status", "valid_from", "valid_to",
        "episode_id", "task_status", "decayed_at", "by",
    }
)  # fmt: skip
# Files set aside beside the store's files; a purge deletes them.
_ASIDE_MARKERS = (".cut-", ".bad-")

Step = Callable[[str], None]


@dataclass
class PurgeReport:
    forgotten: int = 0  # forgotten ids found (tombstones)
    purged: int = 0  # put records whose payload was removed
    stripped: int = 0  # other records reduced to ids
    bytes_before: int = 0
    bytes_after: int = 0
    cache_dropped: int = 0
    removed_files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "forgotten": self.forgotten,
            "purged": self.purged,
            "stripped": self.stripped,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "cache_dropped": self.cache_dropped,
            "removed_files": self.removed_files,
        }


def discard_stale_generation(home: Path) -> None:
    """Remove a ``haystack.log.new`` left by a purge that crashed before its swap."""
    (home / (layout.LOG_FILE + NEW_SUFFIX)).unlink(missing_ok=True)


def purge_store(home: Path, cache: Path, *, on_step: Step | None = None) -> PurgeReport:
    """Rewrite the log without forgotten payloads and swap it in (see the module doc).

    The caller holds the writer lock and has closed the log and the index.
    """
    step = on_step or (lambda _name: None)
    log_path = home / layout.LOG_FILE
    new_path = home / (layout.LOG_FILE + NEW_SUFFIX)
    discard_stale_generation(home)
    data = log_path.read_bytes()
    end = scan(data, log_path).end  # refuses damage; a writer already cut any torn tail
    records = list(_records(data, end))
    forgotten = {(p["ns"], p["id"]) for _, p in records if p.get("op") == "tombstone"}
    report = PurgeReport(forgotten=len(forgotten), bytes_before=len(data))
    purged_hashes: set[bytes] = set()
    live_hashes: set[bytes] = set()
    out = [data[:HEADER_SIZE]]
    for raw, p in records:
        ns = p.get("ns")
        names = {p.get("id"), p.get("src"), p.get("dst")} - {None}
        if p.get("op") == "put" and (ns, p.get("id")) in forgotten:
            if p.get("type") in INDEXED_TYPES:
                purged_hashes.add(text_hash(embed_text_of(p)))
            stub: dict[str, Any] = {k: p[k] for k in ("seq", "txn") if k in p}
            stub.update({"op": PURGED_OP, "ns": ns, "id": p["id"], "type": p.get("type")})
            out.append(frame(encode_payload(stub)))
            report.purged += 1
        elif p.get("op") != "put" and any((ns, n) in forgotten for n in names):
            kept = {k: v for k, v in p.items() if k in KEPT_FIELDS}
            if kept != p:
                report.stripped += 1
            out.append(frame(encode_payload(kept)))
        else:
            if p.get("op") == "put" and p.get("type") in INDEXED_TYPES:
                live_hashes.add(text_hash(embed_text_of(p)))
            out.append(raw)
    if report.purged or report.stripped:
        _write_new(new_path, b"".join(out))
        step("written")
        layout.drop_index(home)
        step("index dropped")
        os.replace(new_path, log_path)
        _fsync_dir(home)
        step("swapped")
    report.bytes_after = log_path.stat().st_size
    own_cache = cache.parent.resolve() == home.resolve()
    report.cache_dropped = _prune_cache(cache, purged_hashes - live_hashes, live_hashes, own_cache)
    layout.drop_opcache(home)  # searches, prompts and replies that may quote forgotten text
    step("cache pruned")
    for path in sorted(home.iterdir()):
        if any(m in path.name for m in _ASIDE_MARKERS) and path.is_file():
            path.unlink()
            report.removed_files.append(path.name)
    step("done")
    return report


def _records(data: bytes, end: int) -> list[tuple[bytes, dict[str, Any]]]:
    out: list[tuple[bytes, dict[str, Any]]] = []
    pos = HEADER_SIZE
    while pos < end:
        _magic, length, _crc = RECORD_HEADER.unpack_from(data, pos)
        nxt = pos + RECORD_HEADER_SIZE + length
        out.append((data[pos:nxt], json.loads(data[pos + RECORD_HEADER_SIZE : nxt])))
        pos = nxt
    return out


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def _prune_cache(path: Path, drop: set[bytes], live: set[bytes], own: bool) -> int:
    """Delete the purged texts' vectors (and, in the store's own cache, every vector
    no live record uses); VACUUM and truncate the write-ahead log."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete=ON")
        before = int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
        conn.execute("BEGIN IMMEDIATE")
        if own:
            conn.execute("CREATE TEMP TABLE keep(hash BLOB PRIMARY KEY) WITHOUT ROWID")
            conn.executemany("INSERT INTO keep VALUES (?)", [(h,) for h in live])
            conn.execute("DELETE FROM embeddings WHERE hash NOT IN (SELECT hash FROM keep)")
        else:
            conn.executemany("DELETE FROM embeddings WHERE hash=?", [(h,) for h in drop])
        conn.execute("COMMIT")
        after = int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return before - after


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
