"""Late interaction (``rerank = "maxsim"``: MaxSim over all-MiniLM-L6-v2's token
vectors) against the default fused order, on the dev sets (issue 17).

Each set is filed as ``bench_feedback`` files it (``EngineRetriever`` in one store per
set, the shared eval embedding cache). A fixed-seed sample of each set's questions
(``--sample``; the same questions for every candidate, so the comparisons are paired)
is searched once through ``retrieve.search.search`` with the default settings at the
eval's depth (the top 10 ids; 40 chunks for chunked sets, at least ``N_MAX`` hits;
one graph hop on the multihop sets). The top ``N_MAX`` hits are then scored once by the shipped
``MaxSimReranker`` (the texts ``retrieve.rerank`` hands a reranker: title, newline,
text) and every candidate is an order of those hits:

* ``maxsim N=n``: the top ``n`` in MaxSim order, the rest as fused (what
  ``rerank="maxsim"`` with ``rerank_depth=n`` does when ``n`` is at least the search's
  ``k``; the search path reranks at least ``k`` hits);
* ``mix N=n w=x``: the top ``n`` by ``(1 - x) * fused + x * maxsim``, each min-max
  scaled over those ``n`` (not an option of the engine: measured to see whether a mix
  would be worth one).

The candidate reported on a set is chosen on the others (best mean paired delta of
their headline metrics), as bench_feedback does. ms/query: the default search, and the
MaxSim scoring of ``N_MAX`` hits (the query's token pass and the passages').

    PYTHONPATH=src .venv/bin/python benchmarks/bench_maxsim.py [--data ../shared/data]
        [--sets scifact,locomo,hotpotqa,musique] [--sample 100]

Prints tables; writes benchmarks/results/maxsim.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import machine, print_table, write_results
from bench_feedback import DATA, K, Session, mean_ci, specs

SETS = ("scifact", "locomo", "hotpotqa", "musique")
N_MAX = 20
DEPTHS = (10, 20)
WEIGHTS = (0.25, 0.5, 0.75)
SEED = 17


def candidates() -> dict[str, tuple[int, float]]:
    """label -> (N, weight of MaxSim); weight 1 is MaxSim's order alone."""
    out: dict[str, tuple[int, float]] = {"default": (0, 0.0)}
    for n in DEPTHS:
        out[f"maxsim N={n}"] = (n, 1.0)
        for w in WEIGHTS:
            out[f"mix N={n} w={w}"] = (n, w)
    return out


def _scaled(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    return [(v - lo) / (hi - lo) if hi > lo else 0.0 for v in values]


def order(hits: list[Any], sims: list[float], n: int, w: float) -> list[Any]:
    """``hits`` with the top ``n`` reordered by ``(1 - w) * fused + w * MaxSim``."""
    if n == 0:
        return hits
    head, tail = hits[:n], hits[n:]
    fused = _scaled([h.score for h in head])
    late = _scaled(sims[: len(head)])
    mixed = [(1 - w) * f + w * m for f, m in zip(fused, late, strict=True)]
    ranked = sorted(range(len(head)), key=lambda i: (-mixed[i], i))
    return [head[i] for i in ranked] + tail


def sample(spec: Any, size: int | None) -> Any:
    """``spec`` keeping a fixed-seed sample of ``size`` of its questions."""
    if size is None:
        return spec
    qids = [q.qid for g in spec.groups() for q in g.queries if spec.keep(q.qid) and q.text.strip()]
    if len(qids) <= size:
        return spec
    chosen = set(random.Random(SEED).sample(qids, size))
    return replace(spec, keep=lambda q: q in chosen)


def main(argv: Sequence[str] | None = None) -> int:
    from kredenc.providers.rerank.maxsim import MaxSimReranker
    from kredenc.retrieve.rerank import _text
    from kredenc.retrieve.search import search
    from kredenc.storage.index.filters import Filters

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--sample", type=int, default=100, help="Questions per set (seed 17).")
    args = parser.parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    make = specs(args.data)
    cands = candidates()
    results: dict[str, Any] = {
        "machine": machine(),
        "k": K,
        "n_max": N_MAX,
        "sample": args.sample,
        "seed": SEED,
        "sets": {},
    }
    per_q: dict[str, dict[str, dict[str, Any]]] = {}
    primary: dict[str, tuple[str, ...]] = {}
    with tempfile.TemporaryDirectory(prefix="kredenc-maxsim-") as tmp:
        for name in names:
            spec = sample(make[name](), args.sample)
            primary[name] = spec.primary
            s = Session(spec, f"{tmp}/{name}", None)
            try:
                s.file()
                print(
                    f"{name}: {len(s.questions)} questions, filed in {s.index_s:.1f} s", flush=True
                )
                reranker = MaxSimReranker()
                reranker.share(s.kb.store.embedder)
                store = s.kb.store
                per_q[name] = {c: {} for c in cands}
                search_ms: list[float] = []
                score_ms: list[float] = []
                t_set = time.perf_counter()
                for qid, text, ns, chunked in s.questions:
                    # At least N_MAX hits (turn sets search 10 ids as 10 hits), as the
                    # search path reranks max(k, rerank_depth); the top K ids are kept.
                    params = s.params(chunked, None)
                    params = replace(params, k=max(params.k, N_MAX))
                    search(
                        store.index, store.haystack, ns, text, params, Filters(), store.embed_query
                    )
                    t0 = time.perf_counter()
                    hits = search(
                        store.index, store.haystack, ns, text, params, Filters(), store.embed_query
                    )
                    search_ms.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    sims = reranker.score(text, [_text(h) for h in hits[:N_MAX]])
                    score_ms.append((time.perf_counter() - t0) * 1000)
                    for label, (n, w) in cands.items():
                        ranked = order(hits, sims, n, w)
                        ids = list(dict.fromkeys(str(h.meta.get("eval_id", h.id)) for h in ranked))
                        per_q[name][label][qid] = spec.metrics(qid, ids[:K])
                print(f"  searched and scored in {time.perf_counter() - t_set:.0f} s", flush=True)
                results["sets"][name] = {
                    "questions": len(s.questions),
                    "index_s": s.index_s,
                    "search_ms": statistics.fmean(search_ms),
                    "maxsim_ms": statistics.fmean(score_ms),
                }
            finally:
                s.close()
    report(results, names, primary, per_q)
    return 0


def report(
    results: dict[str, Any],
    names: Sequence[str],
    primary: dict[str, tuple[str, ...]],
    per_q: dict[str, dict[str, dict[str, Any]]],
) -> None:
    def delta(name: str, label: str) -> float:
        base, cand = per_q[name]["default"], per_q[name][label]
        return statistics.fmean(
            statistics.fmean(cand[q][m] - base[q][m] for q in base) for m in primary[name]
        )

    def cells(name: str, label: str) -> dict[str, Any]:
        base, got = per_q[name]["default"], per_q[name][label]
        row: dict[str, Any] = {}
        for metric in primary[name]:
            m = mean_ci([got[q][metric] for q in base])
            d = mean_ci([got[q][metric] - base[q][metric] for q in base])
            row[metric] = f"{m[0]:.3f} [{m[1]:.3f}, {m[2]:.3f}]"
            row[f"Δ {metric}"] = f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"
        return row

    chosen: list[dict[str, Any]] = []
    for name in names:
        entry = results["sets"][name]
        entry["candidates"] = {label: cells(name, label) for label in per_q[name]}
        print_table(
            f"{name} ({entry['questions']} questions; search {entry['search_ms']:.1f} ms/q, "
            f"MaxSim of {N_MAX} hits {entry['maxsim_ms']:.0f} ms/q)",
            [{"candidate": label, **row} for label, row in entry["candidates"].items()],
        )
        others = [n for n in names if n != name] or [name]
        grid = [c for c in per_q[name] if c != "default"]
        pure = [c for c in grid if c.startswith("maxsim")]
        picks = {
            "maxsim (N chosen on the others)": max(
                pure, key=lambda c: statistics.fmean(delta(o, c) for o in others)
            ),
            "any (chosen on the others)": max(
                grid, key=lambda c: statistics.fmean(delta(o, c) for o in others)
            ),
        }
        entry["chosen_on_others"] = picks
        for kind, label in picks.items():
            row = entry["candidates"][label]
            chosen.append(
                {
                    "reported on": name,
                    "pick": kind,
                    "candidate": label,
                    "headline": "; ".join(f"{m} {row[m]}" for m in primary[name]),
                    "Δ": "; ".join(row[f"Δ {m}"] for m in primary[name]),
                }
            )
    print_table("Chosen on the other sets, reported on this one", chosen)
    results["machine_after"] = machine()
    write_results("maxsim", results)


if __name__ == "__main__":
    raise SystemExit(main())
