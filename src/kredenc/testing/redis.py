"""A real Redis on loopback for the ``integration`` tests, and a key prefix per test.

The tests of the Redis tier run against the Redis on 127.0.0.1:6379 (``.ci/run``
starts one when it is down; ``KREDENC_TEST_REDIS_URL`` names another). Where none
answers they skip with the reason, except under ``CI``, where a missing Redis is a
failure: CI must not pass by skipping what it was meant to test.

These are the bodies of the pytest fixtures ``tests/conftest.py`` names once for every
test module: ``redis_url`` (per session), ``redis_prefix`` and ``redis_client`` (per
test), as it names ``postgres_server`` over :mod:`kredenc.testing.postgres`.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

DEFAULT_URL = "redis://127.0.0.1:6379/0"

__all__ = ["DEFAULT_URL", "closed_port_url", "key_prefix", "redis_url_or_skip"]


def redis_url_or_skip() -> str:
    """The test Redis's URL once it answers PING; else skip (fail under ``CI``)."""
    url = os.environ.get("KREDENC_TEST_REDIS_URL", DEFAULT_URL)
    try:
        import redis
    except ImportError:
        problem = "redis-py is not installed (pip install 'kredenc[redis]')"
    else:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            client.ping()
            return url
        except redis.RedisError as exc:
            problem = f"no Redis answers at {url} ({exc}); start one: redis-server --port 6379"
        finally:
            client.close()
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {problem}")
    pytest.skip(problem)


@contextmanager
def key_prefix(url: str) -> Iterator[str]:
    """A prefix no other test uses; its keys are deleted afterwards."""
    import redis

    prefix = f"kredenc-test:{uuid.uuid4().hex}:"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(url)
        try:
            names = list(client.scan_iter(match=prefix + "*", count=500))
            if names:
                client.unlink(*names)
        finally:
            client.close()


def closed_port_url() -> str:
    """A Redis URL on a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"
