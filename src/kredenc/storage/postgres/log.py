"""The log as a PostgreSQL table: the :class:`~kredenc.storage.base.Log` of a store
whose ``backend`` is ``postgres``.

A record is one row of ``log_records``: its ``seq`` (which is also its address), the
CRC32C of its payload and the payload itself, the same JSON bytes the file haystack
writes (``haystack.encode_payload``: ``seq`` and ``op`` first). The payload is kept
as ``bytea`` so that the checksum covers exactly what was written; every read
verifies it.

Seqs come from ``log_head.last_seq``, a one-row counter moved by ``UPDATE ...
RETURNING`` inside the append's own transaction: a batch (every append, in fact) is
one transaction, so it lands whole or not at all, and the seqs have no gaps (a
PostgreSQL ``SEQUENCE`` would leave one behind every rolled-back append). The row
lock on the counter also serialises writers from any number of processes.

Several processes may write one log (two ``kredenc serve`` on one database):
:meth:`PostgresLog.exclusive` is the writers' lock, a session-level advisory lock on
the schema that the housekeeper holds while it appends and applies a group, so the
index is fed the log's records in seq order by one process at a time (and takes in
another process's records first when they are not applied yet). The lock goes with
the session when a process dies. Appends run on the writer's own connection; reads
(``read``, ``iter_from``, ``follow``, ``check``) on a small pool, from any thread.

Recovery: a database commits whole transactions, so no torn tail and no half batch
can exist. What remains is damage (a payload that no longer matches its checksum):
opening verifies every record, refuses (``CorruptLog``, the record's address) a log
in which valid records follow a damaged one, and cuts a damaged last record (copied
into ``log_cut`` first), as the file haystack does with a torn tail.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import sql

from kredenc.errors import CorruptLog, InvalidInput, KredencError, StoreError
from kredenc.storage.haystack import (
    DURABILITIES,
    MAX_PAYLOAD,
    Durability,
    LogRecord,
    Recovery,
    _ordered,
    crc32c,
    encode_payload,
)
from kredenc.storage.postgres import migrate
from kredenc.storage.postgres.migrate import Step

log = logging.getLogger(__name__)

#: Records read per round trip when iterating or verifying.
_PAGE = 2000
#: Connections for reads (search fetches records by seq from many threads at once).
READ_POOL = 4

STEPS: tuple[Step, ...] = (
    Step(
        "log/001 records and head",
        (
            "CREATE TABLE log_head("
            " one boolean PRIMARY KEY DEFAULT true CHECK (one),"
            " log_id uuid NOT NULL, last_seq bigint NOT NULL DEFAULT 0)",
            "CREATE TABLE log_records("
            " seq bigint PRIMARY KEY, crc bigint NOT NULL, payload bytea NOT NULL)",
            "CREATE TABLE log_cut("
            " seq bigint NOT NULL, crc bigint NOT NULL, payload bytea NOT NULL,"
            " cut_at timestamptz NOT NULL DEFAULT now(), reason text NOT NULL)",
        ),
    ),
)


def _hint(schema: str) -> str:
    return (
        f"the log in PostgreSQL schema {schema} holds a damaged record: restore the "
        "database from a backup (kredenc export reads around nothing here)"
    )


class PostgresLog:
    """An open PostgreSQL log. Appends are serialised by the caller (the housekeeper)
    and, across processes, by :meth:`exclusive` (and the row lock on ``log_head``)."""

    #: Other processes may append to this log (``Log.shared``).
    shared = True

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        durability: Durability = "append",
        writable: bool = True,
    ) -> None:
        if durability not in DURABILITIES:
            raise InvalidInput(
                f"unknown durability {durability!r}", f"use one of {', '.join(DURABILITIES)}"
            )
        self.schema = migrate.check_schema(schema)
        self.durability: Durability = durability
        self.writable = writable
        # Only a schema this open creates may be dropped again (``discard``): one that
        # was there (public, an application's) holds what is not kredenc's.
        self._new_schema = writable and migrate.migrate(dsn, schema, STEPS).made_schema
        self._dsn = dsn
        self._conn = migrate.connect(dsn, schema)
        self._held = False  # inside exclusive()
        self._lock_key = f"kredenc-writer:{self.schema}"
        self.recovery = Recovery(end=1)
        #: Whether this open made the log in a schema it created (``discard`` may drop
        #: it), not adopted a log or a schema that was there.
        self.created = False
        try:
            self._reads = migrate.pool(dsn, schema, max_size=READ_POOL)
        except BaseException:
            self._conn.close()
            raise
        try:
            self._open()
        except psycopg.Error as exc:
            error = migrate.explain(exc, self.schema, self._conn)
            self.close()
            raise error from None
        except BaseException:
            self.close()
            raise

    @staticmethod
    def discard(dsn: str, schema: str, log_id: bytes) -> bool:
        """Drop ``schema`` if its log is ``log_id`` and holds no record: what a store's
        creation made, taken away again when the command that made it failed. Whether
        it was dropped. Called only for a log :attr:`created` (in a schema that open
        created); never public, nor a schema holding an extension."""
        ident = sql.Identifier(migrate.check_schema(schema))
        with migrate.connect(dsn, schema) as conn:
            try:
                with conn.transaction():
                    row = conn.execute(
                        "SELECT log_id, last_seq FROM log_head FOR UPDATE"
                    ).fetchone()
                    if row is None or row[0].bytes != log_id or int(row[1]) != 0:
                        return False
                    # An extension installed into it (vector, on a first open) may serve
                    # other schemas by now: then the schema stays, empty of records.
                    held = conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM pg_extension"
                        " WHERE extnamespace = to_regnamespace(%s))",
                        [schema],
                    ).fetchone()
                    if schema == "public" or (held is not None and held[0]):
                        return False
                    conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(ident))
            except psycopg.Error as exc:
                raise migrate.explain(exc, schema, conn) from None
        log.info("postgres log %s: the schema a failed command made was dropped", schema)
        return True

    # -- opening and recovery ---------------------------------------------------
    def _open(self) -> None:
        conn = self._conn
        with conn.transaction():
            row = conn.execute("SELECT log_id, last_seq FROM log_head").fetchone()
            if row is None:
                if not self.writable:
                    raise StoreError(
                        f"PostgreSQL schema {self.schema} holds no log",
                        "open the store for writing once to create it",
                    )
                # Two processes creating the store at once: one id wins, both adopt it.
                made = conn.execute(
                    "INSERT INTO log_head(log_id) VALUES (%s) ON CONFLICT DO NOTHING",
                    [uuid.uuid4()],
                )
                self.created = made.rowcount == 1 and self._new_schema
                row = conn.execute("SELECT log_id, last_seq FROM log_head").fetchone()
        assert row is not None
        self.log_id: bytes = row[0].bytes
        last_seq = int(row[1])
        bad = self._verify(last_seq)
        if bad:
            first = bad[0]
            if first != last_seq or len(bad) > 1:
                raise CorruptLog(
                    f"PostgreSQL log {self.schema}: damaged record at address {first} "
                    f"(checksum mismatch); valid records follow",
                    offset=first,
                    hint=_hint(self.schema),
                )
            if self.writable:
                self._cut(first)
            self.recovery.problems.append(
                f"tail at address {first}: checksum mismatch; the record was cut"
                + (" (kept in log_cut)" if self.writable else " (not read)")
            )
            last_seq = first - 1
        self.last_seq = last_seq
        self.recovery.records = last_seq
        self.recovery.last_seq = last_seq
        self.recovery.end = self.end

    def _verify(self, last_seq: int) -> list[int]:
        """The seqs of records whose payload fails its checksum (or missing ones)."""
        bad: list[int] = []
        expected = 1
        for seq, crc, payload in self._rows(1, last_seq + 1):
            while expected < seq:  # a row that is gone: damage as much as a bad byte
                bad.append(expected)
                expected += 1
            if crc32c(payload) != crc:
                bad.append(seq)
            expected = seq + 1
        bad.extend(range(expected, last_seq + 1))
        return bad

    def _cut(self, seq: int) -> None:
        conn = self._conn
        with conn.transaction():
            conn.execute(
                "INSERT INTO log_cut(seq, crc, payload, reason) SELECT seq, crc, payload,"
                " 'checksum mismatch' FROM log_records WHERE seq = %s",
                [seq],
            )
            conn.execute("DELETE FROM log_records WHERE seq >= %s", [seq])
            conn.execute("UPDATE log_head SET last_seq = %s", [seq - 1])
        log.warning(
            "postgres log %s: damaged last record %d cut (kept in log_cut)", self.schema, seq
        )

    # -- the protocol's properties -----------------------------------------------------
    @property
    def end(self) -> int:
        """The address the next record gets (addresses are seqs)."""
        return self.last_seq + 1

    # -- the writers' lock ---------------------------------------------------------------
    def _writer(self) -> psycopg.Connection:
        """The writer's connection, opened again when the last one was lost (a server
        restart, a network cut): a long-running handle outlives its connections."""
        conn = self._conn
        if conn.closed or conn.broken:
            with suppress(psycopg.Error):
                conn.close()
            log.warning(
                "postgres log %s: the writer's connection was lost; reconnecting", self.schema
            )
            self._conn = conn = migrate.connect(self._dsn, self.schema)
        return conn

    def _lock(self) -> psycopg.Connection:
        """Take the writers' lock on the writer's connection; once more on a new one when
        the connection turns out to be lost (nothing was written, so a retry is safe)."""
        for attempt in (1, 2):
            conn = self._writer()
            try:
                conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [self._lock_key])
                conn.commit()
                return conn
            except psycopg.Error as exc:
                lost = migrate.is_lost(exc, conn)
                with suppress(psycopg.Error):
                    conn.rollback()
                if lost and attempt == 1:
                    continue
                raise migrate.explain(exc, self.schema, conn) from None
        raise AssertionError("unreachable")

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the writers' lock (across processes) for the block, with ``last_seq``
        brought up to what other processes appended before it was taken."""
        conn = self._lock()
        self._held = True
        try:
            self.follow()
            yield
        finally:
            self._held = False
            if conn is self._conn and not (conn.closed or conn.broken):
                try:
                    conn.rollback()  # a failed statement may have left a transaction open
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [self._lock_key])
                    conn.commit()
                except psycopg.Error as exc:  # a broken session has released it already
                    log.warning("postgres log %s: writers' lock release: %s", self.schema, exc)
            # else: the session that held the lock is gone, and the lock with it

    # -- appending ----------------------------------------------------------------------
    def append(
        self, payloads: Sequence[dict[str, Any]], *, batch: bool = False, sync: bool = True
    ) -> list[tuple[int, int]]:
        """Append payloads in one transaction; each gets ``seq`` (set in the payload, as
        the file log does) and its address. ``batch`` changes nothing here: every
        append is all or nothing."""
        if not self.writable:
            raise StoreError("the log is open read-only", "open the store for writing")
        if not payloads:
            return []
        # Under the writers' lock the connection must be the one that holds it: a lost
        # one fails the append (the next exclusive() opens a new one), never reopened here.
        conn = self._conn if self._held else self._writer()
        rows: list[tuple[int, int, bytes]] = []
        try:
            with conn.transaction():
                if not sync or self.durability == "none":
                    conn.execute("SET LOCAL synchronous_commit = off")
                row = conn.execute(
                    "UPDATE log_head SET last_seq = last_seq + %s RETURNING last_seq",
                    [len(payloads)],
                ).fetchone()
                assert row is not None
                first = int(row[0]) - len(payloads) + 1
                for n, payload in enumerate(payloads):
                    body = encode_payload(_ordered(payload, first + n, None))
                    if len(body) > MAX_PAYLOAD:
                        raise InvalidInput(
                            f"record of {len(body)} bytes exceeds the {MAX_PAYLOAD}-byte bound",
                            "split the text into smaller pieces",
                        )
                    rows.append((first + n, crc32c(body), body))
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO log_records(seq, crc, payload) VALUES (%s, %s, %s)", rows
                    )
        except psycopg.Error as exc:
            lost = migrate.is_lost(exc, conn)
            if lost and rows and self._landed(rows):
                # The commit reached the server before the connection went: the batch
                # is in the log, once. Failing it would have the caller write it twice.
                self.last_seq = max(self.last_seq, rows[-1][0])
                return [(seq, seq) for seq, _, _ in rows]
            for payload in payloads:  # nothing landed: no seq was given out
                payload.pop("seq", None)
            if lost:
                raise StoreError(
                    f"PostgreSQL log {self.schema}: the database connection was lost during "
                    "the append, which was not written",
                    migrate.LOST_HINT,
                ) from None
            raise migrate.explain(exc, self.schema, conn) from None
        self.last_seq = first + len(payloads) - 1
        return [(first + n, first + n) for n in range(len(payloads))]

    def _landed(self, rows: Sequence[tuple[int, int, bytes]]) -> bool:
        """Whether the log holds exactly ``rows`` (seq, crc, payload) at their seqs: an
        append whose connection broke at its commit may have committed. Read on a new
        connection; False when that cannot be read either."""
        first, last = rows[0][0], rows[-1][0]
        try:
            with self._read() as conn:
                found = conn.execute(
                    "SELECT seq, crc, payload FROM log_records WHERE seq BETWEEN %s AND %s"
                    " ORDER BY seq",
                    [first, last],
                ).fetchall()
        except KredencError:
            return False
        return [(int(q), int(c), bytes(p)) for q, c, p in found] == list(rows)

    def sync(self) -> None:
        """Make appends committed without waiting for the WAL durable: a transaction
        that commits synchronously flushes the WAL up to its own commit."""
        if self.durability == "none":
            return
        # Under the writers' lock, the session that appended: a commit on a new one would
        # vouch for nothing the lost one committed asynchronously (a crash loses those),
        # so a lost connection fails the sync, and with it the group's acknowledgements.
        conn = self._conn if self._held else self._writer()
        try:
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = on")
                conn.execute("SELECT pg_current_xact_id()")
        except psycopg.Error as exc:
            raise migrate.explain(exc, self.schema, conn) from None

    # -- reading ------------------------------------------------------------------------
    def read(self, offset: int) -> dict[str, Any]:
        """The payload at address ``offset`` (verified against its checksum)."""
        if offset < 1 or offset >= self.end:
            self.follow()  # another process (or this one's writer) appended since
            if offset < 1 or offset >= self.end:
                raise StoreError(
                    f"PostgreSQL log {self.schema}: no record at address {offset} "
                    f"(the log ends at {self.end})",
                    "run 'kredenc check' to find what is at fault",
                )
        with self._read() as conn:
            row = conn.execute(
                "SELECT crc, payload FROM log_records WHERE seq = %s", [offset]
            ).fetchone()
        if row is None:
            raise CorruptLog(
                f"PostgreSQL log {self.schema}: record {offset} is missing",
                offset,
                _hint(self.schema),
            )
        return self._decode(offset, int(row[0]), bytes(row[1]))

    def _decode(self, seq: int, crc: int, body: bytes) -> dict[str, Any]:
        if crc32c(body) != crc:
            raise CorruptLog(
                f"PostgreSQL log {self.schema}: damaged record at address {seq}",
                seq,
                _hint(self.schema),
            )
        payload: dict[str, Any] = json.loads(body)
        return payload

    def _rows(self, start: int, stop: int) -> Iterator[tuple[int, int, bytes]]:
        """Rows with ``start <= seq < stop`` in seq order, a page per round trip."""
        pos = start
        while pos < stop:
            with self._read() as conn:
                rows = conn.execute(
                    "SELECT seq, crc, payload FROM log_records WHERE seq >= %s AND seq < %s"
                    " ORDER BY seq LIMIT %s",
                    [pos, stop, _PAGE],
                ).fetchall()
            if not rows:
                return
            for seq, crc, payload in rows:
                yield int(seq), int(crc), bytes(payload)
            pos = int(rows[-1][0]) + 1

    def iter_from(self, offset: int = 1) -> Iterator[LogRecord]:
        """Records from address ``offset`` up to the end at the call (a stable snapshot)."""
        stop = self.end
        for seq, crc, body in self._rows(max(1, offset), stop):
            yield LogRecord(seq, self._decode(seq, crc, body), seq + 1)

    def follow(self) -> bool:
        """Take in what another process appended since; whether the end moved."""
        with self._read() as conn:
            row = conn.execute("SELECT last_seq FROM log_head").fetchone()
        if row is None or int(row[0]) <= self.last_seq:
            return False
        self.last_seq = int(row[0])
        return True

    def check(self) -> tuple[bool, list[str]]:
        """Verify every record without changing anything: (sound, findings)."""
        with self._read() as conn:
            row = conn.execute("SELECT last_seq FROM log_head").fetchone()
        last_seq = int(row[0]) if row else 0
        bad = self._verify(last_seq)
        if bad:
            shown = ", ".join(str(b) for b in bad[:10])
            return False, [f"{len(bad)} damaged record(s) at address {shown}"]
        return True, [f"{last_seq} committed records, last seq {last_seq}"]

    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection]:
        """A pooled connection for one read transaction (committed when the block ends)."""
        try:
            with self._reads.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise migrate.explain(exc, self.schema) from None

    def close(self) -> None:
        self._reads.close()
        self._conn.close()
