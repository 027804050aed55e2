"""The operation cache's cold tier on PostgreSQL: the CacheTier conformance suite
unchanged, another process's clear seen on the next lookup, the bound, a read-only
handle, a server that does not answer, and with ``backend = "postgres"`` the chain
LRU → Redis → PostgreSQL with backfill on a cold hit."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.loop.cache import cache_for
from kredenc.storage import layout
from kredenc.storage.base import CacheTier
from kredenc.storage.opcache_chain import TierChain
from kredenc.storage.opcache_redis import RedisTier
from kredenc.testing.conformance import CacheTierConformance
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import require

pytestmark = pytest.mark.postgres

require()

import psycopg  # noqa: E402

from kredenc.storage.postgres import opcache  # noqa: E402
from kredenc.storage.postgres.opcache import PostgresTier  # noqa: E402


def schema_for(path: Path) -> str:
    return "t_opc_" + hashlib.blake2b(str(path).encode(), digest_size=12).hexdigest()


class TestPostgresTier(CacheTierConformance):
    @pytest.fixture(autouse=True)
    def _dsn(self, postgres_dsn: str) -> None:
        self.dsn = postgres_dsn

    def make_tier(self, path: Path) -> CacheTier:
        return PostgresTier(self.dsn, schema_for(path))


@pytest.fixture
def tiers(postgres_dsn: str, tmp_path: Path) -> Iterator[Callable[..., PostgresTier]]:
    made: list[PostgresTier] = []

    def make(**kw: Any) -> PostgresTier:
        tier = PostgresTier(postgres_dsn, schema_for(tmp_path), **kw)
        made.append(tier)
        return tier

    yield make
    for tier in made:
        tier.close()


def test_another_process_clearing_empties_this_one_at_its_next_lookup(
    tiers: Callable[..., PostgresTier],
) -> None:
    mine, theirs = tiers(), tiers()
    told: list[int] = []
    mine.listen(lambda: told.append(1))
    mine.put("search", "k", "1")
    assert mine.get("search", "k") == "1"
    epoch = mine.epoch
    theirs.clear()
    assert mine.get("search", "other") is None  # any lookup reads the table's epoch
    assert mine.epoch > epoch and told == [1]
    assert mine.get("search", "k") is None
    mine.get("search", "k")
    assert told == [1]  # told once per clear, not on every lookup


def test_past_the_bound_the_oldest_entries_go(
    tiers: Callable[..., PostgresTier], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opcache, "PRUNE_EVERY", 10)
    tier = tiers(max_bytes=1000)
    for i in range(40):
        tier.put("llm", f"k{i:02d}", "x" * 100)
    stats = tier.stats()
    assert stats["bytes"] <= 1000 and stats["entries"] < 40
    assert tier.get("llm", "k39") == "x" * 100  # the newest stay
    assert tier.get("llm", "k00") is None


def test_a_read_only_handle_reads_but_never_writes_or_empties(
    tiers: Callable[..., PostgresTier],
) -> None:
    writer, reader = tiers(), tiers(read_only=True)
    writer.put("judge", "k", "1")
    reader.put("judge", "r", "2")
    epoch = reader.epoch
    reader.clear()
    assert reader.epoch > epoch  # its LRU is dropped ...
    assert reader.get("judge", "k") == "1" and writer.get("judge", "r") is None  # ... only


def test_a_nul_in_a_value_comes_back(tiers: Callable[..., PostgresTier]) -> None:
    tier = tiers()
    tier.put("llm", "k", "a\x00b")
    assert tier.get("llm", "k") == "a\x00b"


def test_a_server_that_does_not_answer_is_a_quick_miss_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tier = PostgresTier("host=127.0.0.1 port=1 user=nobody connect_timeout=1", "kredenc")
    try:
        with caplog.at_level(logging.WARNING, logger="kredenc.storage.postgres.opcache"):
            started = time.perf_counter()
            for i in range(30):
                tier.put("search", f"k{i}", "1")
                assert tier.get("search", f"k{i}") is None
            tier.clear()
            elapsed = time.perf_counter() - started
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "does not answer" in warnings[0], warnings
        assert elapsed < 5.0
    finally:
        tier.close()


@pytest.fixture
def pg(postgres_dsn: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    return {
        "backend": "postgres",
        "postgres_dsn": postgres_dsn,
        "postgres_schema": "t_opcs_" + request.node.name.lower()[:40],
        "durability": "none",
    }


def _count(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {schema}.opcache_entries").fetchone()
        assert row is not None
        return int(row[0])


def test_a_postgres_store_caches_in_its_schema_and_a_rebuild_empties_it(
    tmp_path: Path, pg: dict[str, Any]
) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), **pg) as kb:
        kb.remember("The Transformer uses h = 8 parallel attention heads.")
        assert kb.ask("How many attention heads does the Transformer use?").text
        assert not (tmp_path / "s" / layout.OPCACHE_FILE).exists()  # no file tier
        assert _count(pg["postgres_dsn"], pg["postgres_schema"]) > 0
        kb.rebuild()
        assert _count(pg["postgres_dsn"], pg["postgres_schema"]) == 0


def test_the_chain_on_postgres_is_lru_redis_postgres_with_backfill(
    tmp_path: Path, pg: dict[str, Any], redis_url: str, redis_prefix: str
) -> None:
    opts = {**pg, "opcache_redis_url": redis_url, "opcache_redis_prefix": redis_prefix}
    question = "How many attention heads does the Transformer use?"
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), **opts) as kb:
        kb.remember("The Transformer uses h = 8 parallel attention heads.")
        kb.ask(question)
        chain = kb.store.opcache_tier()
        assert isinstance(chain, TierChain)
        assert isinstance(chain.upper, RedisTier) and isinstance(chain.lower, PostgresTier)
        chain.upper.clear()  # Redis lost everything (a restart); PostgreSQL kept it
    # A second process on another machine: another store directory, the same schema.
    with Kredenc.open(tmp_path / "other", embedder=HashEmbedder(), **opts) as kb:
        answer = kb.ask(question)
        cold = kb.store.opcache_tier()
        assert isinstance(cold, TierChain) and cold.backfills > 0  # found in PostgreSQL
        assert sum(s.cache_hits for s in answer.trace) > 0
        cache = cache_for(kb.store)
        assert cache is not None
        cache.lru.clear()  # the LRU forgets: the next lookups hit Redis, not PostgreSQL
        backfills = cold.backfills
        kb.ask(question)
        assert cold.backfills == backfills
