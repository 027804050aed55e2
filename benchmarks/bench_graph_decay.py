"""The graph decay, the scale of fused scores, and titles as a field (issue 17).

Three parts, each on the dev sets filed as ``kredenc eval`` files them (the sessions of
``bench_feedback.py``: one store per set, the shared eval embedding cache, the eval's
depth and its one graph hop on the multihop sets), every question searched once per
candidate through ``retrieve.search.search``; 95 % bootstrap CIs over questions and
paired deltas against the default.

- ``decay``: the share of a seed's score a graph neighbour gets per hop
  (``SearchParams.graph_decay``) over 0.5-1.0 on HotpotQA-200 and MuSiQue-200 (the
  only sets searched with hops); the value is chosen on one set and reported on the
  other, in both directions.
- ``fusion``: other normalisations of the legs' scores in place of min-max (each
  replaces ``weighted_minmax`` for the run; none ships): ``z`` (z-scores over the
  leg's depth, a candidate a leg did not return gets 0), ``zmin`` (the same, but
  such a candidate gets the leg's lowest z), ``dbsf`` (Qdrant's distribution-based
  score fusion: mean ± 3 sd scaled to [0, 1]), ``maxnorm`` (divided by the leg's best),
  each at dense / lexical 0.4 / 0.6 and 0.5 / 0.5, plus ``zmin`` with the fused sum
  min-max scaled again (``zmin-mm``), on all five sets, each run at the eval's hops
  and the multihop sets again at 0 hops; the candidate reported on a set is chosen on
  the other four (best mean paired delta of their headline metrics).
- ``titles``: a titled document's title as a field of every chunk (the record's
  ``title``, as ingestion files a document's chunks; the eval files it as the first
  line of the text, so later chunks of a long abstract lack it), and that plus the
  title in the card's context column (weighted ``lexical_context_weight``), on
  SciFact, HotpotQA-200 and MuSiQue-200.

    cd benchmarks && PYTHONPATH=../src:. ../.venv/bin/python bench_graph_decay.py \
        [--data ../../shared/data] [--parts decay,fusion,titles]

Prints tables; writes benchmarks/results/graph-decay.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import machine, print_table, write_results
from bench_feedback import CACHE, DATA, Session, Spec, specs

DECAYS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
FUSIONS = ("minmax", "z", "zmin", "dbsf", "maxnorm")
Scored = Sequence[tuple[Any, float]]


def _normalised(kind: str, scored: Scored, depth: int | None) -> tuple[dict[Any, float], float]:
    """One leg's scores under ``kind``, and what a candidate the leg missed gets."""
    top = [s for _, s in (scored if depth is None else scored[:depth])]
    mean = statistics.fmean(top)
    sd = statistics.pstdev(top) if len(top) > 1 else 0.0
    if kind in ("z", "zmin"):
        if sd == 0:
            return {i: 0.0 for i, _ in scored}, (-1.0 if kind == "zmin" else 0.0)
        floor = (min(top) - mean) / sd
        return {i: max(floor, (s - mean) / sd) for i, s in scored}, (
            floor if kind == "zmin" else 0.0
        )
    if kind == "dbsf":
        lo, hi = mean - 3 * sd, mean + 3 * sd
        return {
            i: (min(1.0, max(0.0, (s - lo) / (hi - lo))) if hi > lo else 1.0) for i, s in scored
        }, 0.0
    best = max(top)
    return {i: (s / best if best > 0 else 0.0) for i, s in scored}, 0.0  # maxnorm


def fusion(kind: str, weights: Mapping[str, float] | None, rescale: bool) -> Callable[..., Any]:
    """A stand-in for ``weighted_minmax`` that normalises by ``kind``."""
    from kredenc.retrieve.fuse import weighted_minmax

    def fuse(
        legs: Mapping[str, Scored], default: Mapping[str, float], depth: int | None = None
    ) -> list[tuple[Any, float]]:
        w = dict(weights or default)
        if kind == "minmax":
            return weighted_minmax(legs, w, depth)
        total = sum(w.get(n, 0.0) for n in legs)
        every = {i for scored in legs.values() for i, _ in scored}
        out: dict[Any, float] = {}
        for name, scored in legs.items():
            if not scored or not w.get(name):
                continue
            norm, missed = _normalised(kind, scored, depth)
            for item in every:
                out[item] = out.get(item, 0.0) + w[name] / total * norm.get(item, missed)
        if rescale and out:
            hi, lo = max(out.values()), min(out.values())
            out = {i: ((s - lo) / (hi - lo) if hi > lo else 1.0) for i, s in out.items()}
        return sorted(out.items(), key=lambda kv: -kv[1])

    return fuse


@contextmanager
def fused_by(fn: Callable[..., Any] | None) -> Iterator[None]:
    import kredenc.retrieve.search as searching

    saved = searching.weighted_minmax
    if fn is not None:
        searching.weighted_minmax = fn  # type: ignore[assignment]
    try:
        yield
    finally:
        searching.weighted_minmax = saved


def _ci(values: Sequence[float]) -> str:
    """The mean and its 95 % bootstrap interval, as a cell."""
    from kredenc.eval.metrics import mean_ci

    lo, hi = mean_ci(values)
    return f"{statistics.fmean(values):+.4f} [{lo:+.4f}, {hi:+.4f}]"


def run(
    s: Session,
    spec: Spec,
    over: dict[str, Any],
    fuse: Callable[..., Any] | None = None,
) -> dict[str, dict[str, float]]:
    """Per question, the headline metrics of one candidate."""
    out = {}
    with fused_by(fuse):
        for qid, text, ns, chunked in s.questions:
            p = s.params(chunked, None)
            ids, _ = s.search(text, ns, replace(p, **over))
            out[qid] = spec.metrics(qid, ids)
    return out


def table(
    spec: Spec, per: dict[str, dict[str, dict[str, float]]], base: str
) -> list[dict[str, Any]]:
    rows = []
    for label, got in per.items():
        row: dict[str, Any] = {"candidate": label}
        for m in spec.primary:
            row[m] = _ci([got[q][m] for q in got])
            row[f"Δ {m}"] = _ci([got[q][m] - per[base][q][m] for q in got])
        rows.append(row)
    return rows


def delta(per: dict[str, dict[str, dict[str, float]]], label: str, base: str) -> float:
    """Mean paired delta of the headline metrics against ``base``."""
    metrics = next(iter(per[base].values())).keys()
    return statistics.fmean(
        statistics.fmean(per[label][q][m] - per[base][q][m] for q in per[base]) for m in metrics
    )


def part_decay(make: dict[str, Callable[[], Spec]], tmp: str, limit: int | None) -> dict[str, Any]:
    per: dict[str, dict[str, Any]] = {}
    for name in ("hotpotqa", "musique"):
        spec = make[name]()
        s = Session(spec, f"{tmp}/decay-{name}", limit)
        try:
            s.file()
            per[name] = {f"decay {d}": run(s, spec, {"graph_decay": d}) for d in DECAYS}
        finally:
            s.close()
        print_table(f"decay, {name}", table(spec, per[name], "decay 0.5"))
    chosen = {}
    for name, other in (("hotpotqa", "musique"), ("musique", "hotpotqa")):
        pick = max(per[other], key=lambda label: delta(per[other], label, "decay 0.5"))
        chosen[name] = {"chosen on": other, "decay": pick}
        print(f"{name}: chosen on {other}: {pick}")
    return {"per_question": per, "chosen": chosen}


def part_fusion(make: dict[str, Callable[[], Spec]], tmp: str, limit: int | None) -> dict[str, Any]:
    cands: dict[str, Callable[..., Any]] = {}
    for kind in FUSIONS:
        cands[kind] = fusion(kind, None, False)
        cands[f"{kind} 0.5/0.5"] = fusion(kind, {"dense": 0.5, "lexical": 0.5}, False)
    cands["zmin-mm"] = fusion("zmin", None, True)
    per: dict[str, dict[str, Any]] = {}
    for name in ("scifact", "locomo", "longmemeval", "hotpotqa", "musique"):
        spec = make[name]()
        s = Session(spec, f"{tmp}/fusion-{name}", limit)
        try:
            s.file()
            per[name] = {label: run(s, spec, {}, fn) for label, fn in cands.items()}
            if spec.hops:
                hop0 = replace(spec, hops=0)
                per[f"{name} hops 0"] = {
                    label: run(s, hop0, {"hops": 0}, cands[label])
                    for label in ("minmax", "zmin", "zmin-mm")
                }
                print_table(f"fusion, {name}, hops 0", table(spec, per[f"{name} hops 0"], "minmax"))
        finally:
            s.close()
        print_table(f"fusion, {name}", table(spec, per[name], "minmax"))
    sets = ["scifact", "locomo", "longmemeval", "hotpotqa", "musique"]
    chosen = {}
    for name in sets:
        others = [o for o in sets if o != name]
        pick = max(
            cands,
            key=lambda label: statistics.fmean(delta(per[o], label, "minmax") for o in others),
        )
        chosen[name] = pick
        print(f"{name}: chosen on the other four: {pick}")
    return {"per_question": per, "chosen_on_others": chosen}


def part_titles(make: dict[str, Callable[[], Spec]], tmp: str, limit: int | None) -> dict[str, Any]:
    per: dict[str, dict[str, Any]] = {}
    for name in ("scifact", "hotpotqa", "musique"):
        spec = make[name]()
        per[name] = {}
        for label, variant in (
            ("text (the eval's filing)", None),
            ("title field", "field"),
            ("title field + context", "context"),
        ):
            s = Session(spec, f"{tmp}/titles-{name}-{variant}", limit)
            try:
                if variant is not None:
                    s.retriever.index = _titled_index(s.retriever, variant)  # type: ignore[method-assign]
                s.file()
                per[name][label] = run(s, spec, {})
            finally:
                s.close()
        print_table(f"titles, {name}", table(spec, per[name], "text (the eval's filing)"))
    return {"per_question": per}


def _titled_index(retriever: Any, variant: str) -> Callable[[Sequence[Any]], None]:
    """``EngineRetriever.index`` with each document's title filed as every chunk's
    ``title`` (and, for ``context``, as its card's context) instead of as the first
    line of its text."""
    from kredenc.ingest.chunker import split_spans
    from kredenc.ingest.mentions import Titled, mention_pairs
    from kredenc.ingest.passages import add_passages
    from kredenc.ingest.pipeline import link_payloads

    def index(docs: Sequence[Any]) -> None:
        items: list[dict[str, Any]] = []
        for d in docs:
            title = d.title or ""
            body = d.text[len(title) + 1 :] if title and d.text.startswith(title + "\n") else d.text
            body = body.strip()
            spans = [(0, len(body))]
            if len(body) > retriever.chunk_size:
                spans = split_spans(body, retriever.chunk_size, retriever.overlap)
                retriever._chunked = retriever._chunked or len(spans) > 1
            for start, end in spans:
                if piece := body[start:end].strip():
                    item = {
                        "text": piece,
                        "title": title,
                        "doc_id": f"eval:{d.id}",
                        "meta": {"eval_id": d.id},
                    }
                    if variant == "context" and title:
                        item["context"] = title
                    items.append(item)
        ids: list[str] = []
        for start in range(0, len(items), 256):
            ids += add_passages(retriever.store, retriever.namespace, items[start : start + 256])
        passages = [
            Titled(rid, it["title"], it["text"]) for rid, it in zip(ids, items, strict=True)
        ]
        pairs = mention_pairs(passages, max_per_doc=retriever.mention_links)
        if pairs:
            retriever.store.write(link_payloads(retriever.namespace, pairs, "mentions"), batch=True)

    return index


def compact(per: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per-question outcomes as lists in question order (``qids``), one per metric."""
    qids = list(next(iter(per.values())))
    out: dict[str, Any] = {"qids": qids}
    for label, got in per.items():
        metrics = next(iter(got.values())).keys()
        out[label] = {m: [round(got[q][m], 4) for q in qids] for m in metrics}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--parts", default="decay,fusion,titles")
    parser.add_argument("--limit", type=int, default=None, help="First N questions per set.")
    args = parser.parse_args(argv)
    make = specs(args.data)
    parts = {"decay": part_decay, "fusion": part_fusion, "titles": part_titles}
    results: dict[str, Any] = {"machine": machine(), "cache": str(CACHE)}
    with tempfile.TemporaryDirectory(prefix="kredenc-decay-") as tmp:
        for name in args.parts.split(","):
            got = parts[name](make, tmp, args.limit)
            got["per_question"] = {k: compact(v) for k, v in got["per_question"].items()}
            results[name] = got
    write_results("graph-decay", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
