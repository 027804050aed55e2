"""What every Redis user in ``storage/`` shares: the client, the store's key, outages.

kredenc uses Redis for derived or short-lived state only (the operation cache's shared
tier, the answer loop's blackboard, sessions' hot history, locks); the truth is always
the store. Only ``storage/`` imports redis-py, lazily (the ``redis`` extra).

- :func:`connect` makes a client that neither waits nor retries (short timeouts,
  redis-py's retries off): a caller that can do without Redis carries on at once.
- What a caller does when Redis stops answering is :class:`~kredenc.storage.outage.Outage`.
- :func:`shared_id` is the store's part of every key: processes that open one store
  share keys; two stores never do.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kredenc.errors import MissingExtra

CONNECT_TIMEOUT_S = 0.25
SOCKET_TIMEOUT_S = 0.5
_GLOB = str.maketrans({c: "\\" + c for c in "*?[]\\"})

__all__ = [
    "client_for",
    "connect",
    "glob_escape",
    "redacted",
    "shared_client",
    "shared_id",
    "store_id",
]


def store_id(log_id: str, home: Path) -> str:
    """A store's log id and its resolved path, hashed (two stores never share entries;
    two processes on one store directory do)."""
    raw = f"{log_id}\0{home.resolve()}".encode()
    return hashlib.sha256(raw).hexdigest()[:24]


def shared_id(log_id: str, home: Path, *, backend: str) -> str:
    """The store's part of a key that every process of the store must share: on
    PostgreSQL the log's id alone (it is the schema's, so processes on other machines,
    with other store directories, share it), else :func:`store_id` (a copied store
    directory keeps its log id, so the path tells the copies apart)."""
    if backend == "postgres":
        return hashlib.sha256(f"postgres\0{log_id}".encode()).hexdigest()[:24]
    return store_id(log_id, home)


def redacted(url: str) -> str:
    """``url`` without its password, for log lines (the URL is a secret)."""
    try:
        parts = urlsplit(url)
        if parts.scheme == "unix":
            return f"unix://{parts.path or '?'}"
        host = parts.hostname or "?"
        host = f"[{host}]" if ":" in host else host
        return f"{parts.scheme}://{host}:{parts.port or 6379}"
    except ValueError:
        return "a Redis URL that does not parse"


def glob_escape(text: str) -> str:
    """``text`` with SCAN's glob characters escaped (a prefix matched literally)."""
    return text.translate(_GLOB)


def client_for(url: str, *, socket_timeout: float = SOCKET_TIMEOUT_S) -> Any:
    """A redis-py client for ``url`` that neither waits nor retries; raises
    :class:`~kredenc.errors.MissingExtra` without redis-py and ``ValueError`` for a URL
    that is not Redis's."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise MissingExtra("a Redis URL", "redis") from None
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=socket_timeout,
        retry=Retry(NoBackoff(), 0),
        decode_responses=False,
    )


def connect(url: str, where: str, *, setting: str, log: logging.Logger) -> Any:
    """:func:`client_for` for a user that can do without Redis: None, with one WARNING
    on ``log`` naming ``setting``, when redis-py is missing or the URL is wrong."""
    try:
        return client_for(url)
    except MissingExtra:
        log.warning(
            "%s is set but redis-py is not installed; the Redis tier is off "
            "(pip install 'kredenc[redis]')",
            setting,
        )
    except ValueError as exc:
        log.warning("%s (%s) is not a Redis URL (%s); the tier is off", setting, where, exc)
    return None


_SHARED: dict[tuple[str, float], Any] = {}
_SHARED_LOCK = threading.Lock()


def shared_client(url: str, *, socket_timeout: float = SOCKET_TIMEOUT_S) -> Any:
    """One :func:`client_for` per URL and timeout for the life of the process (redis-py's
    client is thread-safe over its connection pool, and after a fork it opens new
    connections): the blackboard, sessions and locks open none per call."""
    with _SHARED_LOCK:
        found = _SHARED.get((url, socket_timeout))
        if found is None:
            found = _SHARED[(url, socket_timeout)] = client_for(url, socket_timeout=socket_timeout)
        return found
