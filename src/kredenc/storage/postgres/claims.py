"""Period claims in PostgreSQL: ``Store.claim`` for a PostgreSQL store without Redis.

Every server and worker of a PostgreSQL store may run a lifecycle scheduler; without
a Redis to share a claim, the database itself is what they all reach. ``claims`` holds
one row per (namespace, name) with the moment its claim ends (``until``, the server's
clock). A claim is one statement::

    INSERT … ON CONFLICT (ns, name) DO UPDATE SET until = clock_timestamp() + ttl
        WHERE claims.until <= clock_timestamp() RETURNING until

It returns a row when this call took the claim (no row yet, or the last claim ended);
no row when another caller's claim still runs, and a second read says how long it has
left. ``ON CONFLICT DO UPDATE`` locks the row, so of two callers at once exactly one
takes it. The semantics are those of the Redis claim (``storage/locks.py``): a claim
lives ``ttl`` seconds from when it was taken and nobody releases it.

Why a row with an end and not ``pg_try_advisory_xact_lock`` plus a last-run row: an
advisory lock lives as long as the transaction (or session) that holds it, so the
claimer would hold a connection idle in a transaction for the whole job, and the lock
keeps two runs apart but not two runs of one period (the last-run row does that, read
and written under the lock: two statements where one does). A row with an end needs
no open transaction and nothing released: a claimer that crashes mid-run keeps the
period it had and no more, and the next period is claimed as usual. The clock is the
database's (``clock_timestamp()``: the moment of the claim, not of its transaction's
start), one clock for every host. Rows are per (ns, name): a table
that stays as small as the number of jobs.

Its table is the migration step ``claims/001`` with row-level security on ``ns`` like
the index's tables (``schema.walls``), applied when the claims first connect.
"""

from __future__ import annotations

import threading
from contextlib import suppress

import psycopg

from kredenc.errors import StoreError
from kredenc.storage.postgres import migrate, schema
from kredenc.storage.postgres.migrate import Step

STEPS = (
    Step(
        "claims/001 claims",
        (
            "CREATE TABLE claims(ns text NOT NULL, name text NOT NULL,"
            " until timestamptz NOT NULL, PRIMARY KEY (ns, name))",
            *schema.walls(("claims",)),
        ),
    ),
)

_CLAIM = (
    "INSERT INTO claims(ns, name, until)"
    " VALUES (%(ns)s, %(name)s, clock_timestamp() + %(ttl)s * interval '1 ms')"
    " ON CONFLICT (ns, name) DO UPDATE SET until = excluded.until"
    " WHERE claims.until <= clock_timestamp() RETURNING until"
)
_LEFT = (
    "SELECT greatest(extract(epoch FROM until - clock_timestamp()), 0.001)"
    " FROM claims WHERE ns = %(ns)s AND name = %(name)s"
)


class PostgresClaims:
    """The claims of one store's schema, over one connection (opened on first use,
    opened again after it fails; thread-safe)."""

    def __init__(self, dsn: str, schema_name: str) -> None:
        self.dsn = dsn
        self.schema = migrate.check_schema(schema_name)
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._migrated = False

    def claim(self, ns: str, name: str, ttl_s: float) -> float:
        """``0.0`` when this call claimed ``name`` in ``ns`` for ``ttl_s`` seconds, else
        the seconds the current claim has left."""
        args = {"ns": ns, "name": name, "ttl": max(1, int(ttl_s * 1000))}
        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction():
                    conn.execute("SELECT set_config('kredenc.ns', %s, true)", [ns])
                    if conn.execute(_CLAIM, args).fetchone() is not None:
                        return 0.0
                    row = conn.execute(_LEFT, args).fetchone()
                # Gone between the two statements only if it ended: claim again.
                return float(row[0]) if row is not None else 0.001
            except psycopg.Error as exc:
                self._drop()
                raise StoreError(
                    f"PostgreSQL claim {name!r}: {' '.join(str(exc).split())[:200]}",
                    "check the database server (postgres_dsn)",
                ) from None

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            if not self._migrated:
                migrate.migrate(self.dsn, self.schema, STEPS)
                self._migrated = True
            self._conn = migrate.connect(self.dsn, self.schema)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(psycopg.Error):  # already broken
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._drop()
