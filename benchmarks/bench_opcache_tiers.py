"""What a lookup costs in each operation-cache tier (docs/cache-and-tracing.md): the
in-process LRU, Redis on loopback, ``opcache.db``, the Redis-over-file chain, and a miss
against a Redis that is down; then what it buys an ask: the median ask on a fresh
handle (a cold LRU: a restarted server, a second process) of a 500-memory store whose
20 questions an earlier handle asked, with nothing persistent, ``opcache.db``, Redis
alone, and Redis over the file.

``--n`` entries of ``--size`` bytes (default 2,000 of 4 KiB: a 12-hit search is ~4-6 KiB)
are put in each tier, then each is read ``--runs`` times at random; the table shows
p50 and p95 in microseconds per get. Needs the Redis at ``--url``.

    .venv/bin/python benchmarks/bench_opcache_tiers.py

Writes benchmarks/results/opcache-tiers.json.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import median, percentile, print_table, write_results
from kredenc.engine import Kredenc
from kredenc.loop.cache import LruTier
from kredenc.storage.base import CacheTier
from kredenc.storage.opcache import SqliteTier
from kredenc.storage.opcache_chain import TierChain
from kredenc.storage.opcache_redis import RedisTier
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.redis import closed_port_url, key_prefix

QUESTIONS = [f"What does note {i} say about topic {i % 7}?" for i in range(20)]


def timed(get: Any, keys: list[str], runs: int, rng: random.Random) -> dict[str, float]:
    times = []
    for _ in range(runs):
        key = rng.choice(keys)
        started = time.perf_counter()
        get("search", key)
        times.append((time.perf_counter() - started) * 1e6)
    return {"p50_us": median(times), "p95_us": percentile(times, 95)}


def cold_ask_ms(opts: dict[str, Any]) -> float:
    """The median ask (ms) on a fresh handle, after another handle asked the same."""
    with tempfile.TemporaryDirectory() as home:
        with Kredenc.open(home, embedder=HashEmbedder(), durability="none", **opts) as kb:
            for i in range(500):
                kb.remember(f"note {i}: topic {i % 7} is about item {i * 3}, colour {i % 5}")
            for q in QUESTIONS:
                kb.ask(q)
        with Kredenc.open(home, embedder=HashEmbedder(), durability="none", **opts) as kb:
            kb.ask("an unrelated first question")  # the handle's own start-up cost
            times = []
            for q in QUESTIONS:
                started = time.perf_counter()
                kb.ask(q)
                times.append((time.perf_counter() - started) * 1000)
    return median(times)


def tier_gets(args: argparse.Namespace, prefix: str) -> list[dict[str, Any]]:
    """p50/p95 of a get in each tier, the chain and a Redis that is down."""
    rng = random.Random(7)
    value = '"' + "x" * (args.size - 2) + '"'
    keys = [uuid.uuid4().hex for _ in range(args.n)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        lru = LruTier(args.n * 2, args.n * args.size * 2)
        redis_tier = RedisTier(args.url, store="bench", prefix=prefix)
        file_tier = SqliteTier(Path(tmp) / "opcache.db")
        chain_file = SqliteTier(Path(tmp) / "chain.db")
        chain = TierChain(RedisTier(args.url, store="chain", prefix=prefix), chain_file)
        tiers: dict[str, Any] = {"lru": lru, "redis": redis_tier, "file": file_tier}
        for name, tier in tiers.items():
            for key in keys:
                tier.put("search", key, value)
            rows.append({"tier": name, **timed(tier.get, keys, args.runs, rng)})
        for key in keys:  # only in the file: each first get backfills Redis
            chain_file.put("search", key, value)
        cold = timed(chain.get, keys[: args.runs], min(args.runs, len(keys)), rng)
        rows.append({"tier": "chain (file hit, backfill)", **cold})
        rows.append({"tier": "chain (redis hit)", **timed(chain.get, keys, args.runs, rng)})
        down = RedisTier(closed_port_url(), store="bench")
        rows.append({"tier": "redis down (miss)", **timed(down.get, keys, args.runs, rng)})
        redis_tier.clear()
        chain.clear()
        for tier in (redis_tier, file_tier, chain, down):
            closing: CacheTier = tier
            closing.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=5000)
    args = ap.parse_args()
    with key_prefix(args.url) as prefix:  # its keys are deleted afterwards
        rows = tier_gets(args, prefix)
        asks: list[dict[str, Any]] = []
        for name, opts in {
            "nothing persistent": {"opcache_disk_bytes": 0},
            "opcache.db": {},
            "redis": {"opcache_disk_bytes": 0, "opcache_redis_url": args.url},
            "redis over opcache.db": {"opcache_redis_url": args.url},
        }.items():
            opts["opcache_redis_prefix"] = f"{prefix}ask-{len(asks)}:"
            asks.append({"persistent tiers": name, "cold_ask_p50_ms": cold_ask_ms(opts)})
    print_table(f"get latency, {args.n} entries of {args.size} B", rows)
    print_table("an ask on a fresh handle (cold LRU)", asks)
    write_results(
        "opcache-tiers",
        {"n": args.n, "size": args.size, "runs": args.runs, "rows": rows, "asks": asks},
    )


if __name__ == "__main__":
    main()
