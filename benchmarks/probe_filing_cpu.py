"""What filing the proxy's turns costs in CPU, one at a time against in batches.

``bench_server.py --proxy-only`` reports the server's CPU per proxied request, but on a
shared 2-core box that figure swings by a few ms with the other sessions' load. This
probe measures the filing alone, in one process: ``--turns`` turns (a
``proxy_questions`` question and the scripted upstream's "Noted.") are handed to a
``recall.filing.TurnFiler`` over a fresh store with the real MiniLM, either each on its
own (as the proxy's filer filed them before it batched: one embedding call, one log
append and one index transaction per turn) or written as one batch; either way they
come in bursts of ``--burst`` (what 8 lockstep clients hand over together). It prints
the process's CPU per turn for each way and each ``embed_threads``.

    PYTHONPATH=src:benchmarks python benchmarks/probe_filing_cpu.py --turns 240
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnxruntime  # noqa: F401  (before usearch: see corpus.py)

from bench_server import proxy_questions
from kredenc import Kredenc
from kredenc.recall.filing import TurnFiler

REPLY = "Noted."  # what bench_recall's scripted upstream answers


class OneAtATime:
    """The facade as a sink that can only file: each turn written by itself."""

    def __init__(self, kb: Kredenc) -> None:
        self.kb = kb

    def file_turns(self, session_id: str, turns: Sequence[Mapping[str, Any]]) -> list[str]:
        return self.kb.file_turns(session_id, turns)


def cpu_per_turn(questions: Sequence[str], *, burst: int, batched: bool, threads: int) -> float:
    """Process CPU ms per turn filed (warm-up excluded), on a fresh store."""
    with (
        tempfile.TemporaryDirectory() as home,
        Kredenc.open(Path(home), embed_threads=threads) as kb,
    ):
        filer = TurnFiler(kb if batched else OneAtATime(kb))
        for n, q in enumerate(questions[:8]):  # warm-up: the model and the store
            filer.submit(f"warm-{n}", [{"role": "user", "content": q}], REPLY)
        filer.flush()
        rest = questions[8:]
        began = time.process_time()
        for start in range(0, len(rest), burst):
            for n, q in enumerate(rest[start : start + burst]):
                filer.submit(f"s-{start + n}", [{"role": "user", "content": q}], REPLY)
            filer.flush()
        spent = time.process_time() - began
        filer.close()
    return spent * 1000 / len(rest)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=240)
    parser.add_argument("--burst", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    questions = proxy_questions(100_000)[: args.turns + 8]
    rows = []
    for r in range(args.rounds):
        for threads in (2, 1):
            for name, batched in (("one at a time", False), ("batched", True)):
                ms = cpu_per_turn(questions, burst=args.burst, batched=batched, threads=threads)
                row = {"round": r + 1, "threads": threads, "filing": name, "cpu_ms_per_turn": ms}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
