"""The operation cache with its Redis tier, through real asks on a real store: a
fresh handle (a cold LRU, as in a second process) hits what the first one put in
Redis, a Redis hit lands in the LRU, and a Redis that is down never breaks an ask."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from kredenc.engine import Kredenc
from kredenc.loop.cache import cache_for, cached_search
from kredenc.loop.tool import Services
from kredenc.storage.opcache_chain import TierChain
from kredenc.storage.opcache_redis import RedisTier
from kredenc.testing.redis import closed_port_url

pytestmark = pytest.mark.integration

OpenStore = Callable[..., Kredenc]
QUESTION = "How many attention heads does the Transformer use?"


def _seed(kb: Kredenc) -> None:
    for text in (
        "The Transformer uses h = 8 parallel attention heads.",
        "The big model reaches 28.4 BLEU on WMT 2014 English-German.",
        "Adam with beta1 = 0.9 and beta2 = 0.98 was the optimizer.",
    ):
        kb.remember(text)


def _hits(kb: Kredenc) -> int:
    answer = kb.ask(QUESTION)
    assert answer.text
    return sum(s.cache_hits for s in answer.trace)


def test_a_fresh_handle_hits_what_the_first_put_in_redis(
    open_store: OpenStore, redis_url: str, redis_prefix: str
) -> None:
    # No file tier: a hit on the second open can only come from Redis.
    opts = {
        "opcache_redis_url": redis_url,
        "opcache_redis_prefix": redis_prefix,
        "opcache_disk_bytes": 0,
    }
    with open_store(**opts) as kb:
        assert isinstance(kb.store.opcache_tier(), RedisTier)
        _seed(kb)
        assert _hits(kb) == 0
    with open_store(**opts) as kb:
        cache = cache_for(kb.store)
        assert cache is not None and cache.lru.stats()["entries"] == 0
        assert _hits(kb) >= 2  # the searches and the deterministic roles' results
        stats = cache.stats()["kinds"]
        assert sum(k["backfills"] for k in stats.values()) >= 2  # Redis hits land in the LRU
        backfilled = sum(k["backfills"] for k in stats.values())
        _hits(kb)  # the third ask is served by the LRU: no further backfill
        assert sum(k["backfills"] for k in cache.stats()["kinds"].values()) == backfilled


def test_a_second_process_hits_redis(
    open_store: OpenStore, store_dir: Path, redis_url: str, redis_prefix: str
) -> None:
    opts = {
        "opcache_redis_url": redis_url,
        "opcache_redis_prefix": redis_prefix,
        "opcache_disk_bytes": 0,
    }
    with open_store(**opts) as kb:
        _seed(kb)
        _hits(kb)
    script = textwrap.dedent(
        f"""
        from kredenc.engine import Kredenc
        from kredenc.testing.embedders import HashEmbedder
        with Kredenc.open({str(store_dir)!r}, embedder=HashEmbedder(), durability="none",
                          opcache_redis_url={redis_url!r}, opcache_redis_prefix={redis_prefix!r},
                          opcache_disk_bytes=0) as kb:
            answer = kb.ask({QUESTION!r})
            print(sum(s.cache_hits for s in answer.trace))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().splitlines()[-1]) >= 2


def test_the_file_tier_sits_under_redis(
    open_store: OpenStore, redis_url: str, redis_prefix: str
) -> None:
    with open_store() as kb:  # no Redis yet: the results go to opcache.db only
        _seed(kb)
        _hits(kb)
    with open_store(opcache_redis_url=redis_url, opcache_redis_prefix=redis_prefix) as kb:
        tier = kb.store.opcache_tier()
        assert isinstance(tier, TierChain)
        assert _hits(kb) >= 2
        assert tier.backfills >= 2  # file-tier hits copied up into Redis


def test_a_redis_that_is_down_never_breaks_an_ask(
    open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="kredenc.storage.opcache_redis"),
        open_store(opcache_redis_url=closed_port_url(), opcache_disk_bytes=0) as kb,
    ):
        _seed(kb)
        assert _hits(kb) == 0
        assert _hits(kb) >= 1  # the in-process LRU still serves
    warnings = [r for r in caplog.records if r.name == "kredenc.storage.opcache_redis"]
    assert len(warnings) == 1 and "does not answer" in warnings[0].getMessage()


def _values_holding(url: str, prefix: str, needle: bytes) -> int:
    client = redis.Redis.from_url(url)
    try:
        names = list(client.scan_iter(match=prefix + "*", count=500))
        return sum(1 for n in names if needle in (client.get(n) or b""))
    finally:
        client.close()


def test_a_purge_erases_forgotten_text_from_redis_even_from_a_fresh_handle(
    open_store: OpenStore, redis_url: str, redis_prefix: str
) -> None:
    opts = {"opcache_redis_url": redis_url, "opcache_redis_prefix": redis_prefix}
    with open_store(**opts) as kb:
        secret = kb.remember("the vault code is zebracanary 4921").id
        kb.remember("an ordinary note about the garden")
        services = Services(
            store=kb.store, ns=kb.namespace, settings=kb.settings, cache=cache_for(kb.store)
        )
        assert secret in [h.id for h in cached_search(services, "vault code", k=2)]
        kb.forget(secret)
    assert (
        _values_holding(redis_url, redis_prefix, b"zebracanary") >= 1
    )  # the search's hits hold it
    with open_store(**opts) as kb:  # a CLI's `compact --purge`: it never used the cache
        kb.compact(purge=True)
    assert _values_holding(redis_url, redis_prefix, b"zebracanary") == 0
