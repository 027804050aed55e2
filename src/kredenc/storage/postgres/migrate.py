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
from dataclasses import dataclass, field

import psycopg
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from kredenc.errors import InvalidInput, KredencError, StoreError

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: A quoted piece of libpq's complaint about a DSN: part of the DSN, unless punctuation.
_QUOTED = re.compile(r'"([^"]*)"')
_EXTENSION = re.compile(r'extension "([^"]+)"')

#: What to do about a connection that broke (a server restart, a network cut).
LOST_HINT = "retry; if it keeps failing, check that the PostgreSQL server is running"
_DSN_HINT = (
    "write postgres_dsn (KREDENC_POSTGRES_DSN) as key=value pairs, e.g. "
    "'host=db.internal port=5432 dbname=kredenc user=kredenc' (a value holding spaces "
    "in single quotes), or as a URL postgresql://db.internal:5432/kredenc"
)

Configure = Callable[[psycopg.Connection], None]


@dataclass(frozen=True)
class Step:
    """One migration step: applied once, whole, in order."""

    name: str
    statements: tuple[str, ...]


def check_schema(schema: str) -> str:
    """A schema name kredenc may use (lower-case letters, digits, ``_``; not one of
    PostgreSQL's own: ``pg_*``, ``information_schema``)."""
    if not _SCHEMA.match(schema):
        raise InvalidInput(
            f"postgres schema {schema!r} is not a plain lower-case identifier",
            "use letters a-z, digits and _ (at most 63), starting with a letter or _",
        )
    if schema.startswith("pg_") or schema == "information_schema":
        raise InvalidInput(
            f"postgres schema {schema!r} is a name of PostgreSQL's own "
            "(pg_* and information_schema)",
            "pick another postgres_schema (KREDENC_POSTGRES_SCHEMA)",
        )
    return schema


def _first_line(exc: BaseException) -> str:
    """The error's primary message on one line (without libpq's DETAIL, HINT, LINE)."""
    primary = getattr(getattr(exc, "diag", None), "message_primary", None)
    lines = str(primary or exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__


def _masked(text: str, dsn: str) -> str:
    """``text`` with the DSN's password (when it parses and has one) taken out."""
    try:
        secret = str(conninfo_to_dict(dsn).get("password") or "")
    except psycopg.Error:
        return text
    return text.replace(secret, "***") if secret else text


def dsn_error(exc: psycopg.Error) -> InvalidInput:
    """A DSN libpq cannot parse: its complaint with every quoted piece of the DSN taken
    out (it may be part of a password), and an example of the form."""

    def hide(m: re.Match[str]) -> str:
        punctuation = m.group(1) and not any(c.isalnum() for c in m.group(1))
        return m.group(0) if punctuation else '"..."'

    complaint = _QUOTED.sub(hide, _first_line(exc))
    return InvalidInput(f"postgres_dsn does not parse: {complaint}", _DSN_HINT)


def is_lost(exc: BaseException, conn: psycopg.Connection | None = None) -> bool:
    """Whether ``exc`` is the connection breaking (not an error of the statement)."""
    if conn is not None and (conn.broken or conn.closed):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate or ""
    return not state or state.startswith(("08", "57P"))


def explain(
    exc: psycopg.Error,
    schema: str,
    conn: psycopg.Connection | None = None,
    *,
    what: str = "store",
) -> KredencError:
    """A database error met on ``schema`` as one line saying what is wrong and what to
    do: a missing extension, a privilege the role lacks, a read-only database, a schema
    without the store's tables, a lost connection; otherwise the server's own primary
    message. ``what`` names what the tables hold (``"store"``, ``"index"``)."""
    primary = _first_line(exc)
    db = (conn.info.dbname if conn is not None and not conn.closed else "") or "the database"
    user = (conn.info.user if conn is not None and not conn.closed else "") or "the role"
    if is_lost(exc, conn):
        return StoreError(f"the connection to PostgreSQL was lost ({primary})", LOST_HINT)
    missing = isinstance(exc, errors.FeatureNotSupported | errors.UndefinedFile)
    if missing and "extension" in primary:
        found = _EXTENSION.search(primary)
        name = found.group(1) if found else "vector"
        return StoreError(
            f"the PostgreSQL extension {name} is not available on the server ({primary})",
            f"install pgvector on the server, or CREATE EXTENSION {name} as a superuser "
            f"in database {db}",
        )
    if isinstance(exc, errors.InsufficientPrivilege):
        if "extension" in primary:
            found = _EXTENSION.search(primary)
            name = found.group(1) if found else "vector"
            return StoreError(
                f"role {user} may not create the extension {name} in database {db}",
                f"CREATE EXTENSION {name} once as a superuser in database {db}, "
                "then open the store again",
            )
        if "for database" in primary:
            return StoreError(
                f"role {user} may not create schema {schema} in database {db} ({primary})",
                f"the role needs CREATE on database {db} (GRANT CREATE ON DATABASE {db} TO "
                f"{user}), or create schema {schema} owned by it",
            )
        return StoreError(
            f"role {user} lacks a privilege on PostgreSQL schema {schema} ({primary})",
            f"grant it (or make {user} the schema's owner), or pick another postgres_schema",
        )
    if isinstance(exc, errors.ReadOnlySqlTransaction):
        return StoreError(
            f"{db} is read-only (a standby, or default_transaction_read_only): the store "
            "cannot be written",
            "open the store read-only (read_only=True; the CLI's read commands do), or "
            "point postgres_dsn at the primary",
        )
    if isinstance(exc, errors.UndefinedTable | errors.InvalidSchemaName):
        return StoreError(
            f"PostgreSQL schema {schema} holds no kredenc {what} ({primary})",
            "check postgres_schema (KREDENC_POSTGRES_SCHEMA), or open the store for "
            "writing once to create it",
        )
    if isinstance(exc, errors.ReservedName):
        return InvalidInput(
            f"postgres schema {schema!r}: {primary}", "pick another postgres_schema"
        )
    return StoreError(f"PostgreSQL schema {schema}: {primary}", "check the database server")


def connect(
    dsn: str, schema: str, *, autocommit: bool = False, also: Sequence[str] = ()
) -> psycopg.Connection:
    """One connection with ``search_path`` set to ``schema``; a clear error if it fails."""
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit)
    except psycopg.ProgrammingError as exc:  # libpq could not parse the DSN
        raise dsn_error(exc) from None
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL ({_masked(_first_line(exc), dsn)})",
            "check postgres_dsn (KREDENC_POSTGRES_DSN) and that the server is running",
        ) from None
    try:
        set_path(conn, schema, also)
    except psycopg.Error as exc:
        error = explain(exc, schema, conn)
        conn.close()
        raise error from None
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
            # A connection is checked as it leaves the pool: one the server dropped (a
            # restart) is replaced, not handed out to fail.
            check=ConnectionPool.check_connection,
            open=True,
            timeout=30.0,
            name=f"kredenc-{schema}",
        )
    except psycopg.ProgrammingError as exc:
        raise dsn_error(exc) from None
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL ({_masked(_first_line(exc), dsn)})",
            "check postgres_dsn (KREDENC_POSTGRES_DSN) and that the server is running",
        ) from None


@dataclass
class Migrated:
    """What :func:`migrate` did: the steps it applied, and whether it created the schema
    (only then may a failed first command drop it again: ``PostgresLog.discard``)."""

    applied: list[str] = field(default_factory=list)
    made_schema: bool = False


def migrate(dsn: str, schema: str, steps: Sequence[Step], *, also: Sequence[str] = ()) -> Migrated:
    """Create ``schema`` if needed and apply the ``steps`` not recorded yet, in order."""
    done = Migrated()
    ident = sql.Identifier(check_schema(schema))
    with connect(dsn, schema, also=also) as conn:
        try:
            _apply(conn, ident, schema, steps, done)
        except psycopg.Error as exc:
            raise explain(exc, schema, conn) from None
    return done


def _apply(
    conn: psycopg.Connection,
    ident: sql.Identifier,
    schema: str,
    steps: Sequence[Step],
    done: Migrated,
) -> None:
    """One transaction: the schema, the ledger, then each step not recorded yet. Whether
    the schema was there is read under the migration lock: two processes creating one
    store see one of them make it."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"kredenc:{schema}"])
        there = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", [schema]).fetchone()
        done.made_schema = not (there and there[0])
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
            done.applied.append(step.name)


def forget_steps(conn: psycopg.Connection, prefix: str) -> None:
    """Remove the records of the steps named ``prefix...`` (their tables were dropped)."""
    conn.execute("DELETE FROM migrations WHERE starts_with(name, %s)", [prefix])
