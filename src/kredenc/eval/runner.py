"""Feed a dataset through a retriever, time it, score it, and keep the run.

A run file has one JSON line per query: ``{"qid": ..., "ranked": [ids...], "ms": ...}``
(``ms`` is that query's search latency). ``recompute(run_file, dataset)`` scores a run
file again and gives exactly the ``metrics`` of the live run; ``agreement(a, b)`` says
how often two runs of the same queries (e.g. one per storage backend) return the same
top k.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kredenc.errors import InvalidInput
from kredenc.eval.datasets import EvalDataset, Metrics, Retriever, no_records, open_text
from kredenc.eval.metrics import mean_ci, percentile

Progress = Callable[[int, int], None]  # (queries done, groups done)


@dataclass
class RunResult:
    dataset: str
    metrics: Metrics
    ranked: dict[str, list[str]]
    latency_ms: dict[str, float] = field(default_factory=dict)
    index_s: float = 0.0
    n_docs: int = 0
    n_groups: int = 0

    @property
    def timing(self) -> dict[str, float]:
        lat = list(self.latency_ms.values())
        return {
            "index_s": round(self.index_s, 4),
            "search_ms_p50": round(percentile(lat, 50), 3),
            "search_ms_p95": round(percentile(lat, 95), 3),
            "search_ms_mean": round(sum(lat) / len(lat), 3) if lat else 0.0,
            "n_searches": len(lat),
            "n_indexed": self.n_docs,
            "n_groups": self.n_groups,
        }

    def summary(self) -> dict[str, Any]:
        """Metrics and timing in one JSON-ready dict."""
        return {"dataset": self.dataset, "metrics": self.metrics, "timing": self.timing}

    def write_run(self, path: str | Path) -> Path:
        return write_run(path, self.ranked, self.latency_ms)


def run(
    retriever: Retriever,
    dataset: EvalDataset,
    *,
    run_file: str | Path | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Index each group of ``dataset`` into a fresh corpus, search each query, score.

    ``reset()`` and ``index()`` are called once per group; indexing time is their sum.
    ``search()`` gets the group's k; its ids are kept as strings, best first.
    """
    result = RunResult(dataset=dataset.name, metrics={}, ranked={})
    for group in dataset.groups():
        t0 = time.perf_counter()
        retriever.reset()
        retriever.index(group.docs)
        result.index_s += time.perf_counter() - t0
        result.n_docs += len(group.docs)
        result.n_groups += 1
        for q in group.queries:
            t1 = time.perf_counter()
            ids = retriever.search(q.text, group.k, asked_at=q.meta.get("asked_at"))
            result.latency_ms[q.qid] = (time.perf_counter() - t1) * 1000.0
            result.ranked[q.qid] = [str(i) for i in ids]
        if progress is not None:
            progress(len(result.ranked), result.n_groups)
    result.metrics = dataset.score(result.ranked)
    if run_file is not None:
        result.write_run(run_file)
    return result


def write_run(
    path: str | Path,
    ranked: Mapping[str, Sequence[str]],
    latency_ms: Mapping[str, float] | None = None,
) -> Path:
    """Write one ``{"qid", "ranked"[, "ms"]}`` JSON line per query."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as f:
        for qid, ids in ranked.items():
            row: dict[str, Any] = {"qid": qid, "ranked": list(ids)}
            if latency_ms is not None and qid in latency_ms:
                row["ms"] = round(latency_ms[qid], 3)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return p


def read_run(path: str | Path) -> dict[str, list[str]]:
    """qid -> ranked ids from a run file (plain or .gz); a repeated qid is an error."""
    out: dict[str, list[str]] = {}
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                qid, ids = str(row["qid"]), [str(i) for i in row["ranked"]]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise InvalidInput(f"{path}:{n}: not a run line ({e})") from e
            if qid in out:
                raise InvalidInput(f"{path}:{n}: qid {qid!r} appears twice")
            out[qid] = ids
    if not out:
        raise no_records(path, "queries")
    return out


def recompute(run_file: str | Path, dataset: EvalDataset) -> Metrics:
    """Score a run file against a dataset; equals the live run's ``metrics``."""
    return dataset.score(read_run(run_file))


def agreement(
    a: Mapping[str, Sequence[str]],
    b: Mapping[str, Sequence[str]],
    k: int = 10,
    *,
    rounds: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """How often two runs over the same queries give the same top ``k``, with 95 %
    bootstrap intervals (resampling queries).

    Per query (a query missing from one run counts as an empty list there):
    ``same_set``: the top ``k`` ids are the same set; ``same_order``: the same list,
    in order; ``overlap``: ids in both top ``k`` over ``k`` (over the longer list when
    both hold fewer; 1.0 when both are empty). ``differ``: the queries whose sets
    differ, in qid order.
    """
    if k <= 0:
        raise InvalidInput(f"agreement needs k >= 1, not {k}", "pass a positive k")
    qids = sorted(set(a) | set(b))
    same_set: list[float] = []
    same_order: list[float] = []
    overlap: list[float] = []
    differ: list[str] = []
    for qid in qids:
        top_a, top_b = list(a.get(qid, ()))[:k], list(b.get(qid, ()))[:k]
        set_a, set_b = set(top_a), set(top_b)
        same_set.append(float(set_a == set_b))
        same_order.append(float(top_a == top_b))
        longest = max(len(set_a), len(set_b))
        overlap.append(len(set_a & set_b) / min(k, longest) if longest else 1.0)
        if set_a != set_b:
            differ.append(qid)
    out: dict[str, Any] = {"queries": len(qids), "k": k}
    for name, values in (("same_set", same_set), ("same_order", same_order), ("overlap", overlap)):
        out[name] = round(sum(values) / len(values), 4) if values else 0.0
        out[f"{name}_ci95"] = mean_ci(values, rounds=rounds, seed=seed)
    out["differ"] = differ
    return out
