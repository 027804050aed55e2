"""Per-node capacity: build a store of N memories, then measure search QPS at p95 with
more reader processes (the figures of docs/scale.md).

For one backend (``--backend sqlite`` or ``postgres``) and one size (``--n``):

* build: ``remember_many`` in batches of 1,000 of ``corpus.memories(n)`` with the
  HashEmbedder (384-d vectors made from the words, no model: the figures are the
  storage's, as in bench_postgres.py), ``durability="batch"``; the ingest rate, the
  records and vectors the index holds, and the bytes on disk (the store directory; for
  PostgreSQL the schema's relations).
* search: ``--procs`` (e.g. ``1,2``) processes at once, each opening the store
  (read-only on SQLite: the reader beside the writer; a second handle on PostgreSQL)
  and running ``--queries`` distinct hybrid searches (k=10) back to back; aggregate
  queries/s (all processes' queries over the wall time) and the p50/p95 of every query.

    nice -n 10 .venv/bin/python benchmarks/bench_capacity.py --backend sqlite --n 100000
    nice -n 10 .venv/bin/python benchmarks/bench_capacity.py --backend postgres --n 100000

``--keep DIR`` builds the store in DIR and keeps it; a later run with the same DIR skips
the build and measures the search again (a 1,000,000-memory build takes most of an hour
here, so it can run while the machine is busy and the searches when it is quiet). Each
search process reports its peak RSS (``VmHWM``): the memory one reader needs.

    nice -n 10 .venv/bin/python benchmarks/bench_capacity.py --n 1000000 --keep /tmp/cap1m

Prints a table and writes ``benchmarks/results/capacity-<backend>-<n>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import peak_rss_mb, percentile, print_table, write_results
from corpus import memories, queries
from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder

BATCH = 1000


def _options(backend: str, dsn: str) -> dict[str, Any]:
    if backend == "postgres":
        return {"backend": "postgres", "postgres_dsn": dsn, "postgres_schema": "capacity"}
    return {}


def _hnsw(dsn: str, *, create: bool) -> float:
    """PostgreSQL bulk load (``--defer-hnsw``): drop the vectors' HNSW index before the
    build, create it after (pgvector's advice for loading many vectors: each insert
    into a live graph walks it). Seconds the statement took."""
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO capacity, public")
        if create:
            conn.execute("SET maintenance_work_mem = '3GB'")
            conn.execute(
                "CREATE INDEX IF NOT EXISTS vectors_hnsw ON vectors USING hnsw (vec vector_ip_ops)"
            )
        else:
            conn.execute("DROP INDEX IF EXISTS vectors_hnsw")
    return time.perf_counter() - started


def build(
    home: Path, n: int, options: dict[str, Any], *, defer_hnsw: bool = False
) -> dict[str, Any]:
    texts = memories(n)
    with Kredenc.open(home, embedder=HashEmbedder(dim=384), durability="batch", **options) as kb:
        dsn = options.get("postgres_dsn", "")
        if defer_hnsw:
            _hnsw(dsn, create=False)
        started = time.perf_counter()
        for start in range(0, n, BATCH):
            kb.remember_many([{"text": t} for t in texts[start : start + BATCH]])
            if start and start % 100_000 == 0:
                print(f"  {start:,} filed, {time.perf_counter() - started:.0f} s", flush=True)
        took = time.perf_counter() - started
        hnsw_s = _hnsw(dsn, create=True) if defer_hnsw else None
        kb.compact()  # SQLite: one FTS5 segment; PostgreSQL: ANALYZE
        stats = kb.stats()
        shards = kb.store.index.shards()  # SQLite: builds the ANN graphs...
        kb.store.index.save_ann()  # ...and saves them, so each search process loads them
    return {
        "build_s": round(took, 1),
        "ingest_per_s": round(n / took, 1),
        "records": stats["records"],
        "vectors": sum(len(v) for v in shards.values()),
        "log_records": stats["log_records"],
        "peak_rss_mb": round(peak_rss_mb(), 1),
        **({"hnsw_build_s": round(hnsw_s, 1)} if hnsw_s is not None else {}),
    }


def disk_bytes(home: Path, backend: str, dsn: str) -> int:
    if backend == "postgres":
        import psycopg

        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace s ON s.oid = c.relnamespace"
                " WHERE s.nspname = 'capacity' AND c.relkind IN ('r', 'm')"
            ).fetchone()
        return int(row[0]) if row else 0
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())


def searcher(spec: dict[str, Any]) -> None:
    """One search process: open, warm, run its queries, print one JSON line."""
    options = spec["options"]
    read_only = not options  # SQLite: a reader beside the writer
    with Kredenc.open(
        spec["home"], embedder=HashEmbedder(dim=384), read_only=read_only, **options
    ) as kb:
        for q in spec["queries"][:5]:
            kb.search(q, k=10)  # warm: shards, connections, plans
        print("ready", flush=True)
        sys.stdin.readline()  # every process starts together
        times = []
        for q in spec["queries"]:
            t0 = time.perf_counter()
            kb.search(q, k=10)
            times.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"times": times, "rss_mb": peak_rss_mb()}), flush=True)


def search_load(
    home: Path, options: dict[str, Any], qs: Sequence[str], procs: int
) -> dict[str, Any]:
    env = dict(os.environ)
    procs_: list[subprocess.Popen[str]] = []
    for p in range(procs):
        mine = list(qs[p::procs]) if procs > 1 else list(qs)
        spec = {"home": str(home), "options": options, "queries": mine}
        proc = subprocess.Popen(
            [sys.executable, __file__, "--searcher", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        procs_.append(proc)
    for proc in procs_:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"search process failed to start: {line!r}")
    started = time.perf_counter()
    for proc in procs_:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    times: list[float] = []
    rss: list[float] = []
    for proc in procs_:
        out, _ = proc.communicate(timeout=3600)
        result = json.loads(out.strip().splitlines()[-1])
        times += result["times"]
        rss.append(result["rss_mb"])
    wall = time.perf_counter() - started
    return {
        "procs": procs,
        "queries": len(times),
        "qps": round(len(times) / wall, 1),
        "p50_ms": round(percentile(times, 50), 2),
        "p95_ms": round(percentile(times, 95), 2),
        "peak_rss_mb_per_process": round(max(rss), 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


@contextmanager
def _postgres(backend: str, dsn: str) -> Iterator[str]:
    if backend != "postgres" or dsn:
        yield dsn
        return
    from kredenc.testing.postgres import PostgresServer

    with PostgresServer() as server:
        yield server.create_app_database("capacity", role="kredenc")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--procs", default="1,2", help="search processes to try, in turn")
    parser.add_argument("--dsn", default="", help="a PostgreSQL with pgvector (default: start one)")
    parser.add_argument(
        "--keep", type=Path, help="build the store here and keep it; reuse it when it exists"
    )
    parser.add_argument(
        "--defer-hnsw",
        action="store_true",
        help="postgres: file without the HNSW index, then build it (a bulk load)",
    )
    parser.add_argument("--searcher", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.searcher:
        searcher(json.loads(args.searcher))
        return 0
    procs = [int(p) for p in args.procs.split(",") if p.strip()]
    qs = [q for q, _ in queries(args.queries, n=args.n)]
    if args.keep and args.backend != "sqlite":
        parser.error("--keep works with --backend sqlite only (a PostgreSQL is started per run)")
    root = args.keep or Path(tempfile.mkdtemp(prefix="kredenc-capacity-"))
    load_start = round(os.getloadavg()[0], 2)
    try:
        with _postgres(args.backend, args.dsn) as dsn:
            options = _options(args.backend, dsn)
            home = root / "store"
            built_file = root / "built.json"
            if args.keep and built_file.exists():
                built = json.loads(built_file.read_text())
                if built.get("n") != args.n:
                    raise SystemExit(f"{root} holds {built.get('n')} memories, not {args.n}")
                print(f"reusing {root}: {built}", flush=True)
            else:
                built = build(home, args.n, options, defer_hnsw=args.defer_hnsw)
                built["disk_mb"] = round(disk_bytes(home, args.backend, dsn) / 1e6, 1)
                built["n"] = args.n
                built["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
                if args.keep:
                    built_file.write_text(json.dumps(built))
                print(f"built {args.n} memories on {args.backend}: {built}", flush=True)
            rows = [search_load(home, options, qs, p) for p in procs]
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print_table(
        f"{args.backend}, {args.n} memories: build {built['ingest_per_s']} records/s,"
        f" {built['disk_mb']} MB",
        rows,
    )
    write_results(
        f"capacity-{args.backend}-{args.n}",
        {
            "backend": args.backend,
            "n": args.n,
            "embedder": "HashEmbedder(384)",
            "batch": BATCH,
            "load_avg_1m_at_start": load_start,
            "build": built,
            "search": rows,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
