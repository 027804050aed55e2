"""The operation cache's shared hot tier: the same JSON text as ``opcache.db``, in Redis.

A :class:`~kredenc.storage.base.CacheTier` between the in-process LRU and the SQLite
file tier (``kredenc[redis]``, ``opcache_redis_url``): processes that open one store
(a server, its workers, a CLI beside them) share what each one computed, and a fresh
process starts warm. Like every tier it is derived data, so nothing here raises into
an ask:

- A key is ``<prefix><store id>:<kind>:<key>``: the prefix (``opcache_redis_prefix``)
  separates deployments on one Redis, the store id (the log's id and the store's
  path, hashed) separates stores, so a copied store directory, whose log id is the
  same, never reads the other copy's entries once they diverge.
- Values are the UTF-8 bytes of the text the file tier stores, with a TTL
  (``opcache_redis_ttl_s``; 0: none) and a size bound (a larger value is not stored:
  it stays in the tiers beside this one). Redis's own ``maxmemory`` policy bounds the
  total; an ``allkeys-lru`` Redis is the natural home.
- A Redis that is down, slow or refusing is a miss: one WARNING when it goes, then no
  network call for :data:`RETRY_S` seconds (an ask does not wait on a dead socket for
  every lookup), one INFO when it is back. Timeouts are short and redis-py's own
  retries are off: a cache that waits is slower than a miss.
- A read-only store's handle reads but never writes (as with the file tier: a purge
  in the writer must not be undone by a reader putting forgotten text back).
- :meth:`RedisTier.clear` (rebuild, ``compact --purge``) deletes this store's keys
  (SCAN, then UNLINK in batches) and bumps :attr:`RedisTier.epoch`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kredenc.storage.outage import Outage
from kredenc.storage.redis_client import connect, glob_escape, redacted, store_id

log = logging.getLogger(__name__)

#: Seconds a tier that found Redis down stays quiet before it tries again.
RETRY_S = 5.0
CLEAR_BATCH = 500

__all__ = ["RETRY_S", "RedisTier", "redacted", "store_id"]


class RedisTier:
    """Redis as a :class:`~kredenc.storage.base.CacheTier` (thread-safe: redis-py's
    connection pool; an entry costs one GET or one SET)."""

    def __init__(
        self,
        url: str,
        *,
        store: str,
        prefix: str = "kredenc:opcache:",
        ttl_s: int = 86400,
        max_value_bytes: int = 4 * 1024 * 1024,
        read_only: bool = False,
        client: Any = None,
    ) -> None:
        self.where = redacted(url)
        self.read_only = read_only
        self.ttl_s = ttl_s
        self.max_value_bytes = max_value_bytes
        self._base = f"{prefix}{store}:"
        self._epoch = 0
        self._listeners: list[Callable[[], None]] = []
        self._state_lock = threading.Lock()
        self._outage = Outage(
            f"Redis at {self.where}",
            what="operation cache",
            then="its lookups miss",
            log=log,
            retry_s=RETRY_S,
        )
        self._closed = False
        self._client = (
            client
            if client is not None
            else connect(url, self.where, setting="opcache_redis_url", log=log)
        )
        if self._client is None:
            self._closed = True

    @property
    def epoch(self) -> int:
        return self._epoch

    def name(self, kind: str, key: str) -> str:
        """The Redis key of (kind, key)."""
        return f"{self._base}{kind}:{key}"

    # -- the protocol ---------------------------------------------------------
    def get(self, kind: str, key: str) -> str | None:
        if not self._usable():
            return None
        try:
            raw = self._client.get(self.name(kind, key))
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError; any is a miss
            self._failed(exc)
            return None
        self._up()
        if raw is None:
            return None
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            log.warning("%s: an operation cache entry is not UTF-8; a miss", self.where)
            return None

    def put(self, kind: str, key: str, value: str) -> None:
        if self.read_only or not self._usable():
            return
        data = value.encode("utf-8")
        if len(data) > self.max_value_bytes:
            log.debug("%s: a %d-byte %s value is over the bound", self.where, len(data), kind)
            return
        try:
            self._client.set(self.name(kind, key), data, ex=self.ttl_s if self.ttl_s > 0 else None)
        except Exception as exc:  # noqa: BLE001 - see get
            self._failed(exc)
            return
        self._up()

    def clear(self) -> None:
        """Delete this store's keys (a writer; a read-only handle only drops its LRU)."""
        if not self.read_only and self._usable():
            try:
                self._delete_all()
                self._up()
            except Exception as exc:  # noqa: BLE001 - see get
                self._failed(exc)
        self._emptied()

    def listen(self, on_clear: Callable[[], None]) -> None:
        self._listeners.append(on_clear)

    def close(self) -> None:
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._client.close()
        except Exception as exc:  # noqa: BLE001 - closing a dead connection is no error
            log.debug("%s: close: %s", self.where, exc)

    def stats(self) -> dict[str, Any]:
        """Whether Redis answered last time, and this store's entries (a SCAN: for
        ``kredenc check``-like reports, not for the hot path)."""
        if not self._usable():
            return {"up": False, "entries": 0}
        try:
            n = sum(1 for _ in self._client.scan_iter(match=self._pattern(), count=CLEAR_BATCH))
        except Exception as exc:  # noqa: BLE001 - see get
            self._failed(exc)
            return {"up": False, "entries": 0}
        return {"up": True, "entries": n}

    # -- inside -----------------------------------------------------------------
    def _pattern(self) -> str:
        return glob_escape(self._base) + "*"

    def _delete_all(self) -> None:
        batch: list[bytes] = []
        for name in self._client.scan_iter(match=self._pattern(), count=CLEAR_BATCH):
            batch.append(name)
            if len(batch) >= CLEAR_BATCH:
                self._client.unlink(*batch)
                batch = []
        if batch:
            self._client.unlink(*batch)

    def _usable(self) -> bool:
        return not self._closed and self._outage.usable()

    def _failed(self, exc: BaseException) -> None:
        self._outage.failed(exc)

    def _up(self) -> None:
        self._outage.up()

    def _emptied(self) -> None:
        self._epoch += 1
        for on_clear in self._listeners:
            on_clear()
