"""Fit the relevance model search and the grade role share (retrieve/relevance.py) and
choose grade's thresholds; print its reliability curve.

Data (``../shared/data``): HotpotQA-200 (the 1,971 pooled paragraphs; gold = the
supporting paragraphs), SciFact *train* qrels (the first ``--scifact-queries`` queries
with a judged document; corpus = their judged documents plus ``--scifact-distractors``
other abstracts, a fixed sample; the test qrels stay untouched for ``kredenc eval
beir``) and MuSiQue-200 (3,141 pooled paragraphs; never fitted on, transfer only).
Each corpus is filed with ``add_passages`` (title + paragraph, as the eval files it)
into one store under /tmp (vectors cached there, so a second run embeds nothing). Each
question is searched as the retrieve role searches (hybrid, k = ``--k``); every
returned chunk is one example: its :func:`kredenc.retrieve.relevance.features`, label
1 when it belongs to a gold paragraph / judged-relevant document.

Model: logistic regression (IRLS, L2 ``--l2``) over the features. Thresholds, by a
rule fixed before looking at any figure: ``upper`` = the lowest probability at which
CORRECT chunks are at least ``--precision`` relevant; ``lower`` = the highest at which
at most ``--loss`` of the relevant chunks fall below it (INCORRECT).

Reported (95 % bootstrap intervals over questions, ``--boot`` resamples):
- 5-fold cross-validation by question over HotpotQA + SciFact (fit and thresholds on
  four folds, scored on the fifth, the folds' out-of-fold predictions pooled);
- transfer: fit on HotpotQA, report on SciFact and MuSiQue; fit on SciFact, report on
  HotpotQA and MuSiQue;
- the shipped constants: fit on all of HotpotQA + SciFact, scored on MuSiQue.
Per report: AUC, Brier score, ECE (10 bins), CORRECT precision, share of relevant
chunks graded INCORRECT (lost), share graded AMBIGUOUS.

    PYTHONPATH=src .venv/bin/python benchmarks/fit_grade.py [--data ../shared/data]

Prints tables and the constants to paste into grade.py; writes
benchmarks/results/fit-grade.json.
"""

from __future__ import annotations

import argparse
import json
import random
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


# -- data -------------------------------------------------------------------------------
def _multihop(data: Path, name: str) -> tuple[list[Any], list[Any], dict[str, list[str]]]:
    from kredenc.eval import load_multihop

    d = load_multihop(data / "multihop" / f"{name}.json", data / "multihop" / f"{name}_corpus.json")
    return d.docs, d.queries, d.gold


#: SciFact train claims filed (those with a judged abstract) and distractor abstracts.
SCIFACT_QUERIES = 200
SCIFACT_DISTRACTORS = 800


def scifact_claims(
    data: Path, n_queries: int = SCIFACT_QUERIES, n_distract: int = SCIFACT_DISTRACTORS
) -> tuple[list[Any], list[Any], dict]:
    from kredenc.eval import load_beir

    d = load_beir(data / "scifact", split="train")
    queries = [q for q in d.queries if any(r > 0 for r in d.qrels.get(q.qid, {}).values())]
    queries = queries[:n_queries]
    gold = {q.qid: [i for i, r in d.qrels[q.qid].items() if r > 0] for q in queries}
    wanted = {i for ids in gold.values() for i in ids}
    others = [doc for doc in d.docs if doc.id not in wanted]
    random.Random(14).shuffle(others)
    docs = [doc for doc in d.docs if doc.id in wanted] + others[:n_distract]
    return docs, queries, gold


def _file(kb: Any, ns: str, docs: Sequence[Any]) -> None:
    from kredenc.ingest.passages import add_passages

    items = [
        {"text": d.text, "title": d.title, "meta": {"eval_id": d.id}}
        for d in docs
        if d.text.strip()
    ]
    have = kb.store.stats(ns)["records"]
    if have == len(items):
        return
    if have:
        raise SystemExit(f"error: {ns} was filed in part ({have}/{len(items)}); rm -r {WORK}")
    t0 = time.perf_counter()
    for start in range(0, len(items), 128):
        add_passages(kb.store, ns, items[start : start + 128])
        print(f"  {ns}: {min(start + 128, len(items))}/{len(items)} filed", file=sys.stderr)
    print(f"  {ns}: filed in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def examples(kb: Any, ns: str, queries: Sequence[Any], gold: dict, k: int) -> list[dict]:
    """One example per (question, returned chunk): qid, features, label."""
    from kredenc.loop.roles import grade
    from kredenc.retrieve import relevance
    from kredenc.retrieve.query import search

    out = []
    for q in queries:
        hits = search(kb.store, ns, q.text, k=k)
        if not hits:
            continue
        qv = np.asarray(kb.store.embed_query(q.text), dtype=np.float32)
        rows = relevance.features(q.text, hits, qv, grade.vectors(kb.store, ns, hits))
        relevant = set(gold[q.qid])
        for hit, row in zip(hits, rows, strict=True):
            label = int(str(hit.meta.get("eval_id")) in relevant)
            out.append({"qid": f"{ns}:{q.qid}", "x": row, "y": label})
    return out


# -- model ------------------------------------------------------------------------------
def fit(x: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """Logistic regression by IRLS; returns [coef..., intercept]."""
    a = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(a.shape[1])
    reg = l2 * np.eye(a.shape[1])
    reg[-1, -1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(a @ w, -30, 30)))
        grad = a.T @ (p - y) + reg @ w
        hess = a.T @ (a * (p * (1 - p))[:, None]) + reg + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(x @ w[:-1] + w[-1], -30, 30)))


def thresholds(p: np.ndarray, y: np.ndarray, precision: float, loss: float) -> tuple[float, float]:
    grid = np.unique(np.round(p, 4))
    upper = 1.0
    for t in grid:
        sel = p >= t
        if sel.sum() >= 5 and y[sel].mean() >= precision:
            upper = float(t)
            break
    lower = 0.0
    n_rel = max(1, int(y.sum()))
    for t in grid:
        if ((p < t) & (y == 1)).sum() / n_rel <= loss:
            lower = float(t)
    return upper, min(lower, upper)


def auc(p: np.ndarray, y: np.ndarray) -> float:
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    idx = np.minimum((p * bins).astype(int), bins - 1)
    return float(
        sum(
            abs(p[idx == b].mean() - y[idx == b].mean()) * (idx == b).mean()
            for b in range(bins)
            if (idx == b).any()
        )
    )


def metrics(p: np.ndarray, y: np.ndarray, upper: Any, lower: Any) -> dict[str, float]:
    correct, incorrect = p >= upper, p < lower
    n_rel = max(1, int(y.sum()))
    return {
        "auc": auc(p, y),
        "brier": float(((p - y) ** 2).mean()),
        "ece": ece(p, y),
        "correct_precision": float(y[correct].mean()) if correct.any() else float("nan"),
        "relevant_lost": float((incorrect & (y == 1)).sum() / n_rel),
        "ambiguous_share": float((~correct & ~incorrect).mean()),
    }


def reliability(
    qids: np.ndarray, p: np.ndarray, y: np.ndarray, boot: int, bins: int = 10
) -> list[dict[str, Any]]:
    """The reliability curve: per bin of predicted probability (tenths), the examples,
    the mean prediction and the observed share relevant, with its 95 % bootstrap
    interval over questions (the examples of one question move together)."""
    idx = np.minimum((p * bins).astype(int), bins - 1)
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(qids):
        groups.setdefault(str(q), []).append(i)
    keys = list(groups)
    rng = np.random.default_rng(16)
    draws: list[list[float]] = [[] for _ in range(bins)]
    for _ in range(boot):
        pick = np.concatenate([groups[keys[j]] for j in rng.integers(0, len(keys), len(keys))])
        for b in range(bins):
            sel = pick[idx[pick] == b]
            if len(sel):
                draws[b].append(float(y[sel].mean()))
    out = []
    for b in range(bins):
        mask = idx == b
        if not mask.any():
            continue
        lo, hi = np.percentile(draws[b], [2.5, 97.5])
        out.append(
            {
                "bin": f"{b / bins:.1f}-{(b + 1) / bins:.1f}",
                "n": int(mask.sum()),
                "predicted": round(float(p[mask].mean()), 4),
                "observed": round(float(y[mask].mean()), 4),
                "ci95": [round(float(lo), 4), round(float(hi), 4)],
            }
        )
    return out


def report(
    qids: np.ndarray, p: np.ndarray, y: np.ndarray, upper: Any, lower: Any, boot: int
) -> dict[str, Any]:
    """The metrics and their 95 % bootstrap intervals over questions (``upper`` and
    ``lower``: one threshold, or one per example)."""
    upper = np.broadcast_to(np.asarray(upper, dtype=float), p.shape)
    lower = np.broadcast_to(np.asarray(lower, dtype=float), p.shape)
    point = metrics(p, y, upper, lower)
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(qids):
        groups.setdefault(str(q), []).append(i)
    keys = list(groups)
    rng = np.random.default_rng(14)
    samples: dict[str, list[float]] = {m: [] for m in point}
    for _ in range(boot):
        pick = rng.integers(0, len(keys), len(keys))
        idx = np.concatenate([groups[keys[j]] for j in pick])
        for m, v in metrics(p[idx], y[idx], upper[idx], lower[idx]).items():
            samples[m].append(v)
    out: dict[str, Any] = {"questions": len(keys), "chunks": len(y), "relevant": int(y.sum())}
    for m, v in point.items():
        lo, hi = np.nanpercentile(samples[m], [2.5, 97.5])
        out[m] = {"value": round(v, 4), "ci95": [round(float(lo), 4), round(float(hi), 4)]}
    return out


def arrays(rows: Sequence[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array([r["qid"] for r in rows]),
        np.array([r["x"] for r in rows], dtype=float),
        np.array([r["y"] for r in rows], dtype=float),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--precision", type=float, default=0.8)
    parser.add_argument("--loss", type=float, default=0.05)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--scifact-queries", type=int, default=SCIFACT_QUERIES)
    parser.add_argument("--scifact-distractors", type=int, default=SCIFACT_DISTRACTORS)
    args = parser.parse_args(argv)
    if not (args.data / "multihop" / "hotpotqa_dev200.json").is_file():
        print(f"error: no multihop data in {args.data}; pass --data DIR", file=sys.stderr)
        return 2

    import onnxruntime  # noqa: F401  (before usearch, see benchmarks/corpus.py)

    from kredenc import Kredenc
    from kredenc.retrieve import relevance

    WORK.mkdir(parents=True, exist_ok=True)
    sets: dict[str, list[dict]] = {}
    cache = WORK / "examples.json"
    key = {
        "k": args.k,
        "sq": args.scifact_queries,
        "sd": args.scifact_distractors,
        "features": list(relevance.FEATURES),
    }
    if cache.is_file() and json.loads(cache.read_text())["key"] == key:
        sets = json.loads(cache.read_text())["sets"]
    else:
        loads = {
            "hotpotqa": lambda: _multihop(args.data, "hotpotqa_dev200"),
            "scifact": lambda: scifact_claims(
                args.data, args.scifact_queries, args.scifact_distractors
            ),
            "musique": lambda: _multihop(args.data, "musique_dev200"),
        }
        with Kredenc.open(
            WORK / "store", "fit", durability="none", embed_cache=WORK / "embed.db"
        ) as kb:
            for name, load in loads.items():
                docs, queries, gold = load()
                _file(kb, name, docs)
                sets[name] = examples(kb, name, queries, gold, args.k)
                print(f"  {name}: {len(sets[name])} examples", file=sys.stderr)
        cache.write_text(json.dumps({"key": key, "sets": sets}))

    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {
        "features": list(relevance.FEATURES),
        "args": vars(args) | {"data": str(args.data)},
    }

    # 5-fold CV by question over HotpotQA + SciFact.
    q, x, y = arrays(sets["hotpotqa"] + sets["scifact"])
    uq = np.unique(q)
    fold_of = {qq: i % args.folds for i, qq in enumerate(np.random.default_rng(14).permutation(uq))}
    folds = np.array([fold_of[qq] for qq in q])
    oof, up_cv, lo_cv = np.zeros(len(y)), np.zeros(len(y)), np.zeros(len(y))
    cuts = []
    for f in range(args.folds):
        tr, te = folds != f, folds == f
        w = fit(x[tr], y[tr], args.l2)
        up, lo = thresholds(predict(w, x[tr]), y[tr], args.precision, args.loss)
        cuts.append((up, lo))
        oof[te], up_cv[te], lo_cv[te] = predict(w, x[te]), up, lo
    # the folds' out-of-fold predictions, each classed with its own fold's thresholds
    results["cv"] = report(q, oof, y, up_cv, lo_cv, args.boot)
    results["cv"]["fold_thresholds"] = cuts
    results["cv"]["reliability"] = reliability(q, oof, y, args.boot)
    rows.append({"fit": "5-fold", "report": "hotpotqa+scifact", **_flat(results["cv"])})

    # Transfer.
    results["transfer"] = {}
    for src, dsts in (("hotpotqa", ("scifact", "musique")), ("scifact", ("hotpotqa", "musique"))):
        _, xs, ys = arrays(sets[src])
        w = fit(xs, ys, args.l2)
        up, lo = thresholds(predict(w, xs), ys, args.precision, args.loss)
        for dst in dsts:
            qd, xd, yd = arrays(sets[dst])
            r = report(qd, predict(w, xd), yd, up, lo, args.boot)
            r["thresholds"] = [up, lo]
            results["transfer"][f"{src}->{dst}"] = r
            rows.append({"fit": src, "report": dst, **_flat(r)})

    # The shipped constants.
    w = fit(x, y, args.l2)
    up, lo = thresholds(predict(w, x), y, args.precision, args.loss)
    qm, xm, ym = arrays(sets["musique"])
    results["final"] = {
        "coef": [round(float(c), 4) for c in w[:-1]],
        "intercept": round(float(w[-1]), 4),
        "upper": round(up, 4),
        "lower": round(lo, 4),
        "musique": report(qm, predict(w, xm), ym, up, lo, args.boot),
    }
    results["final"]["musique"]["reliability"] = reliability(qm, predict(w, xm), ym, args.boot)
    rows.append(
        {"fit": "hotpotqa+scifact", "report": "musique", **_flat(results["final"]["musique"])}
    )
    print_table("Grading retrieved chunks (95 % bootstrap CI over questions)", rows)
    for name, curve in (
        ("5-fold out-of-fold, hotpotqa+scifact", results["cv"]["reliability"]),
        ("fit on hotpotqa+scifact, musique", results["final"]["musique"]["reliability"]),
    ):
        print_table(
            f"Reliability ({name}; observed with 95 % CI over questions)",
            [
                {
                    "bin": c["bin"],
                    "n": c["n"],
                    "predicted": f"{c['predicted']:.3f}",
                    "observed": f"{c['observed']:.3f} [{c['ci95'][0]:.3f}, {c['ci95'][1]:.3f}]",
                }
                for c in curve
            ],
        )
    print("\nCOEF =", tuple(results["final"]["coef"]), "INTERCEPT =", results["final"]["intercept"])
    print(f"grade_upper = {up:.4f}  grade_lower = {lo:.4f}")
    write_results("fit-grade", results)
    return 0


def _flat(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"q": r["questions"], "chunks": r["chunks"]}
    for m in ("auc", "ece", "correct_precision", "relevant_lost", "ambiguous_share"):
        v = r[m]
        out[m] = f"{v['value']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]"
    return out


if __name__ == "__main__":
    raise SystemExit(main())
