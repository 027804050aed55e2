"""``kredenc check`` for a store whose log and index are in PostgreSQL: the log's id
against ``store.json``, every record's checksum, and the index's position against
the log. Read-only: the log and the index are opened without migrating or cutting.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from kredenc.config import Settings
from kredenc.errors import KredencError
from kredenc.storage.layout import StoreMeta
from kredenc.storage.postgres.index import PostgresIndex
from kredenc.storage.postgres.log import PostgresLog


def check_postgres(
    home: Path,
    meta: StoreMeta,
    settings: Settings,
    findings: list[str],
    faults: list[str],
    *,
    full: bool = False,
) -> None:
    """Append what the PostgreSQL log and index show to ``findings`` (and ``faults``).
    The index is checked by its position in the log; ``full`` says that it is not
    compared record by record here (the SQLite check does that)."""
    dsn, schema = settings.postgres_dsn.get_secret_value(), settings.postgres_schema
    where = f"PostgreSQL schema {schema}"
    try:
        log = PostgresLog(dsn, schema, durability=settings.durability, writable=False)
    except KredencError as exc:
        faults.append("log")
        findings.append(f"log: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        return
    try:
        if log.log_id.hex() != meta.log_id:
            faults.append("store.json")
            findings.append(
                f"store.json: log id {meta.log_id} is not the id of the log in {where} "
                f"({log.log_id.hex()}): the two belong to different stores"
            )
        sound, lines = log.check()
        findings.extend(f"log ({where}): {line}" for line in lines)
        if not sound:
            faults.append("log")
        last_seq = log.last_seq
    finally:
        log.close()
    try:
        index = PostgresIndex(dsn, schema, dim=meta.dim, model_id=meta.model_id, read_only=True)
    except KredencError as exc:
        faults.append("index")
        findings.append(f"index: {exc.message}")
        return
    try:
        applied_seq, _ = index.applied()
        findings.append(f"index ({where}): {index.live_count()} live records, seq {applied_seq}")
        if full:
            findings.append(
                "index: --full compares every record on SQLite stores only; on PostgreSQL "
                "the index is checked by its position in the log ('rebuild' makes it anew)"
            )
        if applied_seq > last_seq:
            faults.append("index")
            findings.append(
                f"index: ahead of the log (seq {applied_seq} > {last_seq}): run "
                f"'kredenc --store {shlex.quote(str(home))} rebuild'"
            )
        elif applied_seq < last_seq:
            findings.append(
                f"index: {last_seq - applied_seq} record(s) behind the log; the next open "
                "for writing applies them"
            )
    except KredencError as exc:
        faults.append("index")
        findings.append(f"index: {exc.message}")
    finally:
        index.close()
