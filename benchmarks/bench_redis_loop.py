"""What Redis costs the answer loop and buys sessions (docs/redis.md): the median and
p95 ask with the blackboard in the process and in Redis (``mind_backend``), and a
session's history read from the store against a hit in Redis (the hot copy), on a
store of ``--memories`` memories (the deterministic roles, ``HashEmbedder``, the
operation cache off so every ask runs its roles).

    .venv/bin/python benchmarks/bench_redis_loop.py

Needs the Redis at ``--url``. Writes benchmarks/results/redis-loop.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

from _common import median, percentile, print_table, write_results
from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.redis import key_prefix

QUESTIONS = [f"What does note {i} say about topic {i % 7}?" for i in range(20)]


def _stats(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(median(times), 3), "p95_ms": round(percentile(times, 95), 3)}


def asks(home: str, opts: dict[str, Any], rounds: int) -> dict[str, float]:
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none", **opts) as kb:
        kb.ask("warm up")
        times = []
        for _ in range(rounds):
            for q in QUESTIONS:
                started = time.perf_counter()
                kb.ask(q)
                times.append((time.perf_counter() - started) * 1000)
    return _stats(times)


def history(home: str, opts: dict[str, Any], runs: int) -> dict[str, float]:
    with Kredenc.open(home, embedder=HashEmbedder(), durability="none", **opts) as kb:
        kb.session_history("bench")  # a miss: the copy is made (when there is a cache)
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            kb.session_history("bench")
            times.append((time.perf_counter() - started) * 1000)
    return _stats(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--memories", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home, key_prefix(args.url) as prefix:
        base = {"opcache": False, "ask_file_in_background": False}
        with Kredenc.open(home, embedder=HashEmbedder(), durability="none", **base) as kb:
            for i in range(args.memories):
                kb.remember(f"note {i}: topic {i % 7} is about item {i * 3}, colour {i % 5}")
            kb.file_turns(
                "bench",
                [
                    {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n} " * 20}
                    for n in range(40)
                ],
            )
        redis = {"redis_url": args.url, "redis_prefix": prefix}
        ask_rows = [
            {"mind": "local", **asks(home, base, args.rounds)},
            {
                "mind": "redis",
                **asks(home, {**base, **redis, "mind_backend": "redis"}, args.rounds),
            },
        ]
        hist_rows = [
            {"history of 20": "from the store", **history(home, base, args.runs)},
            {"history of 20": "Redis hit", **history(home, {**base, **redis}, args.runs)},
        ]
    print_table(f"ask, {args.memories} memories, opcache off", ask_rows)
    print_table("session history (20 of 40 messages)", hist_rows)
    write_results("redis-loop", {"memories": args.memories, "asks": ask_rows, "history": hist_rows})


if __name__ == "__main__":
    main()
