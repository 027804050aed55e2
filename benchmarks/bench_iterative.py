"""Iterative multi-hop search (``search(..., iterative=True, hops=N)``) on HotpotQA-200 and
MuSiQue-200: every depth, every fusion candidate, the choice made on one set and
reported on the other.

Each set is filed as ``kredenc eval multihop`` files it (``EngineRetriever``, passages
with ``mentions`` edges, a fresh store per set, the shared eval embedding cache). Per
question the harness runs the question (round 0) and :func:`kredenc.retrieve.iterative.follow`
to three bridge rounds once, timing every search; a depth-``d`` search is exactly the
question plus the rounds up to ``d`` (the rounds are sequential), so every depth and
every fusion of those lists is scored from the one run, as ``search(iterative=True,
hops=d)`` with that fusion returns it. The graph walk of the eval's default
(``hops=1`` without ``iterative``) is run beside it as the reference.

Candidates: "interleave" with the round-``r`` list weighted ``w ** r`` for w in
:data:`WEIGHTS` (w = 1: a plain interleave, the loop's), and "rrf". The weight is
chosen on one set (best recall@5 averaged over depths 1-3) and reported on the other.
recall@k / all-gold@k with 95 % bootstrap CIs over questions (1,000 resamples); cost =
searches per question and the milliseconds they took (sum of the timed searches).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_iterative.py [--data ../shared/data]

Prints tables; writes benchmarks/results/iterative.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import machine, print_table, write_results

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
CACHE = Path("~/.cache/kredenc/eval-embeddings.db").expanduser()
SETS = ("hotpotqa_dev200", "musique_dev200")
DEPTHS = (0, 1, 2, 3)
WEIGHTS = (1.0, 0.8, 0.6, 0.5, 0.4, 0.3)
K = 10  # what kredenc eval multihop asks for (the largest of its cut-offs)


def _candidates() -> list[tuple[str, float]]:
    return [("interleave", w) for w in WEIGHTS] + [("rrf", 1.0)]


def _label(fusion: str, weight: float) -> str:
    return "rrf" if fusion == "rrf" else f"interleave w={weight:g}"


def run_set(name: str, data_dir: Path, limit: int | None) -> dict[str, Any]:
    """File one set and run every question once to depth 3 (and the graph reference)."""
    import onnxruntime  # noqa: F401  (before usearch, see benchmarks/corpus.py)

    from kredenc import Kredenc
    from kredenc.eval import load_multihop
    from kredenc.eval.engine_retriever import EngineRetriever
    from kredenc.retrieve import iterative
    from kredenc.retrieve.query import search

    data = load_multihop(
        data_dir / "multihop" / f"{name}.json", data_dir / "multihop" / f"{name}_corpus.json"
    )
    queries = data.queries[:limit] if limit else data.queries
    out: dict[str, Any] = {"questions": len(queries), "per_question": []}
    with tempfile.TemporaryDirectory(prefix="kredenc-iter-") as home:
        kb = Kredenc.open(home, "eval", durability="none", embed_cache=CACHE)
        try:
            retriever = EngineRetriever(kb.store, mention_links=kb.settings.mention_links)
            t0 = time.perf_counter()
            retriever.index(data.docs)
            out["index_s"] = time.perf_counter() - t0
            out["links"] = retriever.links
            depth = min(1000, K * 4) if retriever._chunked else K  # as EngineRetriever.search
            ns = retriever.namespace

            def ids(hits: Sequence[Any]) -> list[str]:
                return list(dict.fromkeys(str(h.meta.get("eval_id", h.id)) for h in hits))[:K]

            for q in queries:
                ms: list[float] = []

                def find(text: str, _ms: list[float] = ms) -> list[Any]:
                    t = time.perf_counter()
                    hits = search(kb.store, ns, text, k=depth)
                    _ms.append((time.perf_counter() - t) * 1000)
                    return hits

                first = find(q.text)
                followed = iterative.follow(q.text, first, find, hops=max(DEPTHS))
                t = time.perf_counter()
                graph = search(kb.store, ns, q.text, k=depth, hops=1)
                graph_ms = (time.perf_counter() - t) * 1000
                row: dict[str, Any] = {
                    "qid": q.qid,
                    "gold": data.gold[q.qid],
                    "graph1": ids(graph),
                    "graph1_ms": graph_ms,
                    "ms": ms,
                    "hops": [0, *followed.hops],
                    "ranked": {},
                }
                lists = [first, *followed.lists]
                for d in DEPTHS:
                    keep = [i for i, h in enumerate(row["hops"]) if h <= d]
                    for fusion, w in _candidates():
                        fused = iterative.fuse_hits(
                            [lists[i] for i in keep],
                            fusion=fusion,
                            weights=[w ** row["hops"][i] for i in keep],
                            limit=depth,
                        )
                        row["ranked"][f"{_label(fusion, w)}|{d}"] = ids(fused)
                out["per_question"].append(row)
        finally:
            kb.close()
    return out


def score(rows: list[dict[str, Any]], key: str, d: int | None) -> dict[str, Any]:
    from kredenc.eval.metrics import all_at_k, mean_ci, recall_at_k

    m: dict[str, Any] = {}
    for k in (2, 5, 10):
        for metric, fn in (("recall", recall_at_k), ("all_gold", all_at_k)):
            vals = [
                fn(r["graph1"] if d is None else r["ranked"][f"{key}|{d}"], r["gold"], k)
                for r in rows
            ]
            m[f"{metric}@{k}"] = (statistics.fmean(vals), *mean_ci(vals))
    if d is None:
        m["searches"] = 1.0
        m["ms"] = statistics.fmean(r["graph1_ms"] for r in rows)
    else:
        n = [sum(1 for h in r["hops"] if h <= d) for r in rows]
        m["searches"] = statistics.fmean(n)
        m["ms"] = statistics.fmean(sum(r["ms"][:c]) for r, c in zip(rows, n, strict=True))
    return m


def _fmt(v: tuple[float, float, float]) -> str:
    return f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=None, help="First N questions per set.")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"machine": machine(), "k": K, "sets": {}}
    runs = {name.split("_")[0]: run_set(name, args.data, args.limit) for name in SETS}
    table: list[dict[str, Any]] = []
    for ns, run in runs.items():
        rows = run["per_question"]
        entry: dict[str, Any] = {
            "questions": run["questions"],
            "index_s": run["index_s"],
            "links": run["links"],
            "graph1": score(rows, "", None),
            "candidates": {},
        }
        for fusion, w in _candidates():
            label = _label(fusion, w)
            entry["candidates"][label] = {d: score(rows, label, d) for d in DEPTHS}
        results["sets"][ns] = entry
    names = list(runs)
    for chosen_on, reported_on in (names, names[::-1]):
        cands = results["sets"][chosen_on]["candidates"]
        best = max(
            cands, key=lambda c: statistics.fmean(cands[c][d]["recall@5"][0] for d in (1, 2, 3))
        )
        results[f"chosen_on_{chosen_on}"] = best
        rep = results["sets"][reported_on]
        g = rep["graph1"]
        table.append(
            {
                "chosen on": chosen_on,
                "reported on": reported_on,
                "config": "graph hops=1 (eval default)",
                "recall@5": _fmt(g["recall@5"]),
                "all-gold@5": _fmt(g["all_gold@5"]),
                "searches/q": f"{g['searches']:.2f}",
                "ms/q": f"{g['ms']:.0f}",
            }
        )
        for d in DEPTHS:
            m = rep["candidates"][best][d]
            table.append(
                {
                    "chosen on": chosen_on,
                    "reported on": reported_on,
                    "config": f"iterative hops={d} ({best})",
                    "recall@5": _fmt(m["recall@5"]),
                    "all-gold@5": _fmt(m["all_gold@5"]),
                    "searches/q": f"{m['searches']:.2f}",
                    "ms/q": f"{m['ms']:.0f}",
                }
            )
    grid: list[dict[str, Any]] = []
    for ns in names:
        for label, by_depth in results["sets"][ns]["candidates"].items():
            for d in DEPTHS:
                m = by_depth[d]
                grid.append(
                    {
                        "set": ns,
                        "fusion": label,
                        "hops": d,
                        "R@2": f"{m['recall@2'][0]:.3f}",
                        "R@5": _fmt(m["recall@5"]),
                        "AG@5": _fmt(m["all_gold@5"]),
                        "R@10": f"{m['recall@10'][0]:.3f}",
                        "searches/q": f"{m['searches']:.2f}",
                    }
                )
    for row in runs.values():
        row.pop("per_question")
    print_table("Every candidate at every depth (95 % CI)", grid)
    print_table("Chosen on one set, reported on the other (95 % CI)", table)
    results["machine_after"] = machine()
    write_results("iterative", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
