"""A run's blackboard in Redis: one hash per run, JSON text by key, with a TTL.

The storage half of :class:`kredenc.loop.mind.RedisMind` (the loop keeps the
protocol and the JSON encoding; only ``storage/`` speaks to Redis). A run's hash is
``<prefix>mind:<run id>``, the run id 128 random bits, so concurrent runs never see
each other's keys; every write renews the TTL, so a run abandoned mid-way (a killed
worker) vanishes by itself, and a finished run deletes its hash.

Unlike the caches, a blackboard is the run's working state, not derived data: when
Redis does not answer the call raises :class:`~kredenc.errors.StoreError` (the tool
that made it fails, and so does the ask, with that message), never a silent miss.
"""

from __future__ import annotations

import secrets
from typing import Any

from kredenc.errors import StoreError
from kredenc.storage.redis_client import redacted, shared_client

#: A blackboard call waits at most this long (values are whole chunk lists).
SOCKET_TIMEOUT_S = 2.0

__all__ = ["RedisBoard"]


class RedisBoard:
    """One run's hash (thread-safe: redis-py's pool)."""

    def __init__(
        self, url: str, *, prefix: str = "kredenc:", ttl_s: int = 3600, client: Any = None
    ) -> None:
        self.where = redacted(url)
        self.run_id = secrets.token_hex(16)
        self.name = f"{prefix}mind:{self.run_id}"
        self.ttl_s = ttl_s
        self._client = (
            client if client is not None else shared_client(url, socket_timeout=SOCKET_TIMEOUT_S)
        )

    def put(self, field: str, text: str) -> None:
        """Set ``field`` to ``text`` and renew the run's TTL (one round trip)."""
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(self.name, field, text.encode("utf-8"))
        if self.ttl_s > 0:
            pipe.expire(self.name, self.ttl_s)
        self._call(pipe.execute)

    def get(self, field: str) -> str | None:
        raw = self._call(self._client.hget, self.name, field)
        return None if raw is None else bytes(raw).decode("utf-8")

    def fields(self) -> list[str]:
        raw = self._call(self._client.hkeys, self.name)
        return [bytes(f).decode("utf-8") for f in raw]

    def drop(self) -> None:
        """Delete the run's hash (the run is over)."""
        self._call(self._client.unlink, self.name)

    def ttl(self) -> int:
        """Seconds the hash has left (-2: gone; -1: no expiry)."""
        return int(self._call(self._client.ttl, self.name))

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            raise StoreError(
                f"the blackboard's Redis at {self.where} does not answer "
                f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})",
                "start Redis (redis_url), or set mind_backend = 'local'",
            ) from None
