"""The Redis tier of the operation cache against the real Redis on loopback: the
CacheTier conformance suite unchanged, keys per store, the size bound, TTL, a Redis
that is down, and the chain over the file tier (backfill upward)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from kredenc.storage import opcache_redis
from kredenc.storage.base import CacheTier
from kredenc.storage.opcache import SqliteTier
from kredenc.storage.opcache_chain import TierChain
from kredenc.storage.opcache_redis import RedisTier, redacted, store_id
from kredenc.testing.conformance import CacheTierConformance
from kredenc.testing.redis import closed_port_url

pytestmark = pytest.mark.integration


class TestRedisTier(CacheTierConformance):
    @pytest.fixture(autouse=True)
    def _redis(self, redis_prefix: str, redis_url: str) -> None:
        self.prefix, self.url = redis_prefix, redis_url

    def make_tier(self, path: Path) -> CacheTier:
        return RedisTier(self.url, store=store_id("conformance", path), prefix=self.prefix)


def test_two_stores_never_share_entries_even_a_copied_one(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    a = RedisTier(redis_url, store=store_id("log1", tmp_path / "a"), prefix=redis_prefix)
    copy = RedisTier(redis_url, store=store_id("log1", tmp_path / "copy"), prefix=redis_prefix)
    other = RedisTier(redis_url, store=store_id("log2", tmp_path / "a"), prefix=redis_prefix)
    same = RedisTier(redis_url, store=store_id("log1", tmp_path / "a"), prefix=redis_prefix)
    try:
        a.put("search", "k", "from a")
        assert copy.get("search", "k") is None and other.get("search", "k") is None
        assert same.get("search", "k") == "from a"  # a second process on the same store
        copy.put("search", "k2", "from copy")
        a.clear()  # clears a's keys only
        assert same.get("search", "k") is None and copy.get("search", "k2") == "from copy"
    finally:
        for t in (a, copy, other, same):
            t.close()


def test_values_are_the_file_tiers_bytes_with_a_ttl_and_a_size_bound(
    redis_url: str, redis_prefix: str, redis_client: redis.Redis
) -> None:
    tier = RedisTier(redis_url, store="s", prefix=redis_prefix, ttl_s=60, max_value_bytes=100)
    try:
        tier.put("llm", "k", '{"text": "naïve"}')
        assert redis_client.get(tier.name("llm", "k")) == '{"text": "naïve"}'.encode()
        assert 0 < redis_client.ttl(tier.name("llm", "k")) <= 60
        tier.put("llm", "big", "x" * 101)  # over the bound: not stored, no error
        assert tier.get("llm", "big") is None and not redis_client.exists(tier.name("llm", "big"))
    finally:
        tier.close()
    forever = RedisTier(redis_url, store="s", prefix=redis_prefix, ttl_s=0)
    try:
        forever.put("llm", "k", "1")
        assert redis_client.ttl(forever.name("llm", "k")) == -1  # no expiry: Redis evicts it
    finally:
        forever.close()


def test_a_prefix_with_glob_characters_clears_only_its_own_keys(
    redis_url: str, redis_prefix: str, redis_client: redis.Redis
) -> None:
    starred = RedisTier(redis_url, store="s", prefix=redis_prefix + "a*")
    plain = RedisTier(redis_url, store="s", prefix=redis_prefix + "ab")
    try:
        starred.put("search", "k", "1")
        plain.put("search", "k", "2")
        starred.clear()
        assert starred.get("search", "k") is None and plain.get("search", "k") == "2"
    finally:
        starred.close()
        plain.close()


def test_a_read_only_handle_reads_but_never_writes_or_deletes(
    redis_url: str, redis_prefix: str
) -> None:
    writer = RedisTier(redis_url, store="s", prefix=redis_prefix)
    reader = RedisTier(redis_url, store="s", prefix=redis_prefix, read_only=True)
    try:
        writer.put("search", "k", "1")
        reader.put("search", "r", "2")
        epoch = reader.epoch
        reader.clear()
        assert reader.epoch > epoch  # its LRU is dropped ...
        assert reader.get("search", "k") == "1"  # ... but the shared entries stay
        assert writer.get("search", "r") is None
    finally:
        writer.close()
        reader.close()


def test_a_redis_that_is_down_is_a_quick_miss_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tier = RedisTier(closed_port_url(), store="s")
    try:
        with caplog.at_level(logging.WARNING, logger="kredenc.storage.opcache_redis"):
            started = time.perf_counter()
            for i in range(50):
                tier.put("search", f"k{i}", "1")
                assert tier.get("search", f"k{i}") is None
            tier.clear()
            elapsed = time.perf_counter() - started
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "does not answer" in warnings[0].getMessage()
        assert elapsed < 2.0  # one failed connect, then no network call until RETRY_S
    finally:
        tier.close()


def test_the_url_is_a_secret_in_log_lines() -> None:
    assert redacted("redis://:hunter2@10.0.0.5:6380/1") == "redis://10.0.0.5:6380"
    assert "hunter2" not in redacted("redis://user:hunter2@h/0")
    # A socket has a path, not a port (it once read unix:///run/redis.sock:6379).
    assert redacted("unix://:hunter2@/run/redis.sock?db=1") == "unix:///run/redis.sock"
    assert redacted("rediss://[::1]/0") == "rediss://[::1]:6379"


def test_the_chain_backfills_a_file_tier_hit_into_redis(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    lower = SqliteTier(tmp_path / "opcache.db")
    upper = RedisTier(redis_url, store="s", prefix=redis_prefix)
    chain = TierChain(upper, lower)
    try:
        lower.put("judge", "k", '{"confidence_score": 90}')  # written before Redis was set
        assert upper.get("judge", "k") is None
        assert chain.get("judge", "k") == '{"confidence_score": 90}'
        assert upper.get("judge", "k") == '{"confidence_score": 90}' and chain.backfills == 1
        chain.put("llm", "k", "2")
        assert (upper.get("llm", "k"), lower.get("llm", "k")) == ("2", "2")
        told: list[int] = []
        chain.listen(lambda: told.append(1))
        epoch = chain.epoch
        chain.clear()
        assert chain.epoch > epoch and told
        assert upper.get("llm", "k") is None and lower.get("llm", "k") is None
    finally:
        chain.close()


def test_the_chain_runs_the_conformance_suite_too(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    class TestChain(CacheTierConformance):
        def make_tier(self, path: Path) -> CacheTier:
            upper = RedisTier(redis_url, store=store_id("chain", path), prefix=redis_prefix)
            return TierChain(upper, SqliteTier(path / "opcache.db"))

    suite = TestChain()
    for name in dir(suite):
        if name.startswith("test_"):
            getattr(suite, name)(tmp_path / name)


def test_a_url_that_is_not_redis_turns_the_tier_off_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="kredenc.storage.opcache_redis"):
        tier = RedisTier("http://:hunter2@127.0.0.1:6379/0", store="s")
    tier.put("search", "k", "1")
    assert tier.get("search", "k") is None
    tier.clear()
    tier.close()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "is not a Redis URL" in line and "the tier is off" in line
    assert "hunter2" not in line and "127.0.0.1:6379" in line


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server binary")
def test_a_redis_that_comes_back_is_used_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setattr(opcache_redis, "RETRY_S", 0.2)
    url = closed_port_url()
    port = url.rsplit(":", 1)[1].split("/")[0]
    tier = RedisTier(url, store="s")
    server = None
    try:
        with caplog.at_level(logging.INFO, logger="kredenc.storage.opcache_redis"):
            assert tier.get("search", "k") is None  # down: the one warning
            server = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    port,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(tmp_path),
                ],
                stdout=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                tier.put("search", "k", "1")
                if tier.get("search", "k") == "1":
                    break
                time.sleep(0.05)
            assert tier.get("search", "k") == "1"
        levels = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
        assert levels[0][0] == "WARNING" and levels[-1] == (
            "INFO",
            f"operation cache: Redis at redis://127.0.0.1:{port} answers again",
        )
        assert sum(1 for lvl, _ in levels if lvl == "WARNING") == 1
    finally:
        tier.close()
        if server is not None:
            server.terminate()
            server.wait(10)
