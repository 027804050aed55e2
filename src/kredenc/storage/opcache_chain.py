"""Two operation-cache tiers as one: a shared hot tier over the store's file tier.

:class:`TierChain` is itself a :class:`~kredenc.storage.base.CacheTier`, so the
in-process LRU of :class:`kredenc.loop.cache.OpCache` sits over it unchanged: the
chain is LRU → ``upper`` (Redis) → ``lower`` (``opcache.db``, or the
``opcache_entries`` table with ``backend = "postgres"``: ``storage/postgres/opcache.py``).
A get asks the upper tier first; a value found only in the lower tier is copied up
(backfill), so the next process, or this one after its LRU dropped it, finds it in the
upper tier. A put goes to both; a clear empties both; a listener hears either being
emptied.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kredenc.config import Settings
from kredenc.errors import MissingExtra
from kredenc.storage.base import CacheTier
from kredenc.storage.opcache import SqliteTier
from kredenc.storage.opcache_redis import RedisTier
from kredenc.storage.redis_client import shared_id


class TierChain:
    """``upper`` over ``lower``, with backfill upward (counted in :attr:`backfills`)."""

    def __init__(self, upper: CacheTier, lower: CacheTier) -> None:
        self.upper = upper
        self.lower = lower
        self.backfills = 0

    @property
    def epoch(self) -> int:
        # Each tier's epoch only grows, so their sum grows when either is emptied.
        return self.upper.epoch + self.lower.epoch

    def get(self, kind: str, key: str) -> str | None:
        found = self.upper.get(kind, key)
        if found is not None:
            return found
        found = self.lower.get(kind, key)
        if found is not None:
            self.upper.put(kind, key, found)
            self.backfills += 1
        return found

    def put(self, kind: str, key: str, value: str) -> None:
        self.upper.put(kind, key, value)
        self.lower.put(kind, key, value)

    def clear(self) -> None:
        self.upper.clear()
        self.lower.clear()

    def listen(self, on_clear: Callable[[], None]) -> None:
        self.upper.listen(on_clear)
        self.lower.listen(on_clear)

    def close(self) -> None:
        try:
            self.upper.close()
        finally:
            self.lower.close()


def tiers_for_store(
    settings: Settings, home: Path, log_id: str, *, read_only: bool, even_off: bool = False
) -> CacheTier | None:
    """The persistent tiers under a store's LRU: the cold tier (``opcache.db``, or the
    PostgreSQL table with ``backend = "postgres"``; none when ``opcache_disk_bytes`` is
    0), under Redis when ``opcache_redis_url`` is set. None when ``opcache`` is off,
    unless ``even_off`` (a purge empties them all the same)."""
    if not settings.opcache and not even_off:
        return None
    lower = cold_tier(settings, home, read_only=read_only)
    url = settings.opcache_redis_url.get_secret_value()
    if not url:
        return lower
    upper = RedisTier(
        url,
        store=shared_id(log_id, home, backend=settings.backend),
        prefix=settings.opcache_redis_prefix,
        ttl_s=settings.opcache_redis_ttl_s,
        max_value_bytes=settings.opcache_redis_value_bytes,
        read_only=read_only,
    )
    return upper if lower is None else TierChain(upper, lower)


def cold_tier(settings: Settings, home: Path, *, read_only: bool) -> CacheTier | None:
    """The store's persistent tier: ``opcache.db`` in the store directory, or with
    ``backend = "postgres"`` the ``opcache_entries`` table in the store's schema (every
    process of the store shares it); None when ``opcache_disk_bytes`` is 0."""
    if settings.opcache_disk_bytes <= 0:
        return None
    if settings.backend == "postgres":
        try:
            from kredenc.storage.postgres.opcache import PostgresTier
        except ImportError:
            raise MissingExtra("backend = 'postgres'", "postgres") from None
        return PostgresTier(
            settings.postgres_dsn.get_secret_value(),
            settings.postgres_schema,
            read_only=read_only,
            max_bytes=settings.opcache_disk_bytes,
        )
    return SqliteTier.for_store(home, read_only=read_only, max_bytes=settings.opcache_disk_bytes)
