"""Salvage: copy every verifiable record of a damaged store into a new one.

The source is only read. Its log is scanned with :func:`haystack.resync`, which finds
records before and after any damage (it resumes at the next frame whose magic,
checksum and JSON verify). The new store at DEST gets a fresh log holding those
records in their order, renumbered from seq 1, with their record ids kept. A batch
is copied whole or not at all: a batch missing any record or its commit is dropped
and reported. The embedding cache is copied when it is sound, so the index (built
when DEST is first opened for writing) re-embeds nothing.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kredenc.errors import InvalidInput, KredencError, StoreError
from kredenc.storage import layout
from kredenc.storage.haystack import RECORD_HEADER_SIZE, Frame, Haystack, read_header, resync

CACHE_FILE = "embeddings.db"


@dataclass
class SalvageReport:
    source: str
    dest: str
    records: int = 0  # records written to DEST (commit records not counted)
    lost_seqs: list[tuple[int, int]] = field(default_factory=list)  # source seq ranges
    damaged_bytes: list[tuple[int, int, str]] = field(default_factory=list)
    dropped_batches: list[tuple[int, int]] = field(default_factory=list)  # (txn, records)
    cache_copied: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dest": self.dest,
            "records": self.records,
            "lost_seqs": [list(r) for r in self.lost_seqs],
            "damaged_bytes": [
                {"start": s, "end": e, "reason": why} for s, e, why in self.damaged_bytes
            ],
            "dropped_batches": [{"txn": t, "records": n} for t, n in self.dropped_batches],
            "cache_copied": self.cache_copied,
            "notes": self.notes,
        }


def salvage(
    source: Path, dest: Path, *, model_id: str | None = None, dim: int | None = None
) -> SalvageReport:
    """Copy every verifiable record of the store at ``source`` into a new store at
    ``dest``. ``model_id``/``dim`` are used only when the source's store.json is
    unreadable. Nothing under ``source`` is changed."""
    source, dest = Path(source), Path(dest)
    log_path = source / layout.LOG_FILE
    if not log_path.is_file():
        if layout.is_store(source) and layout.read_meta(source).backend == "postgres":
            raise StoreError(
                f"{source}: salvage reads a store's {layout.LOG_FILE}, and this store's log "
                "is in PostgreSQL",
                "copy its records with 'kredenc export' (with the PostgreSQL settings), "
                "or back the schema up with PostgreSQL's own tools (pg_dump)",
            )
        raise StoreError(f"{log_path}: no haystack to salvage", "name the store to salvage")
    _check_dest(source, dest)
    report = SalvageReport(str(source), str(dest))
    try:
        meta = layout.read_meta(source)
        model_id, dim = meta.model_id, meta.dim
    except KredencError as exc:
        if model_id is None or dim is None:
            raise
        report.notes.append(f"{exc.message}; using the configured model {model_id}")
    assert model_id is not None and dim is not None
    data = log_path.read_bytes()
    try:
        read_header(data, log_path)
    except KredencError as exc:
        report.notes.append(f"{exc.message}; records were searched for anyway")
    frames, damage = resync(data)
    report.damaged_bytes = damage
    groups = _groups(data, frames, report)
    report.lost_seqs = _lost(frames, report.dropped_batches, groups)

    layout.init_store(dest, model_id, dim)
    hay = Haystack(dest / layout.LOG_FILE, durability="batch")
    try:
        for group in groups:
            payloads = [_payload(data, f) for f in group if f.op != "commit"]
            if payloads:
                hay.append(payloads, batch=group[-1].op == "commit", sync=False)
                report.records += len(payloads)
        hay.sync()
    finally:
        hay.close()
    report.cache_copied = _copy_cache(source / CACHE_FILE, dest / CACHE_FILE)
    return report


def _check_dest(source: Path, dest: Path) -> None:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InvalidInput(
            f"{dest} exists and is not an empty directory",
            "name a new directory for the salvaged store",
        )
    src, dst = source.resolve(), dest.resolve()
    if dst == src or src in dst.parents:
        raise InvalidInput(
            f"{dest} is inside the store being salvaged",
            "name a directory outside it, e.g. beside it",
        )


def _groups(data: bytes, frames: list[Frame], report: SalvageReport) -> list[list[Frame]]:
    """Single records as groups of one, complete batches (records + commit) whole.

    A batch is complete when its records carry seqs txn..commit-1 without a gap and
    its commit record (``txn`` = the batch's) follows; otherwise it is dropped.
    """
    out: list[list[Frame]] = []
    batch: list[Frame] = []

    def drop(frames_: list[Frame]) -> None:
        members = [f for f in frames_ if f.op != "commit"]
        if members:
            report.dropped_batches.append((members[0].txn or members[0].seq, len(members)))

    for f in frames:
        if f.op == "commit":
            complete = (
                bool(batch)
                and batch[0].seq == batch[0].txn
                and all(b.seq == batch[0].seq + i for i, b in enumerate(batch))
                and f.seq == batch[-1].seq + 1
                and _raw(data, f).get("txn") == batch[0].txn
            )
            if complete:
                out.append([*batch, f])
            else:
                drop(batch)
            batch = []
        elif f.txn is not None:
            if batch and batch[0].txn != f.txn:
                drop(batch)
                batch = []
            batch.append(f)
        else:
            if batch:
                drop(batch)
                batch = []
            out.append([f])
    if batch:
        drop(batch)
    return out


def _lost(
    frames: list[Frame], dropped: list[tuple[int, int]], groups: list[list[Frame]]
) -> list[tuple[int, int]]:
    """Source seq ranges not copied: gaps between verified records, dropped batches."""
    kept = sorted(f.seq for g in groups for f in g)
    seen = sorted({f.seq for f in frames})
    missing: set[int] = set()
    prev = 0
    for s in seen:
        missing.update(range(prev + 1, s))
        prev = max(prev, s)
    kept_set = set(kept)
    missing.update(s for s in seen if s not in kept_set)
    return _ranges(sorted(missing))


def _ranges(values: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _raw(data: bytes, f: Frame) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(data[f.offset + RECORD_HEADER_SIZE : f.end])
    return payload


def _payload(data: bytes, f: Frame) -> dict[str, Any]:
    payload = _raw(data, f)
    payload.pop("seq", None)
    payload.pop("txn", None)
    return payload


def _copy_cache(src: Path, dst: Path) -> bool:
    """Copy the embedding cache (its file and write-ahead log, byte for byte, so the
    source is never opened) and keep the copy when it passes ``quick_check``."""
    if not src.is_file():
        return False
    shutil.copyfile(src, dst)
    wal = src.with_name(src.name + "-wal")
    if wal.is_file():
        shutil.copyfile(wal, dst.with_name(dst.name + "-wal"))
    ok = False
    try:
        conn = sqlite3.connect(dst)
        try:
            ok = conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            if ok:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        ok = False
    if not ok:
        for suffix in ("", "-wal", "-shm"):
            dst.with_name(dst.name + suffix).unlink(missing_ok=True)
    return ok
