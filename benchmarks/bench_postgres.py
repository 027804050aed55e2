"""The PostgreSQL backend against the file backend on the same store: filing speed,
search latency per mode, and how often both return the same top 10.

Both stores get ``benchmarks/corpus.py``'s memories (``--n``) filed with
``remember_many`` in batches of 500 (durability "batch"), embedded by the
deterministic ``HashEmbedder`` (384-d; no model is loaded, so the figures are the
storage's and the same vectors reach both backends), then answer the corpus's
questions (``--queries``, distinct texts) in each mode: hybrid, lexical, dense. The
PostgreSQL is the one ``kredenc.testing.postgres`` starts (loopback, fsync off, as in
the tests), unless ``--dsn`` names another.

    python benchmarks/bench_postgres.py --quick         # n=2,000, 100 queries
    python benchmarks/bench_postgres.py --n 20000       # writes results/postgres.json

"Same top 10" counts the queries whose ten hits (as sets of texts) are equal on both
backends; "top-1 equal" the queries whose first hit is.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import percentile, print_table, write_results
from corpus import memories, queries
from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import PostgresServer

MODES = ("hybrid", "lexical", "dense")


def run(path: Path, texts: Sequence[str], qs: Sequence[str], **options: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Kredenc.open(path, embedder=HashEmbedder(dim=384), durability="batch", **options) as kb:
        started = time.perf_counter()
        for start in range(0, len(texts), 500):
            kb.remember_many([{"text": t} for t in texts[start : start + 500]])
        took = time.perf_counter() - started
        out["file_per_s"] = round(len(texts) / took, 1)
        for mode in MODES:
            kb.search(qs[0], k=10, mode=mode)  # warm: connections, shards, plans
            times, tops = [], []
            for q in qs:
                t0 = time.perf_counter()
                hits = kb.search(q, k=10, mode=mode)
                times.append((time.perf_counter() - t0) * 1000)
                tops.append([h.text for h in hits])
            out[mode] = {
                "p50_ms": round(percentile(times, 50), 2),
                "p95_ms": round(percentile(times, 95), 2),
                "tops": tops,
            }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="n=2,000, 100 queries")
    parser.add_argument("--dsn", default="", help="a PostgreSQL with pgvector (default: start one)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here instead")
    args = parser.parse_args(argv)
    n, m = (2_000, 100) if args.quick else (args.n, args.queries)
    texts = memories(n)
    qs = [q for q, _ in queries(m, n=n)]
    server = None if args.dsn else PostgresServer().start()
    try:
        dsn = args.dsn or (server.create_database("bench") if server else "")
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = run(Path(tmp) / "sqlite", texts, qs)
            pg = run(
                Path(tmp) / "pg",
                texts,
                qs,
                backend="postgres",
                postgres_dsn=dsn,
                postgres_schema="bench",
            )
    finally:
        if server is not None:
            server.stop()
    rows = []
    results: dict[str, Any] = {"n": n, "queries": m, "embedder": "HashEmbedder(384)"}
    for mode in MODES:
        a, b = sqlite[mode], pg[mode]
        same10 = sum(set(x) == set(y) for x, y in zip(a["tops"], b["tops"], strict=True))
        same1 = sum(x[:1] == y[:1] for x, y in zip(a["tops"], b["tops"], strict=True))
        row = {
            "mode": mode,
            "sqlite p50 ms": a["p50_ms"],
            "sqlite p95 ms": a["p95_ms"],
            "postgres p50 ms": b["p50_ms"],
            "postgres p95 ms": b["p95_ms"],
            "same top 10": f"{same10}/{m}",
            "top-1 equal": f"{same1}/{m}",
        }
        rows.append(row)
        results[mode] = {k: v for k, v in row.items() if k != "mode"}
    results["file_per_s"] = {"sqlite": sqlite["file_per_s"], "postgres": pg["file_per_s"]}
    print_table(f"PostgreSQL vs SQLite, {n} memories, {m} queries", rows)
    print(f"\nfiling (remember_many, 500 a batch): {results['file_per_s']} records/s")
    if args.out is not None:
        import json

        args.out.write_text(json.dumps(results, indent=2) + "\n")
    elif not args.quick:
        write_results("postgres", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
