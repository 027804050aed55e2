"""``kredenc check``: verify a store without changing it, and explain what was found.

It checks, in order: the directory and ``store.json`` (its log id against the log's
header, its model and dimension against the configured embedder), the haystack (every
record), the index against the log (live records per namespace; a sample of records
by id and offset, every record with ``full``) and the embedding cache (it opens, has
its table, and a sample of live records has a vector of the right dimension, which
matches a fresh embedding when an embedder is given). Every finding that is a fault
names the file at fault and a command that fixes it. SQLite files are opened
``immutable`` (nothing is written, not even a lock), or ``mode=ro`` when the calling
process holds the store open (``live``: the server's ``/check``, which must read the
write-ahead logs of its own connections).
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kredenc.config import Settings
from kredenc.errors import KredencError
from kredenc.storage import layout
from kredenc.storage.haystack import (
    RECORD_HEADER_SIZE,
    check_file,
    missing_log_hint,
    read_header,
    resync,
    salvage_hint,
    scan,
)
from kredenc.storage.index.cards import embed_text_of, text_hash
from kredenc.storage.index.schema import INDEXED_TYPES
from kredenc.storage.repair import CACHE_TABLES, INDEX_TABLES, connect_readonly, sqlite_problem

SAMPLE = 50
EMBED_SAMPLE = 4

EmbedFn = Callable[[Sequence[str]], Any]


def verify_store(
    home: Path,
    *,
    model_id: str | None = None,
    dim: int | None = None,
    cache: Path | None = None,
    full: bool = False,
    embed: EmbedFn | None = None,
    live: bool = False,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Check the directory, store.json, the haystack, the index and the cache. Read-only.
    ``live``: the store is held open by this process (its SQLite write-ahead logs are
    read too; see ``repair.connect_readonly``). With ``settings`` naming the PostgreSQL
    backend, its log and index are checked instead of the files
    (``storage/postgres/verify.py``)."""
    findings: list[str] = []
    faults: list[str] = []
    rebuild = f"run 'kredenc --store {shlex.quote(str(home))} rebuild'"
    fresh = f"run 'kredenc --store {shlex.quote(str(home))} rebuild --fresh-cache'"
    try:
        layout.check_directory(home)
        if not layout.is_store(home):
            missing = layout.missing_store(home)
            return _report([f"{missing.message} ({missing.hint})"], ["dir"])
        meta = layout.read_meta(home)
    except KredencError as exc:
        return _report([f"{exc.message} ({exc.hint})" if exc.hint else exc.message], ["meta"])
    findings.append(f"store {home}: format {meta.format}, model {meta.model_id} ({meta.dim}-d)")
    if model_id is not None and (
        meta.model_id != model_id or (dim is not None and meta.dim != dim)
    ):
        faults.append("store.json")
        findings.append(
            f"store.json: model {meta.model_id} ({meta.dim}-d) is not the configured "
            f"{model_id} ({dim}-d) (configure embed_provider/embed_model to the store's model)"
        )
    if settings is not None and settings.backend == "postgres":
        try:
            from kredenc.storage.postgres.verify import check_postgres
        except ImportError:
            findings.append("backend = 'postgres' needs pip install 'kredenc[postgres]'")
            return _report(findings, ["log"])
        check_postgres(home, meta, settings, findings, faults, full=full)
        return _report(findings, faults)
    log_path = home / layout.LOG_FILE
    if not log_path.is_file():
        faults.append("haystack.log")
        findings.append(f"haystack: {log_path} is missing ({missing_log_hint(log_path)})")
        return _report(findings, faults)
    data = log_path.read_bytes()
    try:
        log_id = read_header(data, log_path).hex()
    except KredencError as exc:
        log_id = None
        findings.append(f"haystack: {exc.message}")
    if log_id is not None and log_id != meta.log_id:
        faults.append("store.json")
        findings.append(
            f"store.json: log id {meta.log_id} is not the id of {log_path.name} ({log_id}): "
            "the two belong to different stores (restore the matching store.json from a backup)"
        )
    log_ok, log_findings = check_file(log_path)
    findings.extend(f"haystack: {line}" for line in log_findings)
    if not log_ok:
        faults.append("haystack.log")
        findings.append(f"haystack: {salvage_hint(home)}")
    records, opened = _live_puts(data), live
    _check_index(home, records, full, findings, faults, rebuild, log_ok, opened)
    _check_cache(
        cache or home / "embeddings.db", meta, records, embed, findings, faults, fresh, opened
    )
    return _report(findings, faults)


def _live_puts(data: bytes) -> dict[str, tuple[str, int, dict[str, Any]]]:
    """Every put record of the log not tombstoned: id -> (namespace, offset, payload).

    Read with ``resync`` so a damaged log still yields what is readable.
    """
    frames, _ = resync(data)
    live: dict[str, tuple[str, int, dict[str, Any]]] = {}
    for f in frames:
        if f.op not in ("put", "tombstone"):
            continue
        payload = json.loads(data[f.offset + RECORD_HEADER_SIZE : f.end])
        if f.op == "put":
            live[str(payload["id"])] = (str(payload.get("ns", "")), f.offset, payload)
        else:
            live.pop(str(payload.get("id")), None)
    return live


def _check_index(
    home: Path,
    live: dict[str, tuple[str, int, dict[str, Any]]],
    full: bool,
    findings: list[str],
    faults: list[str],
    rebuild: str,
    log_ok: bool,
    opened: bool,
) -> None:
    path = home / layout.INDEX_FILE
    if not path.exists():
        findings.append("index: missing (it is built from the log when the store is opened)")
        return
    problem = sqlite_problem(path, INDEX_TABLES, live=opened)
    if problem is not None:
        faults.append("index.db")
        findings.append(f"index: {path.name} {problem} ({rebuild})")
        return
    conn = connect_readonly(path, live=opened)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        counts = dict(
            conn.execute("SELECT ns, count(*) FROM records WHERE deleted=0 GROUP BY ns").fetchall()
        )
        ids = sorted(live)
        sample = ids if full else ids[:: max(1, len(ids) // SAMPLE)][:SAMPLE]
        rows = {}
        for rid in sample:
            row = conn.execute("SELECT offset, deleted FROM records WHERE id=?", (rid,)).fetchone()
            rows[rid] = row
    except sqlite3.DatabaseError as exc:
        faults.append("index.db")
        findings.append(f"index: {path.name} cannot be read ({exc}) ({rebuild})")
        return
    finally:
        conn.close()
    applied = int(meta.get("applied_seq", 0))
    total = sum(counts.values())
    findings.append(f"index: {total} live records, applied up to seq {applied}")
    if not log_ok:
        return  # a damaged log: the comparison would only repeat the log's finding
    expected: dict[str, int] = {}
    for ns, _, _ in live.values():
        expected[ns] = expected.get(ns, 0) + 1
    last_seq = _last_seq(home)
    if applied < last_seq:
        findings.append(
            f"index: behind the log (seq {applied} < {last_seq}); it catches up when the "
            "store is next opened for writing"
        )
        return
    bad: list[str] = []
    for ns in sorted(set(expected) | set(counts)):
        if expected.get(ns, 0) != counts.get(ns, 0):
            bad.append(
                f"namespace {ns!r}: {counts.get(ns, 0)} live records, the log has "
                f"{expected.get(ns, 0)}"
            )
    for rid, row in rows.items():
        if row is None:
            bad.append(f"record {rid} is in the log but not in the index")
        elif int(row[0]) != live[rid][1] or int(row[1]):
            bad.append(f"record {rid}: the index's offset or state does not match the log")
    if bad:
        faults.append("index.db")
        findings.extend(f"index: {line}" for line in bad[:20])
        findings.append(f"index: does not match the log ({rebuild})")
    else:
        what = "every record" if full else f"{len(rows)} sampled records"
        findings.append(f"index: matches the log (counts per namespace, {what})")


def _last_seq(home: Path) -> int:
    path = home / layout.LOG_FILE
    return scan(path.read_bytes(), path).last_seq


def _check_cache(
    path: Path,
    meta: layout.StoreMeta,
    live: dict[str, tuple[str, int, dict[str, Any]]],
    embed: EmbedFn | None,
    findings: list[str],
    faults: list[str],
    rebuild: str,
    opened: bool,
) -> None:
    if not path.exists():
        findings.append("embedding cache: missing (vectors are embedded again when needed)")
        return
    problem = sqlite_problem(path, CACHE_TABLES, live=opened)
    if problem is not None:
        faults.append(path.name)
        findings.append(f"embedding cache: {path.name} {problem} ({rebuild})")
        return
    indexed = [p for _, _, p in live.values() if p.get("type") in INDEXED_TYPES]
    step = max(1, len(indexed) // SAMPLE)
    sample = indexed[::step][:SAMPLE]
    conn = connect_readonly(path, live=opened)
    bad: list[str] = []
    checked = 0
    try:
        total = conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        for i, payload in enumerate(sample):
            text = embed_text_of(payload)
            row = conn.execute(
                "SELECT vec FROM embeddings WHERE model=? AND hash=?",
                (meta.model_id, text_hash(text)),
            ).fetchone()
            if row is None:
                continue  # not cached (e.g. cleared): embedded again when needed
            checked += 1
            if len(row[0]) != 4 * meta.dim:
                bad.append(f"the vector of {payload['id']} has {len(row[0]) // 4} dimensions")
                continue
            if embed is not None and i < EMBED_SAMPLE:
                fresh = np.asarray(embed([text]), dtype=np.float32).reshape(-1)
                cached = np.frombuffer(row[0], dtype=np.float32)
                if fresh.shape == cached.shape and float(fresh @ cached) < 0.99:
                    bad.append(f"the cached vector of {payload['id']} is not its text's")
    except sqlite3.DatabaseError as exc:
        bad.append(f"cannot be read ({exc})")
    finally:
        conn.close()
    if bad:
        faults.append(path.name)
        findings.extend(f"embedding cache: {line}" for line in bad[:20])
        findings.append(f"embedding cache: {path.name} is not sound ({rebuild})")
    else:
        findings.append(f"embedding cache: {total} vectors, {checked} sampled records sound")


def _report(findings: list[str], faults: list[str]) -> dict[str, Any]:
    sound = not faults
    if faults:
        findings.append(f"at fault: {', '.join(dict.fromkeys(faults))}")
    findings.append("sound" if sound else "NOT sound")
    return {"sound": sound, "findings": findings, "faults": list(dict.fromkeys(faults))}
