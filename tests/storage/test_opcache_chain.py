"""Which persistent tiers a store's operation cache gets (storage/opcache_chain.py):
Redis only with ``opcache_redis_url``, never from ``redis_url`` alone (docs/redis.md)."""

from __future__ import annotations

from pathlib import Path

from kredenc.config import load_settings
from kredenc.storage.opcache import SqliteTier
from kredenc.storage.opcache_chain import TierChain, tiers_for_store
from kredenc.storage.opcache_redis import RedisTier
from kredenc.testing.redis import closed_port_url


def test_redis_url_alone_leaves_the_cache_off_redis_and_its_own_url_puts_it_there(
    tmp_path: Path,
) -> None:
    shared = closed_port_url()  # nothing answers: the tiers are built, never used
    alone = load_settings(tmp_path, redis_url=shared)
    tier = tiers_for_store(alone, tmp_path, "log1", read_only=False)
    assert isinstance(tier, SqliteTier)  # the blackboard's Redis is not the cache's
    tier.close()
    both = load_settings(tmp_path, redis_url=shared, opcache_redis_url=shared)
    chain = tiers_for_store(both, tmp_path, "log1", read_only=False)
    assert isinstance(chain, TierChain) and isinstance(chain.upper, RedisTier)
    assert isinstance(chain.lower, SqliteTier)
    chain.close()
    off = load_settings(tmp_path, redis_url=shared, opcache_disk_bytes=0)
    assert tiers_for_store(off, tmp_path, "log1", read_only=False) is None
