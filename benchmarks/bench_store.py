"""The store's speed and memory targets, measured end to end through the ``Kredenc`` facade.

Targets (2-core machine; every figure is the median of ``--runs`` runs):

* ``remember()`` p50 <= 12 ms with the real MiniLM embedder and ``durability="append"``
  (an fsync per call); distinct short texts, so the embedding cache never answers.
  Broken down into the embedding alone, filing with a cached vector (store + fsync) and
  filing with a cached vector and no fsync.
* bulk filing >= 1,000 short records/s: ``remember_many`` in batches of 500 with
  ``durability="batch"``, the embedding excluded (the texts' vectors are put into the
  store's embedding cache first with ``SqliteIndex.cache_vectors``, exactly where a
  ``remember`` looks them up by SHA-256 of the text, and the run checks that the model was
  never loaded), then the same with the embedding included (fresh store, empty cache).
* ``search`` over the 100,000-memory store with distinct query texts (the engine's query
  LRU never answers a timed query): hybrid p50 <= 15 ms and p95 <= 30 ms including the
  query embedding, lexical p95 <= 5 ms, dense reported; whether the ANN index answered.
  Also: process CPU time per query (less sensitive to a shared machine's load than wall
  time), each step of a hybrid query alone, and (full runs) the same searches and
  remember() with ``embed_threads=1``, and remember() into a copy of the big store.
* opening that store <= 1 s in a fresh process (the first search, which loads the vector
  shards, is timed separately); ``rebuild`` <= 60 s from cached embeddings; peak RSS
  (``ru_maxrss``) <= 600 MB for open + searches and for the rebuild.

The 100,000-record store is built once under ``~/.cache/kredenc/bench/store-100k`` from
``benchmarks/corpus.py`` (its cached MiniLM vectors are put into the embedding cache, so
building embeds nothing; durability "none" while building) and reused; a store that no
longer opens or answers with this code (format or schema change) is re-indexed from its
log, or rebuilt. Every measurement runs in its own subprocess: cold opens, and memory
figures per task.

    .venv/bin/python benchmarks/bench_store.py                 # n=100,000, 3 runs
    .venv/bin/python benchmarks/bench_store.py --quick         # n=5,000, 1 run, < 1 min
    .venv/bin/python benchmarks/bench_store.py --n 20000 --runs 5 --out /tmp/store.json

Prints a table (target, measured, pass/fail) and writes benchmarks/results/store.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# onnxruntime must be in the process before usearch (see corpus.py: importing it after
# usearch segfaults); the engine imports usearch when the vector shards load.
import numpy as np
import onnxruntime  # noqa: F401

from _common import median, peak_rss_mb, percentile, print_table, rss_mb, write_results

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE_DIR = Path(os.environ.get("KREDENC_BENCH_CACHE", "~/.cache/kredenc/bench")).expanduser()
NS = "bench"
SEED = 0
BUILD_BATCH = 1000
BULK_BATCH = 500
K = 10

Result = dict[str, Any]


# --------------------------------------------------------------------------------------
# Helpers shared by the parent and the workers
# --------------------------------------------------------------------------------------


def clock() -> float:
    return time.perf_counter()


def latency(samples: Sequence[float]) -> Result:
    """p50/p95/p99 (ms) of durations in seconds."""
    ms = [s * 1000 for s in samples]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "p99_ms": percentile(ms, 99),
        "mean_ms": sum(ms) / len(ms),
        "max_ms": max(ms),
    }


def timed(fn: Callable[[str], object], items: Sequence[str]) -> list[float]:
    out = []
    for item in items:
        start = clock()
        fn(item)
        out.append(clock() - start)
    return out


def store_name(n: int) -> str:
    return f"store-{n // 1000}k" if n % 1000 == 0 else f"store-{n}"


def seed_cache(kb: Any, texts: Sequence[str], vectors: Any, chunk: int = 5000) -> None:
    """Put ``vectors`` into the store's embedding cache under the hash of each text.

    This is the cache ``remember`` consults (``SqliteIndex.cached_vectors``, keyed by the
    SHA-256 of ``embed_text_of(payload)``) before it calls the model. Called while the
    housekeeper is idle (nothing else uses the writer connection then).
    """
    from kredenc.storage.index.sqlite import embed_text_of, text_hash

    for start in range(0, len(texts), chunk):
        part = texts[start : start + chunk]
        kb.index.cache_vectors(
            {
                text_hash(embed_text_of({"text": t})): np.asarray(vectors[start + i])
                for i, t in enumerate(part)
            }
        )


def shard_info(kb: Any) -> list[Result]:
    return [{"vectors": len(s), "uses_ann": bool(s.uses_ann)} for s in kb.index.shards().values()]


# --------------------------------------------------------------------------------------
# Workers (each runs in a fresh subprocess; returns a JSON-able dict)
# --------------------------------------------------------------------------------------


def w_build(spec: Result) -> Result:
    """File n corpus memories with pre-seeded vectors (no embedding); build the ANN graph."""
    import corpus
    from kredenc import Kredenc
    from kredenc.providers.embed.minilm import MiniLMEmbedder

    n, home = int(spec["n"]), Path(spec["store"])
    start = clock()
    specs = corpus.specs(n, SEED)
    texts = [s.text for s in specs]
    kinds = [corpus.TEMPLATES[s.template][0] for s in specs]
    vectors = corpus.vectors(n, SEED)
    corpus_s = clock() - start
    embedder = MiniLMEmbedder()
    kb = Kredenc.open(home, NS, embedder=embedder, durability="none")
    start = clock()
    seed_cache(kb, texts, vectors)
    seed_s = clock() - start
    del vectors
    start = clock()
    for b in range(0, n, BUILD_BATCH):
        kb.remember_many(
            [
                {"text": t, "kind": k}
                for t, k in zip(texts[b : b + BUILD_BATCH], kinds[b : b + BUILD_BATCH], strict=True)
            ]
        )
    file_s = clock() - start
    start = clock()
    shards = shard_info(kb)  # loads the shards; builds the ANN graph past the threshold
    ann_build_s = clock() - start
    start = clock()
    records = kb.stats()["records"]
    kb.close()  # saves the ANN graph under <store>/ann/
    close_s = clock() - start
    return {
        "n": n,
        "records": records,
        "corpus_s": corpus_s,
        "seed_cache_s": seed_s,
        "file_s": file_s,
        "file_per_s": n / file_s,
        "shards_and_ann_build_s": ann_build_s,
        "close_save_ann_s": close_s,
        "shards": shards,
        "model_loaded": embedder.loaded,
        "peak_rss_mb": peak_rss_mb(),
    }


def w_reindex(spec: Result) -> Result:
    """Drop the derived index and replay the log (embeddings from the cache)."""
    from kredenc import Kredenc
    from kredenc.providers.embed.minilm import MiniLMEmbedder
    from kredenc.storage import layout

    home = Path(spec["store"])
    layout.drop_index(home)
    start = clock()
    embedder = MiniLMEmbedder()
    kb = Kredenc.open(home, NS, embedder=embedder, durability="none")
    replay_s = clock() - start
    shards = shard_info(kb)
    kb.close()
    return {"replay_s": replay_s, "shards": shards, "model_loaded": embedder.loaded}


def w_check(spec: Result) -> Result:
    """Does the cached store open and answer with this code?"""
    from kredenc import Kredenc

    kb = Kredenc.open(Path(spec["store"]), NS)
    try:
        kb.embedder.load()  # type: ignore[attr-defined]
        hits = kb.search("who owns the billing pipeline?", k=5, mode="hybrid")
        return {
            "records": kb.stats()["records"],
            "hits": len(hits),
            "shards": shard_info(kb),
        }
    finally:
        kb.close()


def w_remember(spec: Result) -> Result:
    """remember() latency in a fresh store: model + fsync, and its parts."""
    from kredenc import Kredenc

    home = Path(spec["store"])
    t = spec["texts"]
    threads = spec.get("embed_threads")
    kb = Kredenc.open(home, NS, **({"embed_threads": threads} if threads else {}))
    assert kb.settings.durability == "append"
    embedder = kb.embedder
    timed(kb.remember, t["warm"])  # loads the model, creates the tables' first pages
    full = timed(kb.remember, t["timed"])
    embed_only = timed(lambda s: embedder.embed([s]), t["embed_only"])
    seed_cache(kb, t["cached"], embedder.embed(t["cached"]))
    cached = timed(kb.remember, t["cached"])
    info = {"embedder": repr(embedder), "durability": kb.settings.durability}
    kb.close()
    if spec.get("short"):
        return {**info, "remember": latency(full), "embed_only": latency(embed_only)}
    kb = Kredenc.open(home, NS, durability="none", embedder=embedder)
    seed_cache(kb, t["nosync"], embedder.embed(t["nosync"]))
    nosync = timed(kb.remember, t["nosync"])
    kb.close()
    return {
        **info,
        "remember": latency(full),
        "embed_only": latency(embed_only),
        "remember_cached_vector": latency(cached),
        "remember_cached_vector_no_fsync": latency(nosync),
        "peak_rss_mb": peak_rss_mb(),
    }


def w_remember_big(spec: Result) -> Result:
    """remember() latency in a copy of the big store, vector shards (and ANN) loaded."""
    from kredenc import Kredenc

    home = Path(spec["store"])
    t = spec["texts"]
    kb = Kredenc.open(home, NS)
    kb.embedder.load()  # type: ignore[attr-defined]
    start = clock()
    shards = shard_info(kb)
    load_s = clock() - start
    timed(kb.remember, t["warm"])
    full = timed(kb.remember, t["timed"])
    shards_after = shard_info(kb)
    kb.close()
    return {
        "shard_load_s": load_s,
        "shards": shards,
        "shards_after": shards_after,
        "remember": latency(full),
    }


def w_bulk(spec: Result) -> Result:
    """remember_many in batches, durability 'batch'; vectors pre-seeded or embedded."""
    import corpus
    from kredenc import Kredenc

    count, batch, home = int(spec["count"]), int(spec["batch"]), Path(spec["store"])
    specs = corpus.specs(count, SEED)
    items = [{"text": s.text, "kind": corpus.TEMPLATES[s.template][0]} for s in specs]
    kb = Kredenc.open(home, NS, durability="batch")
    if spec["cached"]:
        seed_cache(kb, [s.text for s in specs], corpus.vectors(count, SEED))
    per_batch = []
    for b in range(0, count, batch):
        start = clock()
        kb.remember_many(items[b : b + batch])
        per_batch.append(clock() - start)
    model_loaded = bool(kb.embedder.loaded)  # type: ignore[attr-defined]
    records = kb.stats()["records"]
    kb.close()
    return {
        "cached": bool(spec["cached"]),
        "count": count,
        "records": records,
        "batch": batch,
        "seconds": sum(per_batch),
        "records_per_s": count / sum(per_batch),
        "batch_latency": latency(per_batch),
        "model_loaded": model_loaded,
        "peak_rss_mb": peak_rss_mb(),
    }


def w_search(spec: Result) -> Result:
    """Cold open, first search, then timed searches per mode; peak RSS of it all."""
    base_rss = rss_mb()
    start = clock()
    from kredenc import Kredenc
    from kredenc.retrieve.terms import phrases, query_terms
    from kredenc.storage.index.filters import Filters

    import_s = clock() - start
    q = spec["queries"]
    start = clock()
    threads = spec.get("embed_threads")
    kb = Kredenc.open(Path(spec["store"]), NS, **({"embed_threads": threads} if threads else {}))
    open_s = clock() - start
    rss_open = rss_mb()
    embedder = kb.embedder
    start = clock()
    # A search process loads only the query graph (the 8-bit copy by default).
    embedder.embed_query("warm up")
    model_load_s = clock() - start
    rss_model = rss_mb()
    start = clock()
    shards = shard_info(kb)  # the vector shards load lazily: this is the first search's cost
    shard_load_s = clock() - start
    rss_shards, peak_shards = rss_mb(), peak_rss_mb()
    start = clock()
    kb.search(q["first"], k=K, mode="hybrid")
    first_query_s = clock() - start
    for mode in ("lexical", "dense", "hybrid"):
        for text in q["warm"]:
            kb.search(text, k=K, mode=mode)
    out: Result = {}
    for mode in ("lexical", "dense", "hybrid"):
        walls, cpus = [], []
        for text in q[mode]:
            start, cpu = clock(), time.process_time()
            kb.search(text, k=K, mode=mode)
            walls.append(clock() - start)
            cpus.append(time.process_time() - cpu)
        # CPU time of the whole process (all threads): less sensitive to other load than
        # wall time; for the single-threaded lexical leg it approximates an idle machine.
        out[mode] = {**latency(walls), "cpu_p50_ms": percentile(cpus, 50) * 1000}
    lru = kb.embed_query
    lru_info = lru.cache_info()._asdict() if hasattr(lru, "cache_info") else None
    # Where a hybrid query's time goes: each step alone, on other distinct queries.
    parts: dict[str, list[float]] = {"embed": [], "lexical_sql": [], "dense_index": []}
    depth = max(kb.settings.leg_k, K)
    for text in q["parts"]:
        start = clock()
        vec = embedder.embed_query(text)
        parts["embed"].append(clock() - start)
        start = clock()
        kb.index.lexical(NS, phrases(query_terms(text)), depth, Filters())
        parts["lexical_sql"].append(clock() - start)
        start = clock()
        kb.index.dense(NS, vec, depth, Filters())
        parts["dense_index"].append(clock() - start)
    hits = kb.search(q["hybrid"][0], k=K, mode="hybrid")
    start = clock()
    for _ in range(20):
        for h in hits:
            kb.haystack.read(h.offset)
    read_hit_ms = (clock() - start) * 1000 / (20 * max(1, len(hits)))
    start = clock()
    kb.close()
    close_s = clock() - start
    # The part of open() that grows with the log: verifying every record (haystack scan).
    from kredenc.storage.haystack import Haystack

    start = clock()
    Haystack(Path(spec["store"]) / "haystack.log", durability="none").close()
    log_scan_s = clock() - start
    return {
        "import_s": import_s,
        "open_s": open_s,
        "log_scan_s": log_scan_s,
        "model_load_s": model_load_s,
        "shard_load_s": shard_load_s,
        "first_query_s": first_query_s,
        "first_search_s": model_load_s + shard_load_s + first_query_s,
        "close_s": close_s,
        "shards": shards,
        "uses_ann": any(s["uses_ann"] for s in shards),
        **out,
        "query_lru": lru_info,
        "query_graph": getattr(embedder, "query_model", "full"),
        "parts": {name: latency(v) for name, v in parts.items()},
        "read_hit_ms": read_hit_ms,
        "hits_per_query": len(hits),
        "rss_start_mb": base_rss,
        "rss_after_open_mb": rss_open,
        "rss_after_model_mb": rss_model,
        "rss_after_shards_mb": rss_shards,
        "peak_rss_after_shards_mb": peak_shards,
        "rss_end_mb": rss_mb(),
        "peak_rss_mb": peak_rss_mb(),
    }


def w_rebuild(spec: Result) -> Result:
    """kb.rebuild() on a copy of the store; optionally the ANN build the next search pays."""
    from kredenc import Kredenc

    home = Path(spec["store"])
    start = clock()
    kb = Kredenc.open(home, NS, durability="none")
    open_s = clock() - start
    embedder = kb.embedder
    start = clock()
    stats = kb.rebuild()
    rebuild_s = clock() - start
    out: Result = {
        "open_s": open_s,
        "rebuild_s": rebuild_s,
        "records": stats["records"],
        "model_loaded_by_rebuild": bool(embedder.loaded),  # type: ignore[attr-defined]
        "peak_rss_rebuild_mb": peak_rss_mb(),
        "ann_saved_by_rebuild": any((home / "ann").glob("*.usearch")),
    }
    if spec["after"]:
        embedder.load()  # type: ignore[attr-defined]
        start = clock()
        out["shards_after"] = shard_info(kb)  # what the first search after a rebuild pays
        out["first_search_shards_s"] = clock() - start
        start = clock()
        kb.close()
        out["close_s"] = clock() - start
        out["peak_rss_with_ann_build_mb"] = peak_rss_mb()
    else:
        kb.close()
    return out


WORKERS: dict[str, Callable[[Result], Result]] = {
    "build": w_build,
    "reindex": w_reindex,
    "check": w_check,
    "remember": w_remember,
    "remember_big": w_remember_big,
    "bulk": w_bulk,
    "search": w_search,
    "rebuild": w_rebuild,
}


# --------------------------------------------------------------------------------------
# The parent: plans, runs workers, aggregates
# --------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_worker(name: str, spec: Result, scratch: Path, timeout: float = 3600) -> Result:
    path = scratch / f"spec-{name}-{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(spec))
    started = clock()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--spec", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    path.unlink(missing_ok=True)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result: Result = json.loads(line[len("RESULT ") :])
            result["worker_wall_s"] = clock() - started
            return result
    raise RuntimeError(f"worker {name} failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")


def copy_store(src: Path, dst: Path, *, skip: Sequence[str] = ()) -> None:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("lock", *skip))


def ensure_store(n: int, scratch: Path, threshold: int) -> tuple[Path, Result]:
    """The n-record store, built once and reused while it still opens and answers."""
    import corpus

    home = CACHE_DIR / store_name(n)
    marker = CACHE_DIR / f"{store_name(n)}.json"
    want = {"n": n, "seed": SEED, "generator": corpus.GENERATOR_VERSION, "namespace": NS}
    info: Result = json.loads(marker.read_text()) if marker.exists() else {}
    if home.exists() and all(info.get(k) == v for k, v in want.items()):
        problem = check_store(home, n, scratch, threshold)
        if problem is None:
            return home, {**info, "reused": True}
        log(f"cached store unusable ({problem}); re-indexing it from its log")
        try:
            reindex = run_worker("reindex", {"store": str(home)}, scratch)
            problem = check_store(home, n, scratch, threshold)
        except RuntimeError as exc:
            problem = str(exc).splitlines()[0]
        if problem is None:
            info["reindexed"] = {"at": _now_iso(), **reindex}
            marker.write_text(json.dumps(info, indent=2))
            return home, {**info, "reused": True}
        log(f"re-index failed ({problem}); building the store again")
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    log(f"building {home} ({n:,} records, vectors from the corpus cache, durability none)")
    built = run_worker("build", {"n": n, "store": str(home)}, scratch)
    info = {**want, "built_at": _now_iso(), "commit": git("rev-parse", "HEAD"), "build": built}
    marker.write_text(json.dumps(info, indent=2))
    problem = check_store(home, n, scratch, threshold)
    if problem is not None:
        raise RuntimeError(f"freshly built store fails its check: {problem}")
    return home, {**info, "reused": False}


def check_store(home: Path, n: int, scratch: Path, threshold: int) -> str | None:
    try:
        got = run_worker("check", {"store": str(home)}, scratch, timeout=1800)
    except RuntimeError as exc:
        return " ".join(str(exc).split("\n")[-2:])[:300]
    if got["records"] != n:
        return f"{got['records']} records, expected {n}"
    if got["hits"] == 0:
        return "search returned nothing"
    uses_ann = any(s["uses_ann"] for s in got["shards"])
    if uses_ann != (0 < threshold <= n):
        return f"uses_ann={uses_ann} with n={n}, threshold={threshold}"
    return None


def plan_queries(n: int, per_mode: int, warm: int) -> Result:
    """Distinct query texts: disjoint sets for dense and hybrid, so no LRU hit is timed."""
    import corpus

    texts = list(
        dict.fromkeys(q for q, _ in corpus.queries(4 * per_mode + 2 * warm + 200, SEED, n))
    )
    need = 3 * per_mode + warm + 1 + min(per_mode, 100)
    if len(texts) < need:
        raise RuntimeError(f"only {len(texts)} distinct queries, need {need}")
    it = iter(texts)

    def take(k: int) -> list[str]:
        return [next(it) for _ in range(k)]

    first = take(1)[0]
    warm_q = take(warm)
    hybrid = take(per_mode)
    dense = take(per_mode)
    parts = take(min(per_mode, 100))
    lexical = take(per_mode)
    return {
        "first": first,
        "warm": warm_q,
        "hybrid": hybrid,
        "dense": dense,
        "lexical": lexical,
        "parts": parts,
    }


def remember_texts(n_timed: int, n_warm: int, n_parts: int) -> Result:
    """Distinct corpus texts never filed in the benchmark store (so never cached)."""
    import corpus

    total = n_warm + n_timed + 3 * n_parts
    # Another seed's corpus: distinct texts, none of them in any embedding cache used here.
    pool = corpus.memories(total, SEED + 1)
    it = iter(pool)

    def take(k: int) -> list[str]:
        return [next(it) for _ in range(k)]

    return {
        "warm": take(n_warm),
        "timed": take(n_timed),
        "embed_only": take(n_parts),
        "cached": take(n_parts),
        "nosync": take(n_parts),
    }


def git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def host() -> Result:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    dirty = [ln[3:] for ln in git("status", "--porcelain", "--", "src").splitlines()]
    versions = {}
    for mod in ("numpy", "onnxruntime", "usearch", "tokenizers"):
        try:
            versions[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            versions[mod] = None
    import sqlite3

    versions["sqlite"] = sqlite3.sqlite_version
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "python": platform.python_version(),
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_src_files": dirty,
        "uncommitted_src_diff_sha1": hashlib.sha1(
            git("diff", "HEAD", "--", "src").encode()
        ).hexdigest(),
        "versions": versions,
        "date": _now_iso(),
    }


def busy() -> Result:
    """Load average and the busiest other processes: what else was running."""
    top = subprocess.run(
        ["ps", "-eo", "pcpu,rss,args", "--sort=-pcpu"], capture_output=True, text=True, check=False
    ).stdout.splitlines()[1:7]
    return {"loadavg": list(os.getloadavg()), "top": [" ".join(t.split())[:160] for t in top]}


def med(runs: Sequence[Result], *path: str) -> float:
    values = []
    for r in runs:
        v: Any = r
        for p in path:
            v = v[p]
        values.append(float(v))
    return median(values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=None, help="records in the search store")
    parser.add_argument("--runs", type=int, default=None, help="runs (medians are reported)")
    parser.add_argument("--quick", action="store_true", help="n=5,000, 1 run, fewer samples")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default results/)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = WORKERS[args.worker](json.loads(args.spec.read_text()))
        print("RESULT " + json.dumps(result), flush=True)
        return 0

    from kredenc.config import Settings

    n = args.n or (5_000 if args.quick else 100_000)
    runs = args.runs or (1 if args.quick else 3)
    quick = args.quick
    per_mode = 100 if quick else 300
    warm = 10 if quick else 20
    n_remember = 100 if quick else 300
    bulk_cached = min(n, 5_000 if quick else 20_000)
    bulk_embedded = 500 if quick else 2_000
    defaults = Settings()
    threshold = defaults.ann_threshold
    started = clock()
    before = busy()
    log(f"n={n:,} runs={runs} load={before['loadavg']}")
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    scratch_root = Path(tempfile.mkdtemp(prefix="store-", dir=CACHE_DIR))
    try:
        home, store_info = ensure_store(n, scratch_root, threshold)
        log(f"store ready: {home}")
        queries = plan_queries(n, per_mode, warm)
        r_texts = remember_texts(n_remember, warm, min(n_remember, 100))
        raw: dict[str, list[Result]] = {
            k: []
            for k in (
                "remember",
                "remember_1thread",
                "bulk_cached",
                "bulk_embedded",
                "search",
                "search_1thread",
                "rebuild",
            )
        }
        big: Result | None = None
        for run in range(runs):
            scratch = scratch_root / f"run{run}"
            scratch.mkdir()
            log(f"run {run + 1}/{runs}: remember")
            raw["remember"].append(
                run_worker(
                    "remember", {"store": str(scratch / "remember"), "texts": r_texts}, scratch
                )
            )
            if not quick:
                raw["remember_1thread"].append(
                    run_worker(
                        "remember",
                        {
                            "store": str(scratch / "remember-1t"),
                            "texts": r_texts,
                            "embed_threads": 1,
                            "short": True,
                        },
                        scratch,
                    )
                )
            log(f"run {run + 1}/{runs}: bulk filing")
            raw["bulk_cached"].append(
                run_worker(
                    "bulk",
                    {
                        "store": str(scratch / "bulk-cached"),
                        "count": bulk_cached,
                        "batch": BULK_BATCH,
                        "cached": True,
                    },
                    scratch,
                )
            )
            raw["bulk_embedded"].append(
                run_worker(
                    "bulk",
                    {
                        "store": str(scratch / "bulk-embedded"),
                        "count": bulk_embedded,
                        "batch": BULK_BATCH,
                        "cached": False,
                    },
                    scratch,
                )
            )
            log(f"run {run + 1}/{runs}: open + search")
            raw["search"].append(
                run_worker("search", {"store": str(home), "queries": queries}, scratch)
            )
            if not quick:
                raw["search_1thread"].append(
                    run_worker(
                        "search",
                        {"store": str(home), "queries": queries, "embed_threads": 1},
                        scratch,
                    )
                )
            log(f"run {run + 1}/{runs}: rebuild")
            copy = scratch / "rebuild"
            copy_store(home, copy)
            raw["rebuild"].append(
                run_worker("rebuild", {"store": str(copy), "after": run == 0}, scratch)
            )
            if run == 0 and not quick and n >= threshold:
                log("remember into a copy of the big store (shards and ANN loaded)")
                copy = scratch / "remember-big"
                copy_store(home, copy)
                big = run_worker(
                    "remember_big",
                    {
                        "store": str(copy),
                        "texts": {"warm": r_texts["embed_only"][:warm], "timed": r_texts["timed"]},
                    },
                    scratch,
                )
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    after = busy()
    after["commit"] = git("rev-parse", "HEAD")

    rem, bc, be = raw["remember"], raw["bulk_cached"], raw["bulk_embedded"]
    se, rb = raw["search"], raw["rebuild"]
    uses_ann = [s["uses_ann"] for s in se]
    rows: list[Result] = []

    def row(
        target: str,
        value: float,
        unit: str,
        limit: float | None,
        higher: bool = False,
        note: str = "",
    ) -> None:
        ok = None if limit is None else (value >= limit if higher else value <= limit)
        rows.append(
            {
                "target": target,
                "measured": f"{value:,.1f} {unit}" if value >= 100 else f"{value:.2f} {unit}",
                "limit": "" if limit is None else f"{'>=' if higher else '<='} {limit:,} {unit}",
                "pass": "" if ok is None else ("PASS" if ok else "FAIL"),
                "note": note,
                "value": value,
            }
        )

    row(
        "remember() p50 (MiniLM + fsync)",
        med(rem, "remember", "p50_ms"),
        "ms",
        12,
        note="fresh store, durability append",
    )
    row("remember() p95", med(rem, "remember", "p95_ms"), "ms", None)
    row("remember() p99", med(rem, "remember", "p99_ms"), "ms", None)
    row("  of which: embedding alone p50", med(rem, "embed_only", "p50_ms"), "ms", None)
    row(
        "  filing, cached vector, fsync p50",
        med(rem, "remember_cached_vector", "p50_ms"),
        "ms",
        None,
    )
    row(
        "  filing, cached vector, no fsync p50",
        med(rem, "remember_cached_vector_no_fsync", "p50_ms"),
        "ms",
        None,
    )
    if raw["remember_1thread"]:
        r1 = raw["remember_1thread"]
        row(
            "remember() p50, embed_threads=1",
            med(r1, "remember", "p50_ms"),
            "ms",
            None,
            note=f"embedding alone p50 {med(r1, 'embed_only', 'p50_ms'):.1f} ms",
        )
    if big is not None:
        row(
            f"remember() p50 into the {n // 1000}k store",
            big["remember"]["p50_ms"],
            "ms",
            None,
            note=f"ANN loaded: {any(s['uses_ann'] for s in big['shards'])}; 1 run",
        )
    row(
        "bulk remember_many, embedding excluded",
        med(bc, "records_per_s"),
        "rec/s",
        1000,
        higher=True,
        note=f"{bulk_cached:,} records, batches of {BULK_BATCH}, durability batch",
    )
    row(
        "bulk remember_many, embedding included",
        med(be, "records_per_s"),
        "rec/s",
        None,
        note=f"{bulk_embedded:,} records",
    )
    note = f"n={n:,}, ANN in use: {all(uses_ann)}"
    row(
        "search hybrid p50 (incl. query embedding)",
        med(se, "hybrid", "p50_ms"),
        "ms",
        15,
        note=note,
    )
    row("search hybrid p95", med(se, "hybrid", "p95_ms"), "ms", 30, note=note)
    row("search lexical p50", med(se, "lexical", "p50_ms"), "ms", None)
    row("search lexical p95", med(se, "lexical", "p95_ms"), "ms", 5)
    row("search dense p50 (incl. query embedding)", med(se, "dense", "p50_ms"), "ms", None)
    row("search dense p95", med(se, "dense", "p95_ms"), "ms", None)
    for mode in ("lexical", "dense", "hybrid"):
        row(
            f"  {mode}: process CPU time per query p50",
            med(se, mode, "cpu_p50_ms"),
            "ms",
            None,
            note="all threads; less load-sensitive than wall time",
        )
    if raw["search_1thread"]:
        s1 = raw["search_1thread"]
        for mode in ("hybrid", "dense"):
            row(
                f"search {mode} p50, embed_threads=1",
                med(s1, mode, "p50_ms"),
                "ms",
                None,
                note=f"p95 {med(s1, mode, 'p95_ms'):.1f} ms",
            )
    row(
        f"open a {n:,}-record store (cold process)",
        med(se, "open_s"),
        "s",
        1,
        note=(
            f"of which log scan {med(se, 'log_scan_s'):.2f} s; "
            f"import kredenc {med(se, 'import_s'):.2f} s not included"
        ),
    )
    row(
        "first search after open",
        med(se, "first_search_s"),
        "s",
        None,
        note=(
            f"model load {med(se, 'model_load_s'):.2f} s + shard load "
            f"{med(se, 'shard_load_s'):.2f} s + query {med(se, 'first_query_s'):.2f} s"
        ),
    )
    row(
        f"rebuild {n:,} records (cached embeddings)",
        med(rb, "rebuild_s"),
        "s",
        60,
        note=""
        if rb[0]["ann_saved_by_rebuild"] or n < threshold
        else "rebuild leaves the ANN graph to the next search",
    )
    if "first_search_shards_s" in rb[0]:
        row(
            "  first search after rebuild: shard load + ANN build",
            rb[0]["first_search_shards_s"],
            "s",
            None,
            note="1 run",
        )
    row("peak RSS: open + first search + searches", med(se, "peak_rss_mb"), "MB", 600)
    row("peak RSS: rebuild", med(rb, "peak_rss_rebuild_mb"), "MB", 600)
    if "peak_rss_with_ann_build_mb" in rb[0]:
        row(
            "peak RSS: rebuild + ANN build at next search",
            rb[0]["peak_rss_with_ann_build_mb"],
            "MB",
            None,
            note="1 run",
        )
    print_table(
        f"kredenc store, n={n:,}, medians of {runs} run(s), load {before['loadavg']}",
        [{k: v for k, v in r.items() if k != "value"} for r in rows],
    )
    results = {
        "n": n,
        "runs": runs,
        "quick": quick,
        "wall_s": clock() - started,
        "host": host(),
        "busy_before": before,
        "busy_after": after,
        "settings": {
            k: getattr(defaults, k)
            for k in (
                "durability",
                "fusion",
                "weight_dense",
                "weight_lexical",
                "embed_threads",
                "ann_threshold",
                "ann_dtype",
                "ann_connectivity",
                "ann_expansion_add",
                "ann_expansion_search",
                "leg_k",
                "rrf_k",
            )
            if hasattr(defaults, k)
        },
        "store": {"path": str(home), **store_info},
        "sizes": {
            "remember_timed": n_remember,
            "bulk_cached": bulk_cached,
            "bulk_embedded": bulk_embedded,
            "queries_per_mode": per_mode,
            "k": K,
        },
        "table": rows,
        "remember_big": big,
        "raw": raw,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"\nwrote {args.out}")
    else:
        write_results("store", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
