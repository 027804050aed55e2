"""Covering the query (``retrieve/coverage.py``, setting ``coverage_weight``): quality on
every dev set, the weight chosen leave-one-set-out, and what it costs per search.

Each set is filed as ``kredenc eval`` files it (the sessions of ``bench_feedback.py``:
one store per set, the shared eval embedding cache, the eval's depth and its one graph
hop on the multihop sets). Every question is searched once, with coverage off
(``coverage_weight=0``), at the eval's depth; each candidate weight then reorders that
same list with ``coverage.cover`` (the top ``relevance.WINDOW`` hits, as search does),
so the candidates differ only in the reordering (the list is at least the window deep,
12, and cut to the eval's depth after it, as search cuts). The headline metrics are those of
``bench_feedback.py``; 95 % bootstrap CIs over questions, paired deltas against off.

The weight reported on a set is the one with the best mean paired delta over the
**other four** sets (each set's delta the mean over its headline metrics); the table
shows every weight on every set, the losers too.

Cost: per set, ``cover`` itself timed on every question's list (what a search adds), and
a user's search (``retrieve.query.search``, what ``Kredenc.search`` runs, k=10) with the
weight at 0 and at the default, alternating question by question (query embeddings
cached first, so both time the same work).

    cd benchmarks && PYTHONPATH=../src:. ../.venv/bin/python bench_coverage.py \\
        [--data ../../shared/data] [--sets scifact,locomo,...] [--limit N]

Prints tables; writes benchmarks/results/coverage.json.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import machine, percentile, print_table, write_results
from bench_feedback import CACHE, K, Session, Spec, dev_sets_parser, mean_ci, specs

WEIGHTS = (0.1, 0.3, 0.5, 0.7, 1.0, 1.5)


def _ids(hits: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(str(h.meta.get("eval_id", h.id)) for h in hits))[:K]


def measure(s: Session, spec: Spec) -> tuple[dict[str, dict[str, dict[str, float]]], list[float]]:
    """Per candidate and question, the headline metrics; and ``cover``'s own ms per list."""
    from kredenc.retrieve.coverage import cover
    from kredenc.retrieve.relevance import WINDOW
    from kredenc.retrieve.search import search
    from kredenc.storage.index.filters import Filters

    store = s.kb.store
    per: dict[str, dict[str, dict[str, float]]] = {"off": {}}
    per.update({f"w={w}": {} for w in WEIGHTS})
    cost: list[float] = []
    for qid, text, ns, chunked in s.questions:
        # At least the window deep, as search is before its cut to the eval's depth.
        p = s.params(chunked, None)
        p = replace(p, coverage_weight=0.0, k=max(p.k, WINDOW))
        hits = search(store.index, store.haystack, ns, text, p, Filters(), store.embed_query)
        per["off"][qid] = spec.metrics(qid, _ids(hits))
        for w in WEIGHTS:
            t0 = time.perf_counter()
            got = cover(text, hits, w)
            if w == 0.5:
                cost.append((time.perf_counter() - t0) * 1000)
            per[f"w={w}"][qid] = spec.metrics(qid, _ids(got))
    return per, cost


def search_cost(s: Session, weight: float) -> dict[str, float]:
    """A user's search (k=10) wall ms with the weight off and at ``weight``, alternating."""
    from kredenc.retrieve.query import search

    kb = s.kb
    texts = [text for _, text, _, _ in s.questions]
    namespaces = [ns for _, _, ns, _ in s.questions]
    for text in texts:  # the query embeddings, cached for both
        kb.store.embed_query(text)
    times: dict[str, list[float]] = {"off": [], "on": []}
    for i, (text, ns) in enumerate(zip(texts, namespaces, strict=True)):
        order = (("off", 0.0), ("on", weight)) if i % 2 else (("on", weight), ("off", 0.0))
        for label, w in order:
            kb.store.settings.coverage_weight = w
            t0 = time.perf_counter()
            search(kb.store, ns, text, k=10)
            times[label].append((time.perf_counter() - t0) * 1000)
    kb.store.settings.coverage_weight = weight
    return {
        f"{label} p{q}": round(percentile(v, q), 2) for label, v in times.items() for q in (50, 95)
    }


def per_set_delta(per: dict[str, dict[str, dict[str, float]]], label: str) -> float:
    """Mean over the set's headline metrics of the mean paired delta against off."""
    base = per["off"]
    metrics = next(iter(base.values())).keys()
    return statistics.fmean(
        statistics.fmean(per[label][q][m] - base[q][m] for q in base) for m in metrics
    )


def cell(values: Sequence[float]) -> str:
    m, lo, hi = mean_ci(values)
    return f"{m:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def main(argv: Sequence[str] | None = None) -> int:
    from kredenc.retrieve.coverage import WEIGHT

    args = dev_sets_parser(__doc__).parse_args(argv)
    make = specs(args.data)
    names = args.sets.split(",")
    results: dict[str, Any] = {"machine": machine(), "cache": str(CACHE), "sets": {}}
    pers: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="kredenc-coverage-") as tmp:
        for name in names:
            spec = make[name]()
            s = Session(spec, str(Path(tmp) / name), args.limit)
            s.file()
            per, cost = measure(s, spec)
            pers[name] = per
            rows = []
            for label, got in per.items():
                row: dict[str, Any] = {"weight": label}
                for m in spec.primary:
                    row[m] = f"{mean_ci([got[q][m] for q in got])[0]:.4f}"
                    row[f"Δ {m}"] = cell([got[q][m] - per["off"][q][m] for q in got])
                rows.append(row)
            print_table(f"{name} ({len(s.questions)} questions)", rows)
            timing = {
                "cover ms p50": round(percentile(cost, 50), 3),
                "cover ms p95": round(percentile(cost, 95), 3),
                **search_cost(s, WEIGHT),
            }
            print_table(f"{name}: cost per search (k=10 for search)", [timing])
            results["sets"][name] = {
                "questions": len(s.questions),
                "table": rows,
                "cost": timing,
                "per_question": {
                    label: {m: [round(got[q][m], 4) for q in got] for m in spec.primary}
                    for label, got in per.items()
                },
            }
            s.close()
    if len(pers) > 1:
        chosen = []
        for held, per in pers.items():
            others = [n for n in pers if n != held]
            pick = max(
                (f"w={w}" for w in WEIGHTS),
                key=lambda lab: statistics.fmean(per_set_delta(pers[n], lab) for n in others),
            )
            spec = make[held]()
            reported = "; ".join(
                f"{m} {cell([per[pick][q][m] - per['off'][q][m] for q in per['off']])}"
                for m in spec.primary
            )
            chosen.append({"set": held, "chosen on the others": pick, "Δ here": reported})
        print_table("Leave one set out: the weight chosen on the other sets, reported here", chosen)
        results["leave_one_set_out"] = chosen
    write_results("coverage", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
