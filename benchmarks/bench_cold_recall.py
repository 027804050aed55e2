"""The first recall of a fresh process, at 100,000 memories (issue 16's cold start).

A process that opens a store and recalls at once finds nothing loaded: the query model
and the vector shards (0.9 s at 100,000 vectors with saved ANN graphs). Each scenario
runs in a fresh subprocess that opens ``bench_store.py``'s 100,000-memory store
read-only (real MiniLM) and recalls with the default 50 ms time budget:

- ``no warm-up, at once``: a host that opened with ``recall_warm_at_open=False`` and
  recalls at once;
- ``warm at open, at once``: the default open, recalling at once;
- ``warm at open, after 3 s``: the default open, recalling 3 s later (a chat's first
  message).

For each: the first recall's wall time, whether its dense leg ran, its warnings, and the
p50 of the next 20 recalls (distinct messages, after the vectors are loaded).

    .venv/bin/python benchmarks/bench_cold_recall.py [--runs 3]

Prints a table; writes benchmarks/results/cold-recall.json. Without the store, it is
built first (``bench_store.ensure_store``: minutes, from the corpus's cached vectors).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import machine, print_table, write_results

HERE = Path(__file__).resolve().parent
N = 100_000

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import onnxruntime  # before usearch (benchmarks/corpus.py)
    from kredenc import Kredenc
    home, ns, warm, wait, queries = sys.argv[1], sys.argv[2], sys.argv[3] == "1", \\
        float(sys.argv[4]), json.loads(sys.argv[5])
    kb = Kredenc.open(home, ns, read_only=True, recall_warm_at_open=warm)
    time.sleep(wait)
    def ask(text, session):
        started = time.perf_counter()
        r = kb.recall([{"role": "user", "content": text}], session_id=session)
        return (time.perf_counter() - started) * 1000, r
    first_ms, first = ask(queries[0], "cold-0")
    ready = getattr(kb.index, "vectors_ready", None)
    if ready is not None:
        ready(60.0)
    rest = [ask(q, f"cold-{i}")[0] for i, q in enumerate(queries[1:], 1)]
    print("RESULT " + json.dumps({
        "first_ms": first_ms, "dense": "dense" in first.timings_ms,
        "warnings": first.warnings, "rest_ms": rest,
    }))
    kb.close()
    """
)

SCENARIOS = (
    ("no warm-up, at once", False, 0.0),
    ("warm at open, at once", True, 0.0),
    ("warm at open, after 3 s", True, 3.0),
)


def store() -> Path:
    """bench_store.py's 100,000-memory store, built first when missing."""
    import bench_store
    from kredenc.config import Settings

    scratch = Path(tempfile.mkdtemp(prefix="store-", dir=bench_store.CACHE_DIR))
    home, _ = bench_store.ensure_store(N, scratch, Settings().ann_threshold)
    return home


def run(home: Path, warm: bool, wait: float, queries: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    argv = [str(home), "bench", "1" if warm else "0", str(wait), json.dumps(queries)]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *argv],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not line:
        raise RuntimeError(done.stderr[-2000:])
    result: dict[str, Any] = json.loads(line[-1][len("RESULT ") :])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    from bench_recall import distinct_queries

    home = store()
    pool = distinct_queries(N, 21 * args.runs * len(SCENARIOS))
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"machine": machine(), "n": N, "runs": args.runs, "scenarios": {}}
    at = 0
    for name, warm, wait in SCENARIOS:
        got = []
        for _ in range(args.runs):
            got.append(run(home, warm, wait, pool[at : at + 21]))
            at += 21
        firsts = [g["first_ms"] for g in got]
        rest = [ms for g in got for ms in g["rest_ms"]]
        out["scenarios"][name] = got
        rows.append(
            {
                "scenario": name,
                "first recall ms (each run)": ", ".join(f"{x:.0f}" for x in firsts),
                "dense leg ran": f"{sum(g['dense'] for g in got)}/{len(got)}",
                "next 20 p50 ms": f"{statistics.median(rest):.1f}",
                "first warning": (got[0]["warnings"] or [""])[0][:70],
            }
        )
    print_table(f"The first recall of a fresh process at {N:,} memories (50 ms budget)", rows)
    write_results("cold-recall", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
