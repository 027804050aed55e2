"""Connections and migrations: one schema per store, built by ordered, named steps.

A step is a name and its statements. ``migrations`` records each step applied, in one
transaction with the step itself, under an advisory lock on the schema, so two
processes opening the same store at once apply each step once; a step already
recorded is never run again, and a new version of kredenc adds steps at the end of
its list (never edits one that has shipped).

Every connection's ``search_path`` is the store's schema (then ``public``, where the
``vector`` type lives), so the SQL elsewhere names tables without a schema. A rebuild's
staging schema comes first and the store's schema after it (``also``): the new index
tables are created in the staging schema, and what only the store has (the embedding
cache, the text search configuration) is found in the store's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from kredenc.errors import InvalidInput, StoreError

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

Configure = Callable[[psycopg.Connection], None]


@dataclass(frozen=True)
class Step:
    """One migration step: applied once, whole, in order."""

    name: str
    statements: tuple[str, ...]


def check_schema(schema: str) -> str:
    """A schema name kredenc may use (lower-case letters, digits, ``_``)."""
    if not _SCHEMA.match(schema):
        raise InvalidInput(
            f"postgres schema {schema!r} is not a plain lower-case identifier",
            "use letters a-z, digits and _ (at most 63), starting with a letter or _",
        )
    return schema


def connect(
    dsn: str, schema: str, *, autocommit: bool = False, also: Sequence[str] = ()
) -> psycopg.Connection:
    """One connection with ``search_path`` set to ``schema``; a clear error if it fails."""
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL ({str(exc).strip().splitlines()[0]})",
            "check postgres_dsn (KREDENC_POSTGRES_DSN) and that the server is running",
        ) from None
    set_path(conn, schema, also)
    return conn


def set_path(conn: psycopg.Connection, schema: str, also: Sequence[str] = ()) -> None:
    path = [sql.Identifier(check_schema(s)) for s in (schema, *also)]
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.SQL(", ").join(path)))
    if not conn.autocommit:
        conn.commit()


def pool(
    dsn: str,
    schema: str,
    *,
    max_size: int = 8,
    configure: Configure | None = None,
    also: Sequence[str] = (),
) -> ConnectionPool:
    """A pool whose connections all have the store's ``search_path`` (and whatever
    ``configure`` adds, e.g. pgvector's type adapters)."""

    def setup(conn: psycopg.Connection) -> None:
        set_path(conn, schema, also)
        if configure is not None:
            configure(conn)
            conn.commit()

    try:
        return ConnectionPool(
            dsn,
            min_size=1,
            max_size=max_size,
            configure=setup,
            open=True,
            timeout=30.0,
            name=f"kredenc-{schema}",
        )
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL ({exc})",
            "check postgres_dsn (KREDENC_POSTGRES_DSN) and that the server is running",
        ) from None


def migrate(dsn: str, schema: str, steps: Sequence[Step], *, also: Sequence[str] = ()) -> list[str]:
    """Create ``schema`` if needed and apply the ``steps`` not recorded yet, in order;
    returns the names applied now."""
    done: list[str] = []
    with connect(dsn, schema, also=also) as conn:
        ident = sql.Identifier(check_schema(schema))
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"kredenc:{schema}"])
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations("
                " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            applied = {str(r[0]) for r in conn.execute("SELECT name FROM migrations")}
            for step in steps:
                if step.name in applied:
                    continue
                for statement in step.statements:
                    conn.execute(statement.encode())
                conn.execute("INSERT INTO migrations(name) VALUES (%s)", [step.name])
                done.append(step.name)
    return done


def forget_steps(conn: psycopg.Connection, prefix: str) -> None:
    """Remove the records of the steps named ``prefix...`` (their tables were dropped)."""
    conn.execute("DELETE FROM migrations WHERE starts_with(name, %s)", [prefix])
