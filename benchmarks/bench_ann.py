"""Exact search vs ANN indexes on real MiniLM vectors of the benchmark corpus.

Compares, on 100,000 all-MiniLM-L6-v2 vectors of ``benchmarks/corpus.py`` and 500 of its
generated queries (k=10, one query at a time):

* exact search: numpy float32 matvec + argpartition (1 and 2 BLAS threads), usearch's
  SIMD brute force (f32, f16) and sqlite-vec's ``vec0`` (through apsw), at several sizes,
  to place the exact -> ANN threshold;
* ANN: usearch (f32/f16/i8, connectivity 16, expansion_add 64/128, expansion_search
  32-256, build with 2 and 1 threads) and hnswlib (M=16, ef_construction 64/128, ef 32-256):
  build time, latency p50/p95, recall@10 against exact, save/load/view time, size on disk,
  resident memory, incremental add of 1,000 vectors, removal of 1,000, and what concurrent
  searches (and a search during an add) do.

Every case runs in its own subprocess, so memory figures are per case and a crash in one
library is recorded instead of ending the run. Results: a table on stdout and
``benchmarks/results/ann.json``.

    .venv/bin/python benchmarks/bench_ann.py            # full run, ~25-40 min on 2 cores
    .venv/bin/python benchmarks/bench_ann.py --quick    # n=20,000, fewer cases, ~3 min
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

# onnxruntime before usearch: see the note in corpus.py (a segfault otherwise, whenever the
# corpus has to embed something in a process that already imported usearch).
import corpus

K = 10
WARMUP = 20
EXACT_SIZES = (1_000, 5_000, 10_000, 20_000, 50_000, 100_000)
EF_SEARCH = (32, 64, 96, 128, 256)
EXTRA = 1_000  # vectors held out of the index: incremental adds and held-out queries
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "ann.json"

Matrix = npt.NDArray[np.float32]
Keys = npt.NDArray[np.int64]
Result = dict[str, Any]

# --------------------------------------------------------------------------------------
# Measuring helpers (used inside workers)
# --------------------------------------------------------------------------------------


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    """Resident set size of this process, MiB."""
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    """Peak resident set size (high-water mark) of this process, MiB."""
    return _status_mb("VmHWM")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def timed_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (all threads of this process) of ``fn()``.

    On a shared machine the wall time grows with other people's load; the CPU time
    much less so: with one thread it approximates the wall time on an idle machine.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def latencies_ms(search: Callable[[Matrix], Keys], queries: Matrix) -> tuple[Result, Keys]:
    """Run ``search`` on each query alone; return p50/p95/mean (ms) and the found keys."""
    for q in queries[:WARMUP]:
        search(q)
    found = np.full((len(queries), K), -1, dtype=np.int64)
    times = np.empty(len(queries))
    cpu = time.process_time()
    for i, q in enumerate(queries):
        start = time.perf_counter_ns()
        keys = search(q)
        times[i] = (time.perf_counter_ns() - start) / 1e6
        found[i, : len(keys)] = keys[:K]
    cpu = time.process_time() - cpu
    stats = {
        "p50_ms": round(float(np.percentile(times, 50)), 4),
        "p95_ms": round(float(np.percentile(times, 95)), 4),
        "mean_ms": round(float(times.mean()), 4),
        "cpu_ms": round(cpu * 1e3 / len(queries), 4),
    }
    return stats, found


def target_hit(found: Keys, targets: Keys, n: int) -> float:
    """Share of queries (with a target inside the index) whose target is in the top K."""
    inside = targets < n
    hits = (found[inside] == targets[inside, None]).any(axis=1)
    return round(float(hits.mean()), 4)


def recall_at_k(found: Keys, truth: Keys) -> float:
    hits = sum(len(set(f.tolist()) & set(t.tolist())) for f, t in zip(found, truth, strict=True))
    return round(hits / truth.size, 4)


def exact_topk(data: Matrix, queries: Matrix, k: int = K) -> Keys:
    """Exact top-k by inner product (the vectors are L2-normalised: cosine)."""
    scores = queries @ data.T
    part = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.take_along_axis(scores, part, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(part, order, axis=1).astype(np.int64)


class Data:
    """What a worker needs: vectors, queries and the exact answers (from the work dir)."""

    def __init__(self, work: Path, load_vectors: bool = True) -> None:
        meta = json.loads((work / "data.json").read_text())
        self.n: int = meta["n"]
        self.seed: int = meta["seed"]
        self.queries: Matrix = np.load(work / "queries.npy")
        self.heldout: Matrix = np.load(work / "heldout.npy")
        gt = np.load(work / "truth.npz")
        self.truth: dict[str, Keys] = {name: gt[name] for name in gt.files}
        #: the memory each generated query was written from (only those < n count)
        self.targets: Keys = np.load(work / "targets.npy")
        self.vectors: Matrix | None = (
            corpus.vectors(self.n + EXTRA, self.seed) if load_vectors else None
        )

    @property
    def all(self) -> Matrix:
        assert self.vectors is not None
        return self.vectors


def _load(work: Path) -> Data:
    return Data(work)


# --------------------------------------------------------------------------------------
# Workers: exact search
# --------------------------------------------------------------------------------------


def case_exact_numpy(spec: Result, work: Path) -> Result:
    data = _load(work)
    out: Result = {}
    for n in spec["sizes"]:
        matrix = np.ascontiguousarray(data.all[:n])

        def search(q: Matrix, matrix: Matrix = matrix) -> Keys:
            scores = matrix @ q
            top = np.argpartition(-scores, K)[:K]
            return top[np.argsort(-scores[top])]

        stats, found = latencies_ms(search, data.queries)
        path = work / f"exact-{n}.npy"
        np.save(path, matrix)
        load_s = min(timed(lambda path=path: np.load(path)) for _ in range(3))
        path.unlink()
        out[str(n)] = {
            **stats,
            "recall": recall_at_k(found, data.truth[f"q{n}"]),
            "memory_mb": round(matrix.nbytes / 2**20, 1),
            "load_s": round(load_s, 4),
        }
    return out


def case_exact_usearch(spec: Result, work: Path) -> Result:
    from usearch.index import MetricKind, search  # after onnxruntime

    data = _load(work)
    out: Result = {}
    for n in spec["sizes"]:
        np_dtype = {"f32": np.float32, "f16": np.float16}[spec["dtype"]]
        matrix = np.ascontiguousarray(data.all[:n]).astype(np_dtype)
        queries = data.queries.astype(np_dtype)

        def run(q: Matrix, matrix: Matrix = matrix) -> Keys:
            return search(matrix, q, K, MetricKind.Cos, exact=True, threads=1).keys

        stats, found = latencies_ms(run, queries)
        out[str(n)] = {
            **stats,
            "recall": recall_at_k(found, data.truth[f"q{n}"]),
            "memory_mb": round(matrix.nbytes / 2**20, 1),
        }
    return out


def case_sqlite_vec(spec: Result, work: Path) -> Result:
    import apsw  # measurement-only dependency
    import sqlite_vec

    data = _load(work)
    out: Result = {"versions": {"sqlite": apsw.sqlite_lib_version(), "apsw": apsw.apsw_version()}}
    for n in spec["sizes"]:
        path = work / f"vec-{n}.db"
        path.unlink(missing_ok=True)
        db = apsw.Connection(str(path))
        db.enable_load_extension(True)
        db.load_extension(sqlite_vec.loadable_path())
        out["versions"]["sqlite_vec"] = next(db.execute("select vec_version()"))[0]
        db.execute("create virtual table v using vec0(embedding float[384] distance_metric=cosine)")
        matrix = np.ascontiguousarray(data.all[:n])
        start = time.perf_counter()
        with db:
            db.executemany(
                "insert into v(rowid, embedding) values (?, ?)",
                ((i, matrix[i].tobytes()) for i in range(n)),
            )
        insert_s = time.perf_counter() - start
        db.close()
        start = time.perf_counter()
        db = apsw.Connection(str(path))
        db.enable_load_extension(True)
        db.load_extension(sqlite_vec.loadable_path())
        open_s = time.perf_counter() - start
        sql = "select rowid from v where embedding match ? and k = ? order by distance"

        def search(q: Matrix, db: Any = db, sql: str = sql) -> Keys:
            return np.fromiter((r[0] for r in db.execute(sql, (q.tobytes(), K))), np.int64)

        queries = data.queries if n <= 20_000 else data.queries[: spec["big_queries"]]
        stats, found = latencies_ms(search, queries)
        out[str(n)] = {
            **stats,
            "queries": len(queries),
            "recall": recall_at_k(found, data.truth[f"q{n}"][: len(queries)]),
            "insert_s": round(insert_s, 3),
            "open_s": round(open_s, 4),
            "disk_mb": round(path.stat().st_size / 2**20, 1),
        }
        db.close()
        path.unlink()
    return out


# --------------------------------------------------------------------------------------
# Workers: ANN
# --------------------------------------------------------------------------------------


def _churn(
    data: Data,
    add_batch: Callable[[Keys, Matrix], object],
    add_one: Callable[[int, Matrix], object],
    remove_one: Callable[[int], object],
    search: Callable[[Matrix], Keys],
    size: Callable[[], int],
) -> Result:
    """Incremental add of EXTRA vectors, removal of 1,000, re-adding them one by one."""
    n = data.n
    out: Result = {}
    extra_keys = np.arange(n, n + EXTRA, dtype=np.int64)
    out["add_1000_batch_s"] = round(timed(lambda: add_batch(extra_keys, data.all[n:])), 4)
    out["size_after_add"] = size()
    rng = np.random.default_rng(7)
    gone = rng.choice(n, 1_000, replace=False).astype(np.int64)
    times = []
    for key in gone:
        start = time.perf_counter_ns()
        remove_one(int(key))
        times.append((time.perf_counter_ns() - start) / 1e6)
    out["remove_one_p50_ms"] = round(float(np.percentile(times, 50)), 4)
    out["remove_one_p95_ms"] = round(float(np.percentile(times, 95)), 4)
    out["size_after_remove"] = size()
    alive = np.ones(n + EXTRA, dtype=bool)
    alive[gone] = False
    _, found = latencies_ms(search, data.queries)
    out["removed_keys_returned"] = int(np.isin(found, gone).sum())
    truth = np.flatnonzero(alive)[exact_topk(data.all[alive], data.queries)]
    out["recall_after_remove"] = recall_at_k(found, truth)
    times = []
    for key in gone:
        start = time.perf_counter_ns()
        add_one(int(key), data.all[key])
        times.append((time.perf_counter_ns() - start) / 1e6)
    out["readd_one_p50_ms"] = round(float(np.percentile(times, 50)), 4)
    out["readd_one_p95_ms"] = round(float(np.percentile(times, 95)), 4)
    out["size_after_readd"] = size()
    _, found = latencies_ms(search, data.queries)
    truth = exact_topk(data.all, data.queries)
    out["recall_after_readd"] = recall_at_k(found, truth)
    return out


def case_usearch(spec: Result, work: Path) -> Result:
    from usearch.index import Index  # after onnxruntime

    data = _load(work)
    n = data.n
    out: Result = {"spec": spec}
    base = rss_mb()
    index = Index(
        ndim=corpus.DIM,
        metric=spec.get("metric", "cos"),
        dtype=spec["dtype"],
        connectivity=spec["connectivity"],
        expansion_add=spec["expansion_add"],
    )
    keys = np.arange(n, dtype=np.int64)
    wall, cpu = timed_cpu(lambda: index.add(keys, data.all[:n], threads=spec["threads"]))
    out["build_s"], out["build_cpu_s"] = round(wall, 3), round(cpu, 3)
    out["rss_delta_mb"] = round(rss_mb() - base, 1)
    out["peak_rss_delta_mb"] = round(peak_rss_mb() - base, 1)
    out["memory_usage_mb"] = round(index.memory_usage / 2**20, 1)
    out["search"] = {}
    for ef in spec["ef"]:
        index.expansion_search = ef

        def search(q: Matrix) -> Keys:
            return index.search(q, K).keys

        stats, found = latencies_ms(search, data.queries)
        _, held = latencies_ms(search, data.heldout)
        out["search"][str(ef)] = {
            **stats,
            "recall": recall_at_k(found, data.truth[f"q{n}"]),
            "recall_heldout": recall_at_k(held, data.truth["heldout"]),
            "target_hit@10": target_hit(found, data.targets, n),
        }
    if not spec.get("full"):
        return out
    path = work / f"usearch-{spec['dtype']}-{spec['expansion_add']}.usearch"
    out["save_s"] = round(timed(lambda: index.save(str(path))), 3)
    out["disk_mb"] = round(path.stat().st_size / 2**20, 1)
    out["saved_to"] = str(path)
    index.expansion_search = 64

    def search64(q: Matrix) -> Keys:
        return index.search(q, K).keys

    def size() -> int:
        return len(index)

    out["churn"] = _churn(
        data,
        add_batch=lambda k, v: index.add(k, v, threads=spec["threads"]),
        add_one=index.add,
        remove_one=index.remove,
        search=search64,
        size=size,
    )
    out["churn"]["memory_usage_mb_after"] = round(index.memory_usage / 2**20, 1)
    churned = work / "churned.usearch"
    index.save(str(churned))
    out["churn"]["disk_mb_after"] = round(churned.stat().st_size / 2**20, 1)
    churned.unlink()
    out["quirks"] = _usearch_quirks(Index)
    return out


def _usearch_quirks(index_cls: Any) -> Result:
    """Small behaviours the store depends on: duplicate keys, remove, key range, view."""
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((4, corpus.DIM)).astype(np.float32)
    q: Result = {}
    idx = index_cls(ndim=corpus.DIM, metric="cos", dtype="f16")
    idx.add(1, vecs[0])
    try:
        idx.add(1, vecs[1])
        q["add_existing_key"] = f"accepted, count(1)={int(idx.count(1))}, len={len(idx)}"
    except Exception as exc:  # noqa: BLE001 (recording the library's behaviour)
        q["add_existing_key"] = f"raises {type(exc).__name__}: {exc}"
    q["remove_missing_key_returns"] = int(idx.remove(12345))
    q["remove_existing_key_returns"] = int(idx.remove(1))
    q["len_after_remove"] = len(idx)
    idx.add(1, vecs[1])
    q["readd_removed_key"] = f"len={len(idx)}, top hit={int(idx.search(vecs[1], 1).keys[0])}"
    idx.add(2**63 + 5, vecs[2])
    q["key_2**63+5"] = f"accepted, found by search={int(idx.search(vecs[2], 1).keys[0]) > 0}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "q.usearch"
        idx.save(str(path))
        viewed = index_cls.restore(str(path), view=True)
        try:
            viewed.add(99, vecs[0])
            q["add_to_view"] = "accepted"
        except Exception as exc:  # noqa: BLE001
            q["add_to_view"] = f"raises {type(exc).__name__}: {str(exc)[:120]}"
        del viewed
        # Key 2**64-1 (what -1 wraps to) is usearch's "free slot" sentinel.
        bad = index_cls(ndim=corpus.DIM, metric="cos", dtype="f16")
        bad.add(-1, vecs[3])
        hits = bad.search(vecs[3], 1).keys
        bad.save(str(path))
        again = index_cls.restore(str(path))
        q["key_-1"] = (
            f"accepted as {int(next(iter(bad.keys)))}, len={len(bad)}, search finds it: "
            f"{len(hits) > 0}, len after save+load={len(again)}"
        )
    return q


def case_usearch_open(spec: Result, work: Path) -> Result:
    from usearch.index import Index  # after onnxruntime

    data = Data(work, load_vectors=False)
    base = rss_mb()
    start = time.perf_counter()
    index = Index.restore(spec["path"], view=spec["view"])
    open_s = time.perf_counter() - start
    after_open = rss_mb()
    index.expansion_search = 64
    first = timed(lambda: index.search(data.queries[0], K))

    def search(q: Matrix) -> Keys:
        return index.search(q, K).keys

    stats, found = latencies_ms(search, data.queries)
    return {
        "open_s": round(open_s, 4),
        "first_query_ms": round(first * 1e3, 3),
        "rss_after_open_mb": round(after_open - base, 1),
        "rss_after_queries_mb": round(rss_mb() - base, 1),
        **stats,
        "recall": recall_at_k(found, data.truth[f"q{data.n}"]),
    }


def case_hnswlib(spec: Result, work: Path) -> Result:
    import hnswlib  # measurement-only dependency

    data = _load(work)
    n = data.n
    out: Result = {"spec": spec}
    base = rss_mb()
    index = hnswlib.Index(space="ip", dim=corpus.DIM)
    index.init_index(max_elements=n + EXTRA, M=spec["M"], ef_construction=spec["ef_construction"])
    wall, cpu = timed_cpu(
        lambda: index.add_items(data.all[:n], np.arange(n), num_threads=spec["threads"])
    )
    out["build_s"], out["build_cpu_s"] = round(wall, 3), round(cpu, 3)
    out["rss_delta_mb"] = round(rss_mb() - base, 1)
    out["peak_rss_delta_mb"] = round(peak_rss_mb() - base, 1)
    out["search"] = {}
    for ef in spec["ef"]:
        index.set_ef(ef)

        def search(q: Matrix) -> Keys:
            return index.knn_query(q, k=K, num_threads=1)[0][0].astype(np.int64)

        stats, found = latencies_ms(search, data.queries)
        _, held = latencies_ms(search, data.heldout)
        out["search"][str(ef)] = {
            **stats,
            "recall": recall_at_k(found, data.truth[f"q{n}"]),
            "recall_heldout": recall_at_k(held, data.truth["heldout"]),
            "target_hit@10": target_hit(found, data.targets, n),
        }
    if not spec.get("full"):
        return out
    path = work / f"hnswlib-{spec['ef_construction']}.bin"
    out["save_s"] = round(timed(lambda: index.save_index(str(path))), 3)
    out["disk_mb"] = round(path.stat().st_size / 2**20, 1)
    out["saved_to"] = str(path)
    index.set_ef(64)

    def search64(q: Matrix) -> Keys:
        return index.knn_query(q, k=K, num_threads=1)[0][0].astype(np.int64)

    out["churn"] = _churn(
        data,
        add_batch=lambda k, v: index.add_items(v, k, num_threads=spec["threads"]),
        add_one=lambda k, v: index.add_items(v[None, :], np.array([k]), num_threads=1),
        remove_one=index.mark_deleted,
        search=search64,
        size=index.get_current_count,
    )
    out["churn"]["note"] = "get_current_count() counts deleted elements too"
    out["quirks"] = _hnswlib_quirks(hnswlib)
    return out


def _hnswlib_quirks(hnswlib: Any) -> Result:
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((4, corpus.DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    q: Result = {}
    idx = hnswlib.Index(space="ip", dim=corpus.DIM)
    idx.init_index(max_elements=3, M=16, ef_construction=64)
    idx.add_items(vecs[:1], [1])
    idx.add_items(vecs[1:2], [1])
    top = int(idx.knn_query(vecs[1], k=1)[0][0][0])
    q["add_existing_label"] = (
        f"replaces the vector in place (count={idx.get_current_count()}, top={top})"
    )
    try:
        idx.mark_deleted(12345)
        q["delete_missing_label"] = "accepted"
    except Exception as exc:  # noqa: BLE001 (recording the library's behaviour)
        q["delete_missing_label"] = f"raises {type(exc).__name__}: {exc}"
    idx.mark_deleted(1)
    try:
        idx.mark_deleted(1)
        q["delete_twice"] = "accepted"
    except Exception as exc:  # noqa: BLE001
        q["delete_twice"] = f"raises {type(exc).__name__}: {exc}"
    idx.add_items(vecs[2:3], [1])
    q["readd_deleted_label"] = f"undeletes it (found={len(idx.knn_query(vecs[2], k=1)[0][0])})"
    try:
        idx.add_items(vecs[3:4], [2])
        idx.add_items(vecs[0:1], [3])
        idx.add_items(vecs[1:2], [4])
        q["add_past_max_elements"] = "accepted"
    except Exception as exc:  # noqa: BLE001
        q["add_past_max_elements"] = f"raises {type(exc).__name__}: {exc} (resize_index first)"
    try:
        idx2 = hnswlib.Index(space="ip", dim=corpus.DIM)
        idx2.init_index(max_elements=2)
        idx2.add_items(vecs[:1], [-1])
        q["label_-1"] = f"accepted as {int(idx2.get_ids_list()[0])}"
    except Exception as exc:  # noqa: BLE001
        q["label_-1"] = f"raises {type(exc).__name__}: {str(exc)[:100]}"
    return q


def case_hnswlib_open(spec: Result, work: Path) -> Result:
    import hnswlib

    data = Data(work, load_vectors=False)
    base = rss_mb()
    index = hnswlib.Index(space="ip", dim=corpus.DIM)
    start = time.perf_counter()
    index.load_index(spec["path"], max_elements=data.n + EXTRA)
    open_s = time.perf_counter() - start
    after_open = rss_mb()
    index.set_ef(64)

    def search(q: Matrix) -> Keys:
        return index.knn_query(q, k=K, num_threads=1)[0][0].astype(np.int64)

    stats, found = latencies_ms(search, data.queries)
    return {
        "open_s": round(open_s, 4),
        "rss_after_open_mb": round(after_open - base, 1),
        **stats,
        "recall": recall_at_k(found, data.truth[f"q{data.n}"]),
    }


def case_threads(spec: Result, work: Path) -> Result:
    """Concurrent searches (4 threads), and searches while another thread adds."""
    data = _load(work)
    n = spec["n"]
    vecs = data.all
    if spec["lib"] == "usearch":
        from usearch.index import Index

        index = Index(ndim=corpus.DIM, metric="cos", dtype="f16", expansion_add=64)
        index.add(np.arange(n), vecs[:n], threads=2)

        def search(q: Matrix) -> Keys:
            return index.search(q, K).keys

        def add(keys: Keys, v: Matrix) -> None:
            for key, row in zip(keys, v, strict=True):
                index.add(int(key), row)

    else:
        import hnswlib

        index = hnswlib.Index(space="ip", dim=corpus.DIM)
        index.init_index(max_elements=n + 5_000, M=16, ef_construction=64)
        index.add_items(vecs[:n], np.arange(n), num_threads=2)
        index.set_ef(64)

        def search(q: Matrix) -> Keys:
            return index.knn_query(q, k=K, num_threads=1)[0][0].astype(np.int64)

        def add(keys: Keys, v: Matrix) -> None:
            for key, row in zip(keys, v, strict=True):
                index.add_items(row[None, :], np.array([key]), num_threads=1)

    queries = data.queries
    sequential = np.stack([search(q) for q in queries])
    seq_s = timed(lambda: [search(q) for q in queries])
    results: list[Keys] = []
    errors: list[str] = []

    def reader() -> None:
        try:
            results.append(np.stack([search(q) for q in queries]))
        except Exception as exc:  # noqa: BLE001 (recorded)
            errors.append(repr(exc))

    readers = [threading.Thread(target=reader) for _ in range(4)]
    start, cpu = time.perf_counter(), time.process_time()
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    par_s = time.perf_counter() - start
    par_cpu = time.process_time() - cpu
    mismatched = sum(int((r != sequential).any(axis=1).sum()) for r in results)
    out: Result = {
        "n": n,
        "sequential_500_s": round(seq_s, 3),
        "four_threads_4x500_s": round(par_s, 3),
        "speedup": round(4 * seq_s / par_s, 2),
        "cpu_over_wall": round(par_cpu / par_s, 2),
        "queries_differing_from_sequential": mismatched,
        "errors": errors,
    }
    new_keys = np.arange(n, n + 5_000 if n + 5_000 <= len(vecs) else len(vecs))
    results.clear()
    writer = threading.Thread(target=add, args=(new_keys, vecs[new_keys]))
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in [writer, *readers]:
        t.start()
    for t in [writer, *readers]:
        t.join()
    out["search_during_add"] = {
        "added": len(new_keys),
        "errors": errors,
        "bad_keys_returned": int(sum(((r < 0) | (r >= n + len(new_keys))).sum() for r in results)),
    }
    return out


def _pct(values: list[float]) -> Result:
    arr = np.asarray(values)
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p95_ms": round(float(np.percentile(arr, 95)), 3),
    }


def case_hybrid(spec: Result, work: Path) -> Result:
    """An end-to-end estimate: embed the query + ANN leg + FTS5 leg + RRF, one at a time."""
    import sqlite3
    from concurrent.futures import ThreadPoolExecutor

    from usearch.index import Index

    from kredenc.providers.embed.minilm import MiniLMEmbedder
    from kredenc.retrieve.terms import fts_match, query_terms

    data = _load(work)
    n, depth = data.n, spec["depth"]
    texts = corpus.memories(n, data.seed)
    qs = corpus.queries(len(data.queries), data.seed, corpus.DEFAULT_N)
    db = sqlite3.connect(work / "fts.db", check_same_thread=False)
    db.execute("create virtual table fts using fts5(text)")
    start = time.perf_counter()
    with db:
        db.executemany("insert into fts(rowid, text) values (?, ?)", enumerate(texts))
    fts_build = time.perf_counter() - start
    sql = "select rowid from fts where fts match ? order by bm25(fts) limit ?"
    index = Index(
        ndim=corpus.DIM,
        metric=spec.get("metric", "cos"),
        dtype=spec["dtype"],
        connectivity=spec["connectivity"],
        expansion_add=spec["expansion_add"],
    )
    index.add(np.arange(n), data.all[:n], threads=2)
    dense_hits = {}
    for ef in EF_SEARCH:
        index.expansion_search = ef
        found = np.stack([index.search(q, K).keys for q in data.queries])
        dense_hits[str(ef)] = target_hit(found, data.targets, n)
    index.expansion_search = spec["expansion_search"]
    out: Result = {
        "ann_target_hit@10_by_expansion_search": dense_hits,
        "spec": spec,
        "fts_insert_s": round(fts_build, 3),
        "exact_target_hit@10": target_hit(data.truth[f"q{n}"], data.targets, n),
    }
    pool = ThreadPoolExecutor(1)

    def lexical_leg(q: str) -> list[int]:
        return [r[0] for r in db.execute(sql, (fts_match(query_terms(q)), depth))]

    for threads in spec["embed_threads"]:
        emb = MiniLMEmbedder(intra_op_num_threads=threads)
        for q, _ in qs[:WARMUP]:
            emb.embed_one(q)
        parts: dict[str, list[float]] = {"embed": [], "ann": [], "fts": [], "fuse": [], "total": []}
        hits = {"dense": 0, "dense_exact": 0, "lexical": 0, "fused": 0}
        exact = exact_topk(data.all[:n], data.queries)
        counted = 0
        for qi, (q, target) in enumerate(qs):
            t0 = time.perf_counter()
            vec = emb.embed_one(q)
            t1 = time.perf_counter()
            dense = index.search(vec, depth).keys.tolist()
            t2 = time.perf_counter()
            lexical = lexical_leg(q)
            t3 = time.perf_counter()
            fused: dict[int, float] = {}
            for weight, ranked in ((0.6, dense), (0.4, lexical)):
                for rank, key in enumerate(ranked):
                    fused[key] = fused.get(key, 0.0) + weight / (60 + rank + 1)
            top = sorted(fused, key=fused.__getitem__, reverse=True)[:K]
            t4 = time.perf_counter()
            for name, value in (
                ("embed", t1 - t0),
                ("ann", t2 - t1),
                ("fts", t3 - t2),
                ("fuse", t4 - t3),
                ("total", t4 - t0),
            ):
                parts[name].append(value * 1e3)
            if target < n:
                counted += 1
                hits["dense"] += target in dense[:K]
                hits["dense_exact"] += target in exact[qi]
                hits["lexical"] += target in lexical[:K]
                hits["fused"] += target in top
        # The same legs with the FTS5 query on a second thread while the query embeds
        # (onnxruntime and sqlite3 both release the GIL).
        overlapped = []
        for q, _ in qs:
            t0 = time.perf_counter()
            future = pool.submit(lexical_leg, q)
            dense = index.search(emb.embed_one(q), depth).keys.tolist()
            future.result()
            overlapped.append((time.perf_counter() - t0) * 1e3)
        out[f"embed_threads_{threads}"] = {
            **{name: _pct(values) for name, values in parts.items()},
            "total_fts_overlapped": _pct(overlapped),
            "target_hit@10": {k: round(v / max(counted, 1), 3) for k, v in hits.items()},
        }
    pool.shutdown()
    return out


CASES: dict[str, Callable[[Result, Path], Result]] = {
    "hybrid": case_hybrid,
    "exact-numpy": case_exact_numpy,
    "exact-usearch": case_exact_usearch,
    "sqlite-vec": case_sqlite_vec,
    "usearch": case_usearch,
    "usearch-open": case_usearch_open,
    "hnswlib": case_hnswlib,
    "hnswlib-open": case_hnswlib_open,
    "threads": case_threads,
}

# --------------------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------------------


def prepare(work: Path, n: int, m: int, seed: int) -> None:
    """Vectors, queries and exact answers, written once to the work dir for the workers."""
    vectors = corpus.vectors(n + EXTRA, seed)
    queries, _ = corpus.query_vectors(m, seed, corpus.DEFAULT_N)
    heldout = vectors[n : n + m]
    np.save(work / "queries.npy", queries)
    np.save(work / "heldout.npy", heldout)
    truth = {f"q{size}": exact_topk(vectors[:size], queries) for size in EXACT_SIZES if size <= n}
    truth[f"q{n}"] = exact_topk(vectors[:n], queries)
    truth["heldout"] = exact_topk(vectors[:n], heldout)
    np.savez(work / "truth.npz", **truth)
    targets = np.array([t for _, t in corpus.queries(m, seed, corpus.DEFAULT_N)], dtype=np.int64)
    np.save(work / "targets.npy", targets)
    (work / "data.json").write_text(json.dumps({"n": n, "seed": seed, "m": m}))


def run_case(
    kind: str, spec: Result, work: Path, env: dict[str, str] | None = None, timeout: int = 1800
) -> Result:
    """Run one case in a fresh interpreter; a crash or timeout becomes an error record."""
    cmd = [sys.executable, str(Path(__file__)), "--worker", kind, json.dumps(spec), str(work)]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    result: Result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = round(wall, 1)
    result["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


SIMD_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16")


def _usearch_kernels() -> dict[str, str]:
    """The SIMD kernels usearch picked for each dtype on this CPU."""
    from usearch.index import Index

    return {
        dtype: str(Index(ndim=corpus.DIM, metric="ip", dtype=dtype).hardware_acceleration)
        for dtype in ("f32", "f16", "i8")
    }


def machine() -> Result:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    flags = next(
        (
            line.split(":", 1)[1].split()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        ),
        [],
    )
    mem = next(
        line.split()[1]
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    versions = {}
    for pkg in ("numpy", "usearch", "hnswlib", "apsw", "sqlite-vec", "onnxruntime"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "simd": [f for f in SIMD_FLAGS if f in flags],
        "usearch_kernels": _usearch_kernels(),
        "mem_gib": round(int(mem) / 2**20, 1),
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": versions,
    }


def _available(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return str(exc)
    return None


def plan(n: int, quick: bool) -> list[tuple[str, str, Result, dict[str, str]]]:
    """(label, kind, spec, env) for every case of the run."""
    sizes = [s for s in EXACT_SIZES if s <= n]
    cases: list[tuple[str, str, Result, dict[str, str]]] = []
    for blas in ("1", "2"):
        cases.append(
            (
                f"numpy exact, {blas} BLAS thread(s)",
                "exact-numpy",
                {"sizes": sizes},
                {"OPENBLAS_NUM_THREADS": blas, "OMP_NUM_THREADS": blas},
            )
        )
    for dtype in ("f32", "f16"):
        cases.append(
            (f"usearch exact {dtype}", "exact-usearch", {"dtype": dtype, "sizes": sizes}, {})
        )
    vec_sizes = [s for s in (1_000, 10_000, 100_000) if s <= n]
    cases.append(("sqlite-vec exact", "sqlite-vec", {"sizes": vec_sizes, "big_queries": 200}, {}))
    dtypes = ("f16", "i8") if quick else ("f32", "f16", "i8")
    adds = (64,) if quick else (64, 128)
    for dtype in dtypes:
        for ea in adds:
            spec = {
                "dtype": dtype,
                "connectivity": 16,
                "expansion_add": ea,
                "threads": 2,
                "ef": list(EF_SEARCH),
                "full": True,
            }
            cases.append((f"usearch {dtype} M16 ea{ea} t2", "usearch", spec, {}))
    # The vectors are L2-normalised, so inner product ranks as cosine, without the norms.
    for dtype, ea in [("f16", 64)] if quick else [("f16", 64), ("f16", 128), ("i8", 64)]:
        spec = {
            "dtype": dtype,
            "metric": "ip",
            "connectivity": 16,
            "expansion_add": ea,
            "threads": 2,
            "ef": list(EF_SEARCH),
            "full": True,
        }
        cases.append((f"usearch {dtype} ip M16 ea{ea} t2", "usearch", spec, {}))
    single = [("f16", "cos", 64)]
    if not quick:
        single += [("f32", "cos", 64), ("f16", "cos", 128), ("i8", "cos", 64), ("f16", "ip", 64)]
    for dtype, metric, ea in single:
        spec = {
            "dtype": dtype,
            "metric": metric,
            "connectivity": 16,
            "expansion_add": ea,
            "threads": 1,
            "ef": [64],
            "full": False,
        }
        name = f"usearch {dtype}{' ip' if metric == 'ip' else ''} M16 ea{ea} t1"
        cases.append((name, "usearch", spec, {}))
    for efc in (64,) if quick else (64, 128):
        spec = {"M": 16, "ef_construction": efc, "threads": 2, "ef": list(EF_SEARCH), "full": True}
        cases.append((f"hnswlib M16 efC{efc} t2", "hnswlib", spec, {}))
    spec = {"M": 16, "ef_construction": 64, "threads": 1, "ef": [64], "full": False}
    cases.append(("hnswlib M16 efC64 t1", "hnswlib", spec, {}))
    spec = {
        "dtype": "f16",
        "connectivity": 16,
        "expansion_add": 64,
        "metric": "ip",
        "expansion_search": 128,
        "depth": 50,
        "embed_threads": [1, 2],
    }
    cases.append(("hybrid estimate (usearch f16 ip ea64 es128)", "hybrid", spec, {}))
    thread_n = min(n, 20_000)
    for lib in ("usearch", "hnswlib"):
        cases.append((f"{lib} threads", "threads", {"lib": lib, "n": thread_n}, {}))
    return cases


def _fmt(value: object, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(results: dict[str, Result]) -> str:
    """The human summary: exact search by size, then the ANN indexes."""
    lines = ["", "Exact search, one query at a time, k=10: p50 / p95 ms"]
    exact = {k: v for k, v in results.items() if "exact" in k and "error" not in v}
    sizes = sorted({int(s) for v in exact.values() for s in v if s.isdigit()})
    lines.append(f"{'method':34}" + "".join(f"{s:>16,}" for s in sizes))
    for label, res in exact.items():
        cells = [
            f"{res[str(s)]['p50_ms']:.2f}/{res[str(s)]['p95_ms']:.2f}" if str(s) in res else "-"
            for s in sizes
        ]
        lines.append(f"{label:34}" + "".join(f"{c:>16}" for c in cells))
    lines += [
        "",
        "ANN at n = 100,000 (or --n), k=10, one query at a time",
        f"{'index':30}{'build s':>8}{'cpu s':>7}{'ef':>5}{'p50 ms':>8}{'p95 ms':>8}{'cpu ms':>7}"
        f"{'recall':>7}{'held':>7}{'hit':>6}"
        f"{'RSS MB':>8}{'disk MB':>8}{'save s':>7}{'load s':>7}{'view s':>8}",
    ]
    for label, res in results.items():
        if "search" not in res:
            continue
        for i, (ef, s) in enumerate(res["search"].items()):
            first = i == 0
            lines.append(
                f"{label if first else '':30}{_fmt(res['build_s'], 1) if first else '':>8}"
                f"{_fmt(res.get('build_cpu_s'), 1) if first else '':>7}"
                f"{ef:>5}{s['p50_ms']:>8.3f}{s['p95_ms']:>8.3f}{_fmt(s.get('cpu_ms'), 3):>7}"
                f"{s['recall']:>7.3f}{s['recall_heldout']:>7.3f}"
                f"{_fmt(s.get('target_hit@10'), 3):>6}"
                + (
                    f"{_fmt(res.get('rss_delta_mb'), 0):>8}{_fmt(res.get('disk_mb'), 0):>8}"
                    f"{_fmt(res.get('save_s')):>7}{_fmt(res.get('load', {}).get('open_s'), 3):>7}"
                    f"{_fmt(res.get('view', {}).get('open_s'), 4):>8}"
                    if first
                    else ""
                )
            )
    lines += ["", "Churn: add 1,000 (batch), remove 1,000 one by one, re-add them one by one"]
    lines.append(
        f"{'index':30}{'add1k s':>9}{'rm p50':>8}{'rm p95':>8}{'ghosts':>7}{'rec.rm':>8}"
        f"{'readd p50':>10}{'readd p95':>10}{'rec.re':>8}"
    )
    for label, res in results.items():
        c = res.get("churn")
        if not c:
            continue
        lines.append(
            f"{label:30}{c['add_1000_batch_s']:>9.3f}{c['remove_one_p50_ms']:>8.3f}"
            f"{c['remove_one_p95_ms']:>8.3f}{c['removed_keys_returned']:>7}"
            f"{c['recall_after_remove']:>8.3f}{c['readd_one_p50_ms']:>10.3f}"
            f"{c['readd_one_p95_ms']:>10.3f}{c['recall_after_readd']:>8.3f}"
        )
    lines += [
        "",
        "Opening a saved index (fresh process): open s, RSS MB after open / after 500 queries",
    ]
    lines.append(
        f"{'index':30}{'mode':>6}{'open s':>9}{'RSS open':>10}{'RSS q':>8}{'1st q ms':>9}"
        f"{'p50 ms':>8}{'p95 ms':>8}{'recall':>8}"
    )
    for label, res in results.items():
        for mode in ("load", "view"):
            o = res.get(mode)
            if not o or "error" in o:
                continue
            lines.append(
                f"{label:30}{mode:>6}{o['open_s']:>9.4f}{o['rss_after_open_mb']:>10.1f}"
                f"{_fmt(o.get('rss_after_queries_mb'), 1):>8}{_fmt(o.get('first_query_ms'), 2):>9}"
                f"{o['p50_ms']:>8.3f}{o['p95_ms']:>8.3f}{o['recall']:>8.3f}"
            )
    threads = {k: v for k, v in results.items() if "four_threads_4x500_s" in v}
    if threads:
        lines += ["", "Concurrency: 4 threads x 500 searches vs sequential; 2 readers during adds"]
        for label, t in threads.items():
            during = t["search_during_add"]
            lines.append(
                f"  {label}: speedup {t['speedup']}x (CPU/wall {t.get('cpu_over_wall')}), "
                f"results differing "
                f"{t['queries_differing_from_sequential']}, errors {len(t['errors'])}; "
                f"during {during['added']} adds: bad keys {during['bad_keys_returned']}, "
                f"errors {len(during['errors'])}"
            )
    for label, res in results.items():
        if "fts_insert_s" not in res:
            continue
        lines += ["", f"{label}: top-{res['spec']['depth']} per leg, p50 / p95 ms"]
        lines.append(
            f"  target hit@10: exact dense {res.get('exact_target_hit@10')}, ANN dense by "
            f"expansion_search {res.get('ann_target_hit@10_by_expansion_search')}"
        )
        for key, part in res.items():
            if key.startswith("embed_threads_"):
                cells = ", ".join(
                    f"{name} {v['p50_ms']:.2f}/{v['p95_ms']:.2f}"
                    for name, v in part.items()
                    if name != "target_hit@10"
                )
                lines.append(f"  {key}: {cells}; target hit@10 {part['target_hit@10']}")
    errors = [f"  {k}: {v['error']}" for k, v in results.items() if "error" in v]
    if errors:
        lines += ["", "Errors:", *errors]
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=None, help="index size (default 100,000)")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    parser.add_argument("--quick", action="store_true", help="n=20,000 and fewer cases")
    parser.add_argument("--only", default="", help="comma-separated substrings of case labels")
    parser.add_argument("--out", type=Path, default=None, help=f"default {RESULTS}")
    parser.add_argument(
        "--merge", action="store_true", help="update the cases run in an existing --out file"
    )
    parser.add_argument(
        "--worker", nargs=3, metavar=("KIND", "SPEC", "WORK"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(list(argv) if argv is not None else None)

    if args.worker:
        kind, spec, work = args.worker
        result = CASES[kind](json.loads(spec), Path(work))
        print(json.dumps(result))
        return 0

    n = args.n or (20_000 if args.quick else corpus.DEFAULT_N)
    work = Path(tempfile.mkdtemp(prefix="kredenc-bench-ann-"))
    try:
        print(f"preparing data (n={n:,}, {args.queries} queries) in {work}", flush=True)
        prepare(work, n, args.queries, args.seed)
        results: dict[str, Result] = {}
        missing = {lib: _available(lib) for lib in ("hnswlib", "apsw", "sqlite_vec")}
        for label, kind, spec, env in plan(n, args.quick):
            if args.only and not any(s in label for s in args.only.split(",")):
                continue
            need = {"hnswlib": ["hnswlib"], "sqlite-vec": ["apsw", "sqlite_vec"]}.get(
                kind, ["hnswlib"] if "hnswlib" in label else []
            )
            absent = [f"{m}: {missing[m]}" for m in need if missing[m]]
            if absent:
                results[label] = {"error": "not measured, " + "; ".join(absent)}
                continue
            print(f"[{time.strftime('%H:%M:%S')}] {label} ...", flush=True)
            res = run_case(kind, spec, work, env)
            path = res.pop("saved_to", None)
            if path:
                opener = "usearch-open" if kind == "usearch" else "hnswlib-open"
                res["load"] = run_case(opener, {"path": path, "view": False}, work)
                if kind == "usearch":
                    res["view"] = run_case(opener, {"path": path, "view": True}, work)
                Path(path).unlink(missing_ok=True)
            results[label] = res
            print(f"    {json.dumps(res)[:400]}", flush=True)
        report = {
            "command": "benchmarks/bench_ann.py " + " ".join(sys.argv[1:]),
            "machine": machine(),
            "data": {
                "corpus": f"benchmarks/corpus.py v{corpus.GENERATOR_VERSION}, seed {args.seed}",
                "n": n,
                "queries": args.queries,
                "query_set": "generated questions (corpus.queries); 'held' = held-out memories",
                "embedder": "all-MiniLM-L6-v2 int8 ONNX (kredenc MiniLMEmbedder), 384-d, L2",
                "k": K,
            },
            "results": results,
        }
        out = args.out or (Path("/tmp/kredenc-ann-quick.json") if args.quick else RESULTS)
        if args.merge and out.exists():
            previous = json.loads(out.read_text())
            stamp = report["machine"]["date"]
            for res in results.values():
                res["measured_at"] = stamp
            report["command"] = previous["command"] + f"; then {report['command']}"
            report["results"] = {**previous["results"], **results}
            results = report["results"]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(table(results))
        print(f"\nwritten {out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
