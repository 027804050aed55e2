"""The PostgreSQL backend runs the conformance suites unchanged: PostgresLog as the
Log, PostgresIndex as the Index (kredenc.testing.conformance; docs/postgres.md).

Each store path the suites use stands for its own schema in the session's database,
so every test starts from empty tables and reopening a path finds what it left.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kredenc.storage.base import Index, Log
from kredenc.storage.haystack import crc32c, encode_payload
from kredenc.testing.conformance import IndexConformance, LogConformance
from kredenc.testing.postgres import require

pytestmark = pytest.mark.postgres

require()  # skips this module without the PostgreSQL packages (fails under CI)

import psycopg  # noqa: E402

from kredenc.storage.postgres import migrate  # noqa: E402
from kredenc.storage.postgres.index import PostgresIndex  # noqa: E402
from kredenc.storage.postgres.log import PostgresLog  # noqa: E402


def schema_for(path: Path, kind: str) -> str:
    """The schema standing for a store path (one per path and kind)."""
    return f"t_{kind}_" + hashlib.blake2b(str(path).encode(), digest_size=12).hexdigest()


class TestPostgresLog(LogConformance):
    @pytest.fixture(autouse=True)
    def _dsn(self, postgres_dsn: str) -> None:
        self.dsn = postgres_dsn

    def make_log(self, path: Path) -> Log:
        return PostgresLog(self.dsn, schema_for(path, "log"), durability="none")

    def tear_tail(self, path: Path) -> None:
        """A database commits whole transactions: a crash mid-append leaves nothing."""

    def leave_uncommitted(self, path: Path, payloads: Sequence[dict[str, Any]]) -> None:
        # The crash before the commit: rows written in a transaction that never ends.
        conn = migrate.connect(self.dsn, schema_for(path, "log"))
        row = conn.execute(
            "UPDATE log_head SET last_seq = last_seq + %s RETURNING last_seq", [len(payloads)]
        ).fetchone()
        assert row is not None
        first = int(row[0]) - len(payloads) + 1
        for n, payload in enumerate(payloads):
            body = encode_payload({"seq": first + n, **payload})
            conn.execute(
                "INSERT INTO log_records(seq, crc, payload) VALUES (%s, %s, %s)",
                [first + n, crc32c(body), body],
            )
        conn.close()  # without a commit: the server rolls the transaction back

    def damage(self, path: Path, offset: int) -> None:
        with migrate.connect(self.dsn, schema_for(path, "log")) as conn:
            conn.execute(
                "UPDATE log_records SET payload = overlay(payload placing"
                " set_byte(substring(payload from 4 for 1), 0,"
                " get_byte(payload, 3) # 32) from 4 for 1) WHERE seq = %s",
                [offset],
            )


def test_the_role_is_no_superuser(postgres_dsn: str) -> None:
    """Row-level security binds every role but superusers: the tests' role is not one."""
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert row.fetchone() == (False,)


class TestPostgresIndex(IndexConformance):
    @pytest.fixture(autouse=True)
    def _dsn(self, postgres_dsn: str) -> None:
        self.dsn = postgres_dsn

    def make_index(self, path: Path, dim: int) -> Index:
        return PostgresIndex(
            self.dsn, schema_for(path, "index"), dim=dim, model_id=f"conformance-{dim}"
        )
