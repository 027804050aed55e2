"""Pseudo-relevance feedback (RM3 on words, Rocchio on vectors, both) and the learned
fusion, against the default (min-max 0.4 / 0.6, no feedback), on every dev set (issue 17).

Each set is filed as ``kredenc eval`` files it (``EngineRetriever``: SciFact and the
two multihop sets as chunks with ``mentions`` edges, LoCoMo and LongMemEval-S as
turns, each group in its own namespace, one store per set, the shared eval embedding
cache). Every question is searched once per candidate through the pipeline's own
``retrieve.search.search`` (the parameters ``Kredenc.search`` builds from settings,
with the candidate's feedback or fusion), at the eval's depth (the top 10 ids, four
chunks per id for chunked sets) and the eval default of one graph hop on the multihop
sets; the query's embedding and one default search run first, untimed, so ms/query is
each candidate's own search with the embedding cached and the pages warm (the
embedding costs every candidate alike; its mean is printed per set).

Feedback parameters are a small grid per mode; the one reported on a set is chosen on
the other four (best mean paired delta of their headline metrics), so no row of the
"chosen on the others" table is tuned on its own questions. The learned fusion is a
logistic regression over ``retrieve.learned.FEATURES`` of every candidate of both legs
(labels from the sets' judgements; each set and, within it, each question weighted
alike), fitted leave-one-set-out: trained on four sets, reported on the fifth. The fit
on all five is printed as the constants ``retrieve/learned.py`` ships.

Headline metrics: SciFact nDCG@10, LoCoMo turn recall@10 (categories 1-4),
LongMemEval-S session recall_any@5 / recall_all@5, HotpotQA-200 and MuSiQue-200
recall@5 / all-gold@5; 95 % bootstrap CIs over questions (1,000 resamples), and the
paired delta against the default with its CI.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_feedback.py [--data ../shared/data]
        [--sets scifact,locomo,...] [--limit N]

Prints tables; writes benchmarks/results/feedback.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from _common import machine, print_table, write_results

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
CACHE = Path("~/.cache/kredenc/eval-embeddings.db").expanduser()
K = 10  # ids per question: every headline metric is at 10 or less
SETS = ("scifact", "locomo", "longmemeval", "hotpotqa", "musique")
GRID_DOCS = (3, 8)
GRID_LAMBDA = (0.5, 0.7)
GRID_BETA = (0.3, 0.7)
TERMS = 10


@dataclass
class Spec:
    """How one set is filed and scored."""

    name: str
    record_type: str
    hops: int
    primary: tuple[str, ...]
    groups: Callable[[], Iterable[Any]]
    relevant: Callable[[str], set[str]]
    metrics: Callable[[str, list[str]], dict[str, float]]
    keep: Callable[[str], bool]


def specs(data: Path) -> dict[str, Callable[[], Spec]]:
    from kredenc.eval import load_beir, load_locomo, load_longmemeval, load_multihop
    from kredenc.eval.metrics import all_at_k, ndcg_at_k, recall_at_k

    def scifact() -> Spec:
        ds = load_beir(data / "scifact")
        return Spec(
            "scifact",
            "chunk",
            0,
            ("ndcg@10",),
            ds.groups,
            lambda q: {d for d, r in ds.qrels.get(q, {}).items() if r > 0},
            lambda q, ranked: {"ndcg@10": ndcg_at_k(ranked, ds.qrels.get(q, {}), 10)},
            lambda q: True,
        )

    def locomo() -> Spec:
        ds = load_locomo(data / "locomo" / "locomo_dev.json")
        return Spec(
            "locomo",
            "turn",
            0,
            ("recall@10",),
            ds.groups,
            lambda q: set(ds.evidence[q]),
            lambda q, ranked: {"recall@10": recall_at_k(ranked, ds.evidence[q], 10)},
            lambda q: ds.category.get(q, 5) != 5 and q in ds.evidence,
        )

    def longmemeval() -> Spec:
        ds = load_longmemeval(data / "longmemeval" / "longmemeval_s_dev66.json.gz")

        def relevant(q: str) -> set[str]:
            hay = ds.haystacks[q]
            return {d.id for d, lab in zip(hay.docs, hay.labels, strict=True) if "answer" in lab}

        def metrics(q: str, ranked: list[str]) -> dict[str, float]:
            row, _ = ds._row(q, ranked)
            return {m: row[m] for m in ("recall_any@5", "recall_all@5")}

        return Spec(
            "longmemeval",
            "turn",
            0,
            ("recall_any@5", "recall_all@5"),
            ds.groups,
            relevant,
            metrics,
            lambda q: True,
        )

    def multihop(name: str) -> Callable[[], Spec]:
        def make() -> Spec:
            ds = load_multihop(
                data / "multihop" / f"{name}_dev200.json",
                data / "multihop" / f"{name}_dev200_corpus.json",
            )
            return Spec(
                name,
                "chunk",
                1,
                ("recall@5", "all_gold@5"),
                ds.groups,
                lambda q: set(ds.gold[q]),
                lambda q, ranked: {
                    "recall@5": recall_at_k(ranked, ds.gold[q], 5),
                    "all_gold@5": all_at_k(ranked, ds.gold[q], 5),
                },
                lambda q: True,
            )

        return make

    return {
        "scifact": scifact,
        "locomo": locomo,
        "longmemeval": longmemeval,
        "hotpotqa": multihop("hotpotqa"),
        "musique": multihop("musique"),
    }


def candidates() -> dict[str, dict[str, Any]]:
    """Every candidate's settings over the default (the learned fusion is added later)."""
    out: dict[str, dict[str, Any]] = {"default": {}}
    for f in GRID_DOCS:
        for lam in GRID_LAMBDA:
            out[f"rm3 f={f} λ={lam}"] = {"mode": "rm3", "docs": f, "terms": TERMS, "lam": lam}
        for beta in GRID_BETA:
            out[f"rocchio f={f} β={beta}"] = {"mode": "rocchio", "docs": f, "beta": beta}
        for lam in GRID_LAMBDA:
            for beta in GRID_BETA:
                out[f"both f={f} λ={lam} β={beta}"] = {
                    "mode": "both",
                    "docs": f,
                    "terms": TERMS,
                    "lam": lam,
                    "beta": beta,
                }
    return out


class Session:
    """One set filed in its own store, searched per candidate."""

    def __init__(self, spec: Spec, home: str, limit: int | None) -> None:
        import onnxruntime  # noqa: F401  (before usearch, see benchmarks/corpus.py)

        from kredenc import Kredenc
        from kredenc.eval.engine_retriever import EngineRetriever

        self.spec = spec
        self.limit = limit
        self.kb = Kredenc.open(home, "eval", durability="none", embed_cache=CACHE)
        self.retriever = EngineRetriever(
            self.kb.store,
            record_type=spec.record_type,
            mention_links=self.kb.settings.mention_links,
        )
        self.questions: list[tuple[str, str, str, bool]] = []  # qid, text, namespace, chunked
        self.index_s = 0.0

    def file(self) -> None:
        taken = 0
        for group in self.spec.groups():
            queries = [q for q in group.queries if self.spec.keep(q.qid) and q.text.strip()]
            if self.limit is not None:
                queries = queries[: max(0, self.limit - taken)]
            if not queries:
                continue
            t0 = time.perf_counter()
            self.retriever.reset()
            self.retriever.index(group.docs)
            self.index_s += time.perf_counter() - t0
            ns, chunked = self.retriever.namespace, self.retriever._chunked
            self.questions += [(q.qid, q.text, ns, chunked) for q in queries]
            taken += len(queries)

    def params(self, chunked: bool, fb: dict[str, Any] | None, **over: Any) -> Any:
        from kredenc.retrieve.feedback import Feedback
        from kredenc.retrieve.query import search_params

        depth = min(1000, K * 4) if chunked else K  # as EngineRetriever.search
        p = search_params(self.kb.settings, k=depth, hops=self.spec.hops)
        if fb:
            p = replace(p, feedback=Feedback(**fb))
        return replace(p, **over)

    def search(self, text: str, ns: str, params: Any) -> tuple[list[str], float]:
        from kredenc.retrieve.search import search
        from kredenc.storage.index.filters import Filters

        store = self.kb.store
        t0 = time.perf_counter()
        hits = search(store.index, store.haystack, ns, text, params, Filters(), store.embed_query)
        ms = (time.perf_counter() - t0) * 1000
        ids = list(dict.fromkeys(str(h.meta.get("eval_id", h.id)) for h in hits))[:K]
        return ids, ms

    def corrections(self, text: str, ns: str) -> dict[str, str]:
        """The misspelt words of ``text`` and their corrections (``spelling``)."""
        from kredenc.retrieve.terms import query_terms
        from kredenc.storage.index.filters import Filters

        return self.kb.store.index.corrections(ns, query_terms(text), Filters())

    def features(self, text: str, ns: str, chunked: bool, relevant: set[str]) -> Any:
        """The learned fusion's features of every candidate of both legs, and labels."""
        from kredenc.retrieve import learned
        from kredenc.retrieve.search import read_texts, run_legs
        from kredenc.storage.index.filters import Filters

        store = self.kb.store
        p = self.params(chunked, None)
        legs = run_legs(store.index, ns, text, p, Filters(), store.embed_query)

        def read(rowids: Sequence[int]) -> dict[int, tuple[str, str]]:
            return read_texts(store.index, store.haystack, ns, rowids)

        rowids, rows = learned.features(text, legs, p.leg_k, read)
        places = store.index.resolve(ns, rowids)
        ids = [
            str(store.haystack.read(places[r][1]).get("meta", {}).get("eval_id", ""))
            if r in places
            else ""
            for r in rowids
        ]
        return rows, np.array([i in relevant for i in ids], dtype=np.int8)

    def close(self) -> None:
        self.kb.close()


def mean_ci(values: Sequence[float]) -> tuple[float, float, float]:
    from kredenc.eval.metrics import mean_ci as ci

    lo, hi = ci(list(values))
    return statistics.fmean(values), lo, hi


def fit(blocks: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> list[float]:
    """Logistic regression over (features, labels, weight per row) blocks: coefficients
    then intercept (scikit-learn: a dev tool, never imported at run time)."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([b[0] for b in blocks])
    y = np.concatenate([b[1] for b in blocks])
    w = np.concatenate([np.full(len(b[1]), b[2]) for b in blocks])
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit(x, y, sample_weight=w * len(w) / w.sum())
    return [round(float(c), 4) for c in model.coef_[0]] + [round(float(model.intercept_[0]), 4)]


def training_blocks(feats: dict[str, list[Any]]) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Each question's candidates, weighted so every question of a set, and every set,
    counts alike."""
    out = []
    for rows in feats.values():
        n_q = len(rows)
        for x, y in rows:
            if len(y):
                out.append((x, y, 1.0 / (n_q * len(y))))
    return out


def dev_sets_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a benchmark over the dev sets: ``--data``, ``--sets``, ``--limit``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--limit", type=int, default=None, help="First N questions per set.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = dev_sets_parser(__doc__).parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    make = specs(args.data)
    cands = candidates()
    results: dict[str, Any] = {"machine": machine(), "k": K, "grid": cands, "sets": {}}
    per_q: dict[str, dict[str, dict[str, Any]]] = {}  # set -> candidate -> qid -> metrics
    ms: dict[str, dict[str, list[float]]] = {}
    feats: dict[str, list[Any]] = {}
    sessions: dict[str, Session] = {}
    with tempfile.TemporaryDirectory(prefix="kredenc-prf-") as tmp:
        try:
            for name in names:
                spec = make[name]()
                s = sessions[name] = Session(spec, f"{tmp}/{name}", args.limit)
                s.file()
                print(
                    f"{name}: {len(s.questions)} questions, filed in {s.index_s:.1f} s", flush=True
                )
                per_q[name] = {c: {} for c in cands}
                ms[name] = {c: [] for c in cands}
                feats[name] = []
                embed_ms: list[float] = []
                t_set = time.perf_counter()
                for qid, text, ns, chunked in s.questions:
                    t0 = time.perf_counter()
                    s.kb.store.embed_query(text)
                    embed_ms.append((time.perf_counter() - t0) * 1000)
                    s.search(text, ns, s.params(chunked, None))  # warm-up, untimed
                    for label, fb in cands.items():
                        ids, took = s.search(text, ns, s.params(chunked, fb or None))
                        per_q[name][label][qid] = spec.metrics(qid, ids)
                        ms[name][label].append(took)
                    feats[name].append(s.features(text, ns, chunked, spec.relevant(qid)))
                print(f"  searched in {time.perf_counter() - t_set:.0f} s", flush=True)
                results["sets"][name] = {
                    "questions": len(s.questions),
                    "index_s": s.index_s,
                    "embed_ms": statistics.fmean(embed_ms) if embed_ms else 0.0,
                }
            # The learned fusion, leave one set out (and on all sets, for the constants).
            folds: dict[str, list[float]] = {}
            for name in names:
                others = {n: feats[n] for n in names if n != name}
                folds[name] = fit(training_blocks(others if others else feats))
            results["learned_all"] = fit(training_blocks(feats))
            results["learned_folds"] = folds
            for name in names:
                s = sessions[name]
                per_q[name]["learned (LOSO)"] = {}
                ms[name]["learned (LOSO)"] = []
                for qid, text, ns, chunked in s.questions:
                    p = s.params(
                        chunked, None, fusion="learned", learned_weights=tuple(folds[name])
                    )
                    ids, took = s.search(text, ns, p)
                    per_q[name]["learned (LOSO)"][qid] = s.spec.metrics(qid, ids)
                    ms[name]["learned (LOSO)"].append(took)
        finally:
            for s in sessions.values():
                s.close()
    report(results, names, make, per_q, ms, cands)
    return 0


def report(
    results: dict[str, Any],
    names: Sequence[str],
    make: dict[str, Callable[[], Spec]],
    per_q: dict[str, dict[str, dict[str, Any]]],
    ms: dict[str, dict[str, list[float]]],
    cands: dict[str, dict[str, Any]],
) -> None:
    primary = {n: make[n]().primary for n in names}

    def delta(name: str, label: str) -> float:
        """Mean paired delta of the set's headline metrics against the default."""
        base, cand = per_q[name]["default"], per_q[name][label]
        return statistics.fmean(
            statistics.fmean(cand[q][m] - base[q][m] for q in base) for m in primary[name]
        )

    rows: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        entry = results["sets"][name]
        entry["candidates"] = {}
        base = per_q[name]["default"]
        for label in per_q[name]:
            got = per_q[name][label]
            m: dict[str, Any] = {"ms": statistics.fmean(ms[name][label])}
            for metric in primary[name]:
                m[metric] = mean_ci([got[q][metric] for q in base])
                m[f"Δ {metric}"] = mean_ci([got[q][metric] - base[q][metric] for q in base])
            entry["candidates"][label] = m
            rows.setdefault(name, []).append(
                {
                    "candidate": label,
                    **{
                        metric: f"{m[metric][0]:.3f} [{m[metric][1]:.3f}, {m[metric][2]:.3f}]"
                        for metric in primary[name]
                    },
                    "Δ": "; ".join(
                        f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"
                        for d in (m[f"Δ {metric}"] for metric in primary[name])
                    ),
                    "ms/q": f"{m['ms']:.1f}",
                }
            )
    chosen: list[dict[str, Any]] = []
    for name in names:
        others = [n for n in names if n != name] or [name]
        picks = {"default": "default", "learned": "learned (LOSO)"}
        for mode in ("rm3", "rocchio", "both"):
            grid = [c for c in cands if c.startswith(mode + " ")]
            picks[mode] = max(grid, key=lambda c: statistics.fmean(delta(o, c) for o in others))
        results["sets"][name]["chosen_on_others"] = picks
        for kind, label in picks.items():
            m = results["sets"][name]["candidates"][label]
            chosen.append(
                {
                    "reported on": name,
                    "candidate": label if kind != "learned" else "learned (fit on the other four)",
                    **{
                        metric: f"{m[metric][0]:.3f} [{m[metric][1]:.3f}, {m[metric][2]:.3f}]"
                        for metric in primary[name][:1]
                    },
                    "Δ (each headline)": "; ".join(
                        f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"
                        for d in (m[f"Δ {metric}"] for metric in primary[name])
                    ),
                    "ms/q": f"{m['ms']:.1f}",
                }
            )
    for name, table in rows.items():
        print_table(
            f"{name}: every candidate (95 % CI; Δ paired against default; "
            f"query embedding {results['sets'][name]['embed_ms']:.1f} ms)",
            table,
        )
    print_table("Parameters chosen on the other sets, reported on this one", chosen)
    print("learned fusion, fitted on all sets:", results["learned_all"])
    for name, w in results["learned_folds"].items():
        print(f"  without {name}: {w}")
    results["machine_after"] = machine()
    write_results("feedback", results)


if __name__ == "__main__":
    raise SystemExit(main())
