"""Tests of the storage layer: the haystack, recovery, the housekeeper and the lock.

The helpers here read logs independently of ``haystack.scan`` so that the tests do
not check the code with itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import google_crc32c

from kredenc.storage.haystack import HEADER_SIZE, RECORD_HEADER, RECORD_HEADER_SIZE, LogRecord


def parse_log(data: bytes, start: int = HEADER_SIZE) -> list[LogRecord]:
    """Every record (from ``start``) of a log that must be sound; fails on a bad byte."""
    out: list[LogRecord] = []
    pos = start
    while pos < len(data):
        magic, length, crc = RECORD_HEADER.unpack_from(data, pos)
        assert magic == b"KRD1", f"no record magic at offset {pos}"
        start = pos + RECORD_HEADER_SIZE
        end = start + length
        assert end <= len(data), f"record at offset {pos} runs past the end"
        body = data[start:end]
        assert int(google_crc32c.value(body)) == crc, f"checksum of record at offset {pos}"
        out.append(LogRecord(pos, json.loads(body), end))
        pos = end
    return out


def read_log(path: Path) -> list[LogRecord]:
    return parse_log(path.read_bytes())


def memory_put(n: int, *, tag: str = "t", ns: str = "default", **extra: Any) -> dict[str, Any]:
    """A put record shaped like the engine's memories, with a unique word ``{tag}w{n}``."""
    payload: dict[str, Any] = {
        "op": "put",
        "ns": ns,
        "id": f"m{tag}{n}",
        "type": "memory",
        "drawer": "memories",
        "kind": "note",
        "ts": 1_700_000_000.0 + n,
        "text": f"stored note {n} {tag}w{n}",
        "tags": [],
        "meta": {"n": n},
    }
    payload.update(extra)
    return payload
