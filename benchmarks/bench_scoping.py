"""What the scope, tag and meta filters cost: search and listing latency with and without
them, and the index space ``tags`` and ``meta`` take (docs/scoping.md).

A store of ``--n`` memories (default 100,000) is filed with the deterministic
``HashEmbedder`` (no model: the filters' cost is in SQL and in the dense leg's deeper
fetch, not in the embedding), spread over 100 users (1 % each), 5 agents, 20 tags (two
per memory) and ``meta`` with a ``project`` (10 values) and a ``priority`` (0-4). Each
query runs ``--runs`` times with distinct words; the table shows p50 and p95 in ms.

    .venv/bin/python benchmarks/bench_scoping.py               # n=100,000
    .venv/bin/python benchmarks/bench_scoping.py --n 5000      # a quick look

Writes benchmarks/results/scoping.json.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import median, percentile, write_results
from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder

WORDS = [f"w{i}" for i in range(2000)]
FILTERS: dict[str, dict[str, Any]] = {
    "none": {},
    "user_id (1 %)": {"user_id": "u7"},
    "agent_id (20 %)": {"agent_id": "a2"},
    "tag (10 %)": {"tags": ["t3"]},
    "two tags (~0.5 %)": {"tags": ["t3", "t4"]},
    "where project (10 %)": {"where": {"project": "p5"}},
    "where project+priority (2 %)": {"where": {"project": "p5", "priority": 2}},
    "user_id + where (0.1 %)": {"user_id": "u7", "where": {"project": "p5"}},
}


def build(kb: Kredenc, n: int, rng: random.Random) -> float:
    started = time.perf_counter()
    for start in range(0, n, 1000):
        items = []
        for i in range(start, min(n, start + 1000)):
            tag = i % 20
            items.append(
                {
                    "text": " ".join(rng.choices(WORDS, k=12)),
                    "user_id": f"u{i % 100}",
                    "agent_id": f"a{i % 5}",
                    "tags": [f"t{tag}", f"t{(tag + 1) % 20}"],
                    "meta": {"project": f"p{i % 10}", "priority": (i // 10) % 5},
                }
            )
        kb.remember_many(items)
    return time.perf_counter() - started


def timed(fn: Any, runs: int) -> dict[str, float]:
    ms = []
    for r in range(runs):
        t = time.perf_counter()
        fn(r)
        ms.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": round(median(ms), 2), "p95_ms": round(percentile(ms, 95), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(0)
    out: dict[str, Any] = {"n": args.n, "runs": args.runs, "search": {}, "list": {}}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "store"
        with Kredenc.open(home, embedder=HashEmbedder(), durability="none") as kb:
            out["build_s"] = round(build(kb, args.n, rng), 1)
        with Kredenc.open(home, embedder=HashEmbedder(), read_only=True) as kb:
            conn = kb.index.reader()  # type: ignore[attr-defined]
            tags, meta = conn.execute(
                "SELECT sum(length(tags)), sum(length(meta)) FROM records"
            ).fetchone()
            out["index_bytes"] = (home / "index.db").stat().st_size
            out["tags_bytes"], out["meta_bytes"] = int(tags), int(meta)
            queries = [" ".join(rng.choices(WORDS, k=3)) for _ in range(args.runs)]
            kb.search(queries[0], mode="dense")  # load the shards once
            for name, filters in FILTERS.items():
                row = {}
                for mode in ("lexical", "dense", "hybrid"):
                    row[mode] = timed(
                        lambda r, m=mode, f=filters: kb.search(queries[r], k=10, mode=m, **f),
                        args.runs,
                    )
                out["search"][name] = row
            listings: dict[str, dict[str, Any]] = {
                "none": {},
                "user_id": {"user_id": "u7"},
                "tag": {"tags": ["t3"]},
            }
            for name, filters in listings.items():
                out["list"][name] = timed(
                    lambda _r, f=filters: kb.list_memories(limit=50, **f), args.runs
                )
    size, tags, meta = (out[k] / 1e6 for k in ("index_bytes", "tags_bytes", "meta_bytes"))
    print(f"n={args.n}  build {out['build_s']} s  index {size:.1f} MB")
    print(f"  of which tags {tags:.1f} MB and meta {meta:.1f} MB as JSON text")
    print(f"{'filter':<30} {'lexical p50/p95':>16} {'dense p50/p95':>16} {'hybrid p50/p95':>16}")
    for name, row in out["search"].items():
        cells = [f"{row[m]['p50_ms']:.1f}/{row[m]['p95_ms']:.1f}" for m in row]
        print(f"{name:<30} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16}")
    for name, t in out["list"].items():
        print(f"list_memories {name:<16} p50 {t['p50_ms']:.1f} ms  p95 {t['p95_ms']:.1f} ms")
    write_results("scoping", out)


if __name__ == "__main__":
    main()
