"""What the resident memory of embedding a corpus is made of (issue 16).

Each configuration runs in a fresh child process: the real MiniLM embeds the first
``--limit`` texts of a BEIR corpus in calls of 256 (as ``EngineRetriever`` files them),
with onnxruntime session options and glibc's ``MALLOC_ARENA_MAX`` varied. It reports
VmRSS after import and after loading the model, the peak (VmHWM) and RssAnon at the
end, the Python heap's peak (tracemalloc, with ``--tracemalloc``) and texts per second
of embedding alone (the same texts, the same batches, so configurations compare).

    nice -n 10 .venv/bin/python benchmarks/probe_ingest_memory.py \
        --corpus ../shared/data/scifact --limit 300

Prints a table and writes benchmarks/results/probe-ingest-memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import percentile, print_table, write_results

#: Each is a change from onnxruntime's defaults (arena on, memory pattern on, every graph
#: optimisation) with runs of at most 2,048 padded word pieces and no heap trim, which is
#: how kredenc built its sessions before issue 16's fix.
CONFIGS: dict[str, dict[str, Any]] = {
    "arena on (onnxruntime default)": {},
    "arena on, MALLOC_ARENA_MAX=2": {"env": {"MALLOC_ARENA_MAX": "2"}},
    "arena off": {"arena": False},
    "arena off, MALLOC_ARENA_MAX=2": {"arena": False, "env": {"MALLOC_ARENA_MAX": "2"}},
    "arena off, no mem pattern": {"arena": False, "mem_pattern": False},
    "no mem pattern": {"mem_pattern": False},
    "1024 tokens/run": {"max_batch_tokens": 1024},
    "no mem pattern, 1024 tokens/run": {"mem_pattern": False, "max_batch_tokens": 1024},
    "no mem pattern, 512 tokens/run": {"mem_pattern": False, "max_batch_tokens": 512},
    "no constant folding": {"disabled_optimizers": ["ConstantFolding"]},
    "malloc_trim after load": {"trim": True},
    # what kredenc does since issue 16
    "no mem pattern, 1024 tokens/run, malloc_trim after load": {
        "mem_pattern": False,
        "max_batch_tokens": 1024,
        "trim": True,
    },
}


def status() -> dict[str, float]:
    out: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(rest.split()[0]) / 1024
    return out


def child(corpus: Path, limit: int, cfg: dict[str, Any], trace: bool) -> dict[str, Any]:
    import onnxruntime as ort

    base = status()["VmRSS"]
    real = ort.InferenceSession

    def session(path: str, sess_options: Any = None, **kw: Any) -> Any:
        if sess_options is not None:
            sess_options.enable_cpu_mem_arena = cfg.get("arena", True)
            sess_options.enable_mem_pattern = cfg.get("mem_pattern", True)
        if cfg.get("disabled_optimizers"):
            kw["disabled_optimizers"] = cfg["disabled_optimizers"]
        return real(path, sess_options=sess_options, **kw)

    ort.InferenceSession = session  # type: ignore[misc]
    from kredenc.providers import onnx_runtime

    if not cfg.get("trim"):
        onnx_runtime.release_free_heap = lambda: False  # type: ignore[assignment]
    from kredenc.eval.beir import load_beir
    from kredenc.providers.embed.minilm import MiniLMEmbedder

    dataset = load_beir(corpus)
    docs = dataset.docs[:limit]
    queries = [q.text for q in dataset.queries[:100]]
    texts = [d.text.strip() for d in docs]
    after_import = status()["VmRSS"]
    emb = MiniLMEmbedder(max_batch_tokens=cfg.get("max_batch_tokens", 2048))
    emb.load()
    after_load = status()["VmRSS"]
    if trace:
        import tracemalloc

        tracemalloc.start()
    start = time.perf_counter()
    cpu = time.process_time()
    for i in range(0, len(texts), 256):
        emb.embed(texts[i : i + 256])
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    heap = tracemalloc.get_traced_memory()[1] / 2**20 if trace else None
    latencies = []
    for q in queries:
        t0 = time.perf_counter()
        emb.embed([q])
        latencies.append((time.perf_counter() - t0) * 1000)
    end = status()
    return {
        "base_mb": base,
        "after_import_mb": after_import,
        "after_load_mb": after_load,
        "peak_mb": end["VmHWM"],
        "end_rss_mb": end["VmRSS"],
        "end_anon_mb": end["RssAnon"],
        "py_heap_peak_mb": heap,
        "texts_per_s": len(texts) / wall,
        "texts_per_cpu_s": len(texts) / cpu,
        "query_p50_ms": percentile(latencies, 50),
        "peak_after_queries_mb": status()["VmHWM"],
    }


def query_ab(corpus: Path, rounds: int) -> dict[str, Any]:
    """Query latency with and without the memory pattern, two sessions of the full MiniLM
    in one process, queries alternating between them (a busy machine slows both alike)."""
    import onnxruntime as ort

    from kredenc.eval.beir import load_beir
    from kredenc.providers.embed.minilm import MiniLMEmbedder

    real = ort.InferenceSession
    queries = [q.text for q in load_beir(corpus).queries][:rounds]
    times: dict[str, list[float]] = {"mem pattern on": [], "mem pattern off": []}
    embedders = {}
    for name in times:

        def session(
            path: str, sess_options: Any = None, _on: bool = name.endswith("on"), **kw: Any
        ) -> Any:
            sess_options.enable_mem_pattern = _on
            return real(path, sess_options=sess_options, **kw)

        ort.InferenceSession = session  # type: ignore[misc]
        embedders[name] = MiniLMEmbedder()
        embedders[name].load()
    ort.InferenceSession = real  # type: ignore[misc]
    for q in queries:
        for name, emb in embedders.items():
            t0 = time.perf_counter()
            emb.embed([q])
            times[name].append((time.perf_counter() - t0) * 1000)
    return {
        name: {"p50_ms": percentile(t, 50), "p90_ms": percentile(t, 90), "n": len(t)}
        for name, t in times.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--only", action="append", help="a configuration name (repeatable)")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument(
        "--query-ab", type=int, metavar="N", help="instead: N queries, memory pattern on/off"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.query_ab:
        ab = query_ab(args.corpus, args.query_ab)
        rows = [{"session": k, **{m: f"{x:.2f}" for m, x in v.items()}} for k, v in ab.items()]
        print_table(f"query latency, {args.query_ab} SciFact queries alternating", rows)
        write_results("probe-query-mem-pattern", ab)
        return 0
    if args.child:
        res = child(args.corpus, args.limit, CONFIGS[args.child], args.tracemalloc)
        print(json.dumps(res))
        return 0
    results: dict[str, Any] = {}
    for name, cfg in CONFIGS.items():
        if args.only and name not in args.only:
            continue
        env = {**os.environ, **cfg.get("env", {})}
        cmd = [
            sys.executable,
            __file__,
            "--corpus",
            str(args.corpus),
            "--limit",
            str(args.limit),
            "--child",
            name,
        ]
        if args.tracemalloc:
            cmd.append("--tracemalloc")
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return 1
        results[name] = json.loads(out.stdout.splitlines()[-1])
        results[name]["load_avg_1m"] = os.getloadavg()[0]
        print(name, results[name], flush=True)
    rows = [
        {
            "config": name,
            "after load": f"{r['after_load_mb']:.0f} MB",
            "peak": f"{r['peak_mb']:.0f} MB",
            "end anon": f"{r['end_anon_mb']:.0f} MB",
            "texts/CPU-s": f"{r['texts_per_cpu_s']:.2f}",
            "texts/s": f"{r['texts_per_s']:.2f}",
            "query p50": f"{r.get('query_p50_ms', float('nan')):.1f} ms",
            "load": f"{r['load_avg_1m']:.1f}",
        }
        for name, r in results.items()
    ]
    print_table(f"embedding {args.limit} texts of {args.corpus.name} in calls of 256", rows)
    write_results(
        "probe-ingest-memory", {"corpus": str(args.corpus), "limit": args.limit, "configs": results}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
