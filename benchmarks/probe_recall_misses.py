"""Probe: why recall's block misses a LongMemEval question's evidence.

Files one question's haystack as ``bench_recall.py --quality-only`` files it (user
turns of their sessions, each at its session's date) and recalls the question at the
default budget (``dry_run``), with ``recall(..., trace=[])`` reporting the fate of every
candidate (``recall.reflex.STAGES``). Prints, per mode, the evidence turns' fates, then
the first ``--show`` candidates in fused order with their fate (``injected``, ``chars``:
did not fit the characters, ``items``: past the item count, …), the evidence starred.

    cd benchmarks && PYTHONPATH=../src:. python probe_recall_misses.py 6 21 \\
        [--data ../../shared/data] [--show 12]

The question numbers are positions among the 50 scored questions, as in
``benchmarks/results/recall-quality.json``'s per-question lists.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench_feedback import CACHE
from bench_recall import _file


def main(argv: Sequence[str] | None = None) -> int:
    from kredenc import Kredenc
    from kredenc.eval.longmemeval import load_longmemeval
    from kredenc.recall.reflex import recall

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", nargs="+", type=int, help="Question positions (0-49).")
    ap.add_argument("--data", type=Path, default=Path("../../shared/data"))
    ap.add_argument("--show", type=int, default=12, help="Candidates to list per mode.")
    args = ap.parse_args(argv)
    data = load_longmemeval(
        args.data / "longmemeval" / "longmemeval_s_dev66.json.gz", granularity="turn"
    )
    groups = list(data.groups())
    with tempfile.TemporaryDirectory(prefix="kredenc-misses-") as home:
        kb = Kredenc.open(home, "eval", durability="none", embed_cache=CACHE)
        try:
            for n in args.questions:
                group = groups[n]
                kb.use_namespace(f"misses-{n}")
                _file(
                    kb,
                    group.docs,
                    lambda d: str(d.meta["session_id"]),
                    lambda d: d.meta.get("time"),
                )
                (q,) = group.queries
                hay = data.haystacks[q.qid]
                gold = {
                    d.id for d, lab in zip(hay.docs, hay.labels, strict=True) if "answer" in lab
                }
                text_of = {d.id: d.text for d in group.docs}
                for mode in ("hybrid", "lexical"):
                    trace: list = []
                    recall(
                        kb.store,
                        kb.namespace,
                        [{"role": "user", "content": q.text}],
                        session_id=f"q-{time.monotonic_ns()}",
                        session_start=q.meta.get("asked_at") or time.time(),
                        time_budget_ms=10_000,
                        mode=mode,
                        dry_run=True,
                        trace=trace,
                    )
                    print(f"\nQ{n} [{mode}] {q.text}")
                    for f in trace:
                        if str(f.meta.get("eval_id")) in gold:
                            print(f"  evidence: {f.stage}, rank {f.rank}")
                    for f in sorted(trace, key=lambda f: f.rank)[: args.show]:
                        eid = str(f.meta.get("eval_id"))
                        star = "*" if eid in gold else " "
                        print(f"  {f.rank:3d} {f.stage:10s} {star} {text_of.get(eid, '')[:110]!r}")
        finally:
            kb.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
