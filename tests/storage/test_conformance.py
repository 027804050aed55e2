"""The shipped backends run the conformance suites: the file haystack as the Log,
SQLite as the Index (kredenc.testing.conformance; docs/storage.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kredenc.storage.base import CacheTier, Index, Log
from kredenc.storage.haystack import RECORD_HEADER, RECORD_HEADER_SIZE, RECORD_MAGIC, Haystack
from kredenc.storage.index.sqlite import SqliteIndex
from kredenc.storage.index.vectors import AnnParams
from kredenc.storage.opcache import SqliteTier
from kredenc.testing.conformance import CacheTierConformance, IndexConformance, LogConformance


class TestHaystack(LogConformance):
    def make_log(self, path: Path) -> Log:
        if not path.exists():
            Haystack.create(path)
        return Haystack(path, durability="none")

    def tear_tail(self, path: Path) -> None:
        # A record header that promises 100 bytes, and 20 of them: the append died.
        with path.open("ab") as fh:
            fh.write(RECORD_HEADER.pack(RECORD_MAGIC, 100, 0) + b'{"seq":99,"op":"put"')

    def leave_uncommitted(self, path: Path, payloads: Sequence[dict[str, Any]]) -> None:
        hay = Haystack(path, durability="none")
        try:
            start = hay.end
            hay.append([dict(p) for p in payloads], batch=True)
            commit = list(hay.iter_from(start))[-1]
            assert commit.op == "commit"
        finally:
            hay.close()
        with path.open("r+b") as fh:
            fh.truncate(commit.offset)

    def damage(self, path: Path, offset: int) -> None:
        with path.open("r+b") as fh:
            fh.seek(offset + RECORD_HEADER_SIZE + 3)
            byte = fh.read(1)
            fh.seek(offset + RECORD_HEADER_SIZE + 3)
            fh.write(bytes([byte[0] ^ 0x20]))


class TestSqliteIndex(IndexConformance):
    def make_index(self, path: Path, dim: int) -> Index:
        return SqliteIndex(path, dim=dim, model_id=f"conformance-{dim}", ann=AnnParams())


class TestSqliteTier(CacheTierConformance):
    def make_tier(self, path: Path) -> CacheTier:
        return SqliteTier(path / "opcache.db")
