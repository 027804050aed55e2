"""``kredenc check``: verify a store without changing it, and explain what was found."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from kredenc.errors import KredencError
from kredenc.storage import layout
from kredenc.storage.haystack import check_file


def verify_store(home: Path) -> dict[str, Any]:
    """Check the directory, store.json, the haystack and the index. Read-only."""
    findings: list[str] = []
    sound = True
    try:
        layout.check_directory(home)
        if not layout.is_store(home):
            return _report(False, [f"no store at {home} (run 'kredenc init')"])
        meta = layout.read_meta(home)
    except KredencError as exc:
        return _report(False, [exc.message])
    findings.append(f"store {home}: format {meta.format}, model {meta.model_id} ({meta.dim}-d)")
    log_ok, log_findings = check_file(home / layout.LOG_FILE)
    findings.extend(f"haystack: {line}" for line in log_findings)
    sound = sound and log_ok
    index_path = home / layout.INDEX_FILE
    if not index_path.exists():
        findings.append("index: missing (it is rebuilt from the log when the store opens)")
        return _report(sound, findings)
    try:
        conn = sqlite3.connect(f"file:{index_path}?mode=ro", uri=True)
        try:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
            rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            live = conn.execute("SELECT count(*) FROM records WHERE deleted=0").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        findings.append(f"index: unreadable ({exc}); run 'kredenc rebuild'")
        return _report(False, findings)
    if integrity != "ok":
        findings.append(
            f"index: SQLite integrity check failed ({integrity}); run 'kredenc rebuild'"
        )
        sound = False
    else:
        findings.append(f"index: {live} live records, applied up to seq {rows.get('applied_seq')}")
    return _report(sound, findings)


def _report(sound: bool, findings: list[str]) -> dict[str, Any]:
    findings.append("sound" if sound else "NOT sound")
    return {"sound": sound, "findings": findings}
