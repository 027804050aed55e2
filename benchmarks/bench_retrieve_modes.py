"""Retrieval modes of the retrieve role on multi-hop questions: is the automatic choice
(iterative for bridge questions, graph for joined names, else hybrid) better than
plain hybrid search?

Data: HotpotQA-200 and MuSiQue-200 from ``../shared/data/multihop``, filed as
``benchmarks/fit_grade.py`` files them (run that first: the store and its vectors are
reused from /tmp/kredenc-fit-grade). Each question runs through the ``Retrieve`` tool
(rules, ``k`` = ``--k``) with the mode forced (hybrid, iterative) and chosen (auto); the
metric is the share of a question's gold paragraphs in the top 5 / top k of
``retrieve.chunks`` (recall@5, recall@k), with 95 % bootstrap intervals over
questions, and the paired difference to hybrid. HotpotQA's own labels (bridge /
comparison) show how the rules' question shapes match them. The filed passages have
no graph edges, so graph mode searches as hybrid does here.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_retrieve_modes.py [--data ../shared/data]

``--fusion`` sets how one iteration's result lists are fused (``retrieve.FUSION``);
``--max-hops`` the iterative mode's bridge rounds (``retrieve.MAX_HOPS``).
Prints tables; writes benchmarks/results/retrieve-modes-<fusion>.json (with
``-hops<N>`` before ``.json`` when ``--max-hops`` is given).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _common import print_table, write_results

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
WORK = Path("/tmp/kredenc-fit-grade")
MODES = ("hybrid", "iterative", "auto")


def _ci(values: np.ndarray, boot: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(14)
    means = [values[rng.integers(0, len(values), len(values))].mean() for _ in range(boot)]
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(lo), float(hi)


def _fmt(v: tuple[float, float, float]) -> str:
    return f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--fusion", choices=("interleave", "rrf"), default=None)
    parser.add_argument("--max-hops", type=int, choices=(1, 2, 3), default=None)
    parser.add_argument(
        "--sets",
        default="hotpotqa_dev200,musique_dev200",
        help="comma-separated; scifact adds fit_grade.py's 200 SciFact train claims",
    )
    args = parser.parse_args(argv)
    if not (WORK / "store").is_dir():
        print(f"error: no store in {WORK}; run benchmarks/fit_grade.py first", file=sys.stderr)
        return 2

    import onnxruntime  # noqa: F401  (before usearch, see benchmarks/corpus.py)

    from fit_grade import scifact_claims
    from kredenc import Kredenc
    from kredenc.eval import load_multihop
    from kredenc.loop.mind import LocalMind
    from kredenc.loop.roles import retrieve
    from kredenc.loop.roles.retrieve import Retrieve

    if args.fusion:
        retrieve.FUSION = args.fusion
    if args.max_hops:
        retrieve.MAX_HOPS = args.max_hops
    from kredenc.loop.tool import Services

    results: dict[str, Any] = {
        "k": args.k,
        "fusion": retrieve.FUSION,
        "max_hops": retrieve.MAX_HOPS,
    }
    rows: list[dict[str, Any]] = []
    shape_rows: list[dict[str, Any]] = []
    with Kredenc.open(
        WORK / "store", "fit", durability="none", embed_cache=WORK / "embed.db"
    ) as kb:
        for name in args.sets.split(","):
            ns = name.split("_")[0]
            if ns == "scifact":  # single-hop claims: what the modes cost a plain question
                _, queries, gold_of = scifact_claims(args.data)  # as fit_grade.py filed them
                labels: dict[str, str] = {}
            else:
                data = load_multihop(
                    args.data / "multihop" / f"{name}.json",
                    args.data / "multihop" / f"{name}_corpus.json",
                )
                queries, gold_of = data.queries, data.gold
                raw = json.loads((args.data / "multihop" / f"{name}.json").read_text())
                labels = {str(r.get("_id", r.get("id"))): r.get("type", "") for r in raw}
            recall: dict[str, dict[int, list[float]]] = {m: {5: [], args.k: []} for m in MODES}
            ms: dict[str, float] = dict.fromkeys(MODES, 0.0)
            shapes: dict[tuple[str, str], int] = {}
            for q in queries:
                gold = set(gold_of[q.qid])
                for mode in MODES:
                    options = {"k": args.k} | ({} if mode == "auto" else {"retrieve_mode": mode})
                    services = Services(kb.store, ns, kb.settings, options=options)
                    mind = LocalMind({"ask.question": q.text, "loop.iteration": 1})
                    t0 = time.perf_counter()
                    Retrieve().run(mind, services)
                    ms[mode] += (time.perf_counter() - t0) * 1000
                    chunks = mind.read("retrieve.chunks")
                    ids = list(dict.fromkeys(str(h.meta.get("eval_id")) for h in chunks))
                    for depth in (5, args.k):
                        recall[mode][depth].append(len(gold & set(ids[:depth])) / len(gold))
                    if mode == "auto":
                        key = (labels.get(q.qid, "") or "-", mind.read("retrieve.mode"))
                        shapes[key] = shapes.get(key, 0) + 1
            out: dict[str, Any] = {"questions": len(queries), "shapes": {}}
            base = {d: np.array(recall["hybrid"][d]) for d in (5, args.k)}
            for mode in MODES:
                entry: dict[str, Any] = {"ms_per_question": ms[mode] / len(queries)}
                row: dict[str, Any] = {"set": ns, "mode": mode}
                for depth in (5, args.k):
                    vals = np.array(recall[mode][depth])
                    entry[f"recall@{depth}"] = _ci(vals, args.boot)
                    entry[f"delta@{depth}"] = _ci(vals - base[depth], args.boot)
                    row[f"recall@{depth}"] = _fmt(entry[f"recall@{depth}"])
                    row[f"vs hybrid @{depth}"] = _fmt(entry[f"delta@{depth}"])
                row["ms/q"] = round(entry["ms_per_question"], 1)
                out[mode] = entry
                rows.append(row)
            for (label, mode), n in sorted(shapes.items()):
                out["shapes"][f"{label}->{mode}"] = n
                shape_rows.append({"set": ns, "label": label, "auto mode": mode, "questions": n})
            results[ns] = out
    print_table(f"Retrieve modes, recall of gold paragraphs (k = {args.k}, 95 % CI)", rows)
    print_table("Question labels and the mode the rules chose", shape_rows)
    suffix = f"-hops{args.max_hops}" if args.max_hops else ""
    write_results(f"retrieve-modes-{retrieve.FUSION}{suffix}", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
