"""Connections and migrations meet the database: every way a DSN, a server or a role can
be wrong comes out as one line (a :class:`KredencError`) that says what is wrong and
what to do, never a psycopg error, a traceback or any part of the DSN's values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, KredencError, StoreError
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import PostgresServer, require

pytestmark = pytest.mark.postgres

require()

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from kredenc.storage.postgres import migrate  # noqa: E402


def _open(path: Path, dsn: str, schema: str, **kw: Any) -> Kredenc:
    return Kredenc.open(
        path,
        embedder=HashEmbedder(),
        backend="postgres",
        postgres_dsn=dsn,
        postgres_schema=schema,
        durability="none",
        **kw,
    )


def _one_line(err: KredencError) -> str:
    text = f"{err.message} ({err.hint})"
    assert "\n" not in text, text
    assert "please report" not in text and "internal error" not in text
    return text


@pytest.fixture
def superuser(postgres_server: PostgresServer, postgres_dsn: str) -> Iterator[psycopg.Connection]:
    """The server's superuser (``postgres_dsn`` made the role ``kredenc``)."""
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as conn:
        yield conn


def _database(conn: psycopg.Connection, name: str, owner: str | None = None) -> None:
    """A fresh database ``name`` (no vector extension), owned by ``owner``."""
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    if owner is not None:
        conn.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(name), sql.Identifier(owner)
            )
        )


def _role_dsn(server: PostgresServer, db: str, role: str = "kredenc") -> str:
    return f"host=127.0.0.1 port={server.port} user={role} dbname={db}"


# -- the DSN ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dsn",
    [
        "host=127.0.0.1 dbname=kredenc password=Hunter2 TopSecret",
        "host=127.0.0.1 dbname=kredenc password='Hunter2 TopSecret",
        "host=127.0.0.1 dbname=kredenc TopSecret=Hunter2",
        "postgresql://kredenc:Hunter2@[::1/TopSecret",
    ],
)
def test_a_dsn_that_does_not_parse_names_none_of_it(tmp_path: Path, dsn: str) -> None:
    with pytest.raises(InvalidInput) as err:
        _open(tmp_path / "s", dsn, "t_dsn")
    text = _one_line(err.value)
    assert "Hunter2" not in text and "TopSecret" not in text
    assert err.value.message.startswith("postgres_dsn does not parse")
    assert "host=" in err.value.hint  # an example of the form


def test_the_cli_says_so_in_one_line_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kredenc.interfaces.cli import main

    monkeypatch.setenv("KREDENC_BACKEND", "postgres")
    monkeypatch.setenv(
        "KREDENC_POSTGRES_DSN", "host=127.0.0.1 dbname=kredenc password=Hunter2 TopSecret"
    )
    with pytest.raises(SystemExit) as done:
        main(["--store", str(tmp_path / "x"), "remember", "hi"])
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert err.count("\n") == 1 and err.startswith("error: postgres_dsn does not parse")
    assert "Hunter2" not in err and "TopSecret" not in err
    assert not (tmp_path / "x").exists()


# -- the schema name ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["pg_catalog", "pg_toast", "pg_mine", "information_schema"])
def test_postgresqls_own_schema_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidInput, match="PostgreSQL's own"):
        migrate.check_schema(name)


# -- the server and the role --------------------------------------------------------------
def test_a_server_without_the_extension_says_to_install_it(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """pgvector missing on the server: ``CREATE EXTENSION`` of one that is not there."""
    step = migrate.Step("t/001", ("CREATE EXTENSION IF NOT EXISTS vector_not_installed",))
    with pytest.raises(StoreError) as err:
        migrate.migrate(postgres_dsn, "t_noext", [step])
    text = _one_line(err.value)
    assert "vector_not_installed" in err.value.message and "not available" in err.value.message
    assert "install pgvector on the server" in text


def test_a_role_that_may_not_create_the_extension(
    postgres_server: PostgresServer, superuser: psycopg.Connection, tmp_path: Path
) -> None:
    _database(superuser, "t_noext_role", owner="kredenc")
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", _role_dsn(postgres_server, "t_noext_role"), "kredenc")
    text = _one_line(err.value)
    assert "may not create the extension vector" in err.value.message
    assert "CREATE EXTENSION vector" in err.value.hint and "superuser" in err.value.hint
    assert "t_noext_role" in text
    # The failed first open took away what it made: the schema and store.json.
    with psycopg.connect(postgres_server.dsn("t_noext_role")) as conn:
        assert conn.execute("SELECT to_regnamespace('kredenc')").fetchone() == (None,)
    assert not (tmp_path / "s" / "store.json").exists()


def test_a_role_without_create_on_the_database(
    postgres_server: PostgresServer, superuser: psycopg.Connection, tmp_path: Path
) -> None:
    _database(superuser, "t_nocreate")  # owned by the superuser: kredenc may only connect
    with psycopg.connect(postgres_server.dsn("t_nocreate"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", _role_dsn(postgres_server, "t_nocreate"), "kredenc")
    _one_line(err.value)
    assert "CREATE on database t_nocreate" in err.value.hint


def test_a_read_only_database_says_to_open_the_store_read_only(
    postgres_server: PostgresServer, superuser: psycopg.Connection, tmp_path: Path
) -> None:
    _database(superuser, "t_readonly", owner="kredenc")
    with psycopg.connect(postgres_server.dsn("t_readonly"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    dsn = _role_dsn(postgres_server, "t_readonly")
    with _open(tmp_path / "s", dsn, "kredenc") as kb:
        kb.remember("a note on a database that turns read-only")
    superuser.execute("ALTER DATABASE t_readonly SET default_transaction_read_only = on")
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", dsn, "kredenc")
    _one_line(err.value)
    assert "read-only" in err.value.message and "open the store read-only" in err.value.hint
    with _open(tmp_path / "s", dsn, "kredenc", read_only=True) as kb:
        assert kb.search("read-only", k=1)


def test_a_schema_without_a_store_on_a_read(postgres_dsn: str, tmp_path: Path) -> None:
    with _open(tmp_path / "s", postgres_dsn, "t_there") as kb:
        kb.remember("a note")
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", postgres_dsn, "t_not_there", read_only=True)
    _one_line(err.value)
    assert "schema t_not_there holds no kredenc store" in err.value.message
    assert "postgres_schema" in err.value.hint


def test_a_half_made_schema_on_a_read(postgres_dsn: str, tmp_path: Path) -> None:
    """The log's tables are there, the index's are not (a first open that stopped)."""
    from kredenc.storage.postgres.index import PostgresIndex

    with _open(tmp_path / "s", postgres_dsn, "t_half") as kb:
        kb.remember("a note")
    PostgresIndex.drop(postgres_dsn, "t_half")
    with pytest.raises(StoreError) as err:
        _open(tmp_path / "s", postgres_dsn, "t_half", read_only=True)
    _one_line(err.value)
    assert "schema t_half holds no kredenc index" in err.value.message
    assert "for writing" in err.value.hint


# -- the role ---------------------------------------------------------------------------
def test_a_superuser_role_is_warned_of_as_it_bypasses_row_level_security(
    tmp_path: Path,
    postgres_server: PostgresServer,
    postgres_dsn: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """postgres.md: the role must not be a superuser, since superusers bypass the
    row-level security that keeps namespaces apart. Nothing said so when it was one."""
    caplog.set_level("WARNING")
    as_superuser = postgres_server.dsn("kredenc_test")
    _open(tmp_path / "su", as_superuser, "su_warned").close()
    said = [r.getMessage() for r in caplog.records if "row-level security" in r.getMessage()]
    assert len(said) == 1 and "superuser" in said[0] and "postgres.md" in said[0], said
    caplog.clear()
    _open(tmp_path / "app", postgres_dsn, "app_quiet").close()
    assert not [r for r in caplog.records if "row-level security" in r.getMessage()]
