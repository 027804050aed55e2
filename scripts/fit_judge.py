"""Fit the deterministic judge's weights by cross-validation (docs/benchmarks.md, "The judge").

    PYTHONPATH=src python scripts/fit_judge.py [--ragtruth FILE] [--halueval FILE]

1. Gathers each answer's findings once (embeddings through the eval embedding cache).
2. Joint 5-fold cross-validation over both sets (RAGTruth folds by source, HaluEval
   folds by record; fold k of both held out together). On the training folds the grid
   point is chosen that maximises the mean of RAGTruth's and HaluEval's AUROC (averaged
   with its grid neighbours'), and its support threshold is the one whose verdict (the
   rules included) has the best RAGTruth F1, averaged with the thresholds either side,
   on a 0.0025 grid below the soft floor (F1 is RAGTruth's target; HaluEval's one-line
   answers would want another); the held-out folds are scored with it. (Putting F1
   into the objective was tried: it lowered both AUROCs and F1.)
   Pooled held-out figures are printed with 95 % bootstrap intervals (resampling sources / records).
3. The default: the same fit on all of both sets. Its losers are printed too (the
   best objective per value of each weight), so the choice can be read.
4. Transfer: the fit on one set alone scored on the other.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from kredenc.engine import Kredenc
from kredenc.eval.judge import JudgeItem, load_judge_file, score_judge
from kredenc.grounding.judge import Findings, JudgeParams, SupportJudge, _material
from kredenc.grounding.support import FLOOR, SupportParams

GRID: dict[str, list[float]] = {
    "w_words": [0.0, 0.25, 0.5],
    "w_local": [0.0, 0.25],
    "w_bigrams": [0.25, 0.5, 0.75, 1.0],
    "cos_low": [0.2, 0.4],
    "cos_high": [0.8],
    "mass_penalty": [0.0, 0.03, 0.06, 0.1],
    "number_penalty": [0.0, 0.25, 0.5],
    "name_penalty": [0.0, 0.15, 0.3],
    "relation_penalty": [0.0, 0.1],
    "polarity_penalty": [0.0, 0.2],
}
QUESTION_COVERAGE = [0.2, 0.35, 0.5]
# Fine steps where the soft floor squeezes (below FLOOR), coarser above. The squeeze
# makes 0.01 there a long way in raw support (0.11 -> 0.12 is -0.62 -> -0.47), and the
# old 0.01 steps left the choice between two shoulders of RAGTruth's F1 peak.
THRESHOLDS = [round(x, 4) for x in np.arange(0.05, 0.2, 0.0025)] + [
    round(x, 3) for x in np.arange(0.2, 0.96, 0.025)
]
#: The threshold's F1 is averaged with this many thresholds either side (like the grid
#: choice): F1 over one set of answers is a step function with narrow spikes.
THRESHOLD_NEIGHBOURS = 1
CAP = JudgeParams().insufficient_cap  # below "moderate" by the bands' definition


class Table:
    """The findings of a set as arrays: one row per material sentence."""

    def __init__(self, items: list[JudgeItem], found: list[Findings]) -> None:
        rows: list[list[float]] = []
        owner: list[int] = []
        for n, f in enumerate(found):
            for ev, facts in f.sentences:
                if not _material(facts):
                    continue
                owner.append(n)
                rows.append(
                    [
                        float(ev.marked),
                        ev.words,
                        ev.local,
                        ev.bigrams,
                        ev.missing_mass,
                        ev.cosine if ev.cosine is not None else 1.0,
                        ev.missing_numbers,
                        ev.missing_names,
                        ev.loose_numbers + ev.loose_names,
                        ev.polarity,
                    ]
                )
        self.x = np.array(rows, dtype=np.float64)
        self.owner = np.array(owner, dtype=np.int64)
        self.n = len(items)
        self.items = items
        self.labels = np.array([it.hallucinated for it in items])
        self.groups = [it.group for it in items]
        self.found = found
        # The rules that make a sentence unsupported whatever its support.
        self.flagged = np.array(
            [any(ev.swapped or ev.novel for ev, fc in f.sentences if _material(fc)) for f in found]
        )
        self.empty = np.array([not any(_material(fc) for _, fc in f.sentences) for f in found])

    def sufficient(self, p: JudgeParams) -> np.ndarray:
        judge = SupportJudge(None, p)
        return np.array([judge.sufficiency(f) >= 1.0 for f in self.found])

    def support(self, p: SupportParams) -> np.ndarray:
        x = self.x
        span = max(p.cos_high - p.cos_low, 1e-9)
        meaning = np.clip((x[:, 5] - p.cos_low) / span, 0.0, 1.0)
        w_meaning = 1.0 - p.w_words - p.w_local - p.w_bigrams
        s = p.w_words * x[:, 1] + p.w_local * x[:, 2] + p.w_bigrams * x[:, 3]
        s += w_meaning * meaning - p.mass_penalty * x[:, 4]
        s -= p.number_penalty * x[:, 6] + p.name_penalty * x[:, 7]
        s -= p.relation_penalty * x[:, 8] + p.polarity_penalty * x[:, 9]
        s = np.where(s >= FLOOR, np.minimum(s, 1.0), FLOOR / (1.0 + FLOOR - s))
        s[x[:, 0] > 0] = 0.0
        return s

    def weakest(self, p: SupportParams) -> np.ndarray:
        out = np.ones(self.n)
        np.minimum.at(out, self.owner, self.support(p))
        return out

    def confidence(self, weakest: np.ndarray, sufficient: np.ndarray) -> np.ndarray:
        conf = np.round(100 * weakest)
        conf[self.empty] = 50  # no checkable statement: the judge says little
        return np.where(sufficient, conf, np.minimum(conf, CAP))


def rankdata(scores: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = ends - (counts - 1) / 2.0
    return mean_rank[inverse]


def fast_auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """:func:`kredenc.eval.metrics.auroc` with numpy (ties count half)."""
    ranks = rankdata(scores)
    pos = int(labels.sum())
    neg = len(labels) - pos
    if not pos or not neg:
        return 0.5
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def candidates() -> list[SupportParams]:
    out = []
    for values in itertools.product(*GRID.values()):
        kw = dict(zip(GRID, values, strict=True))
        used = kw["w_words"] + kw["w_local"] + kw["w_bigrams"]
        if used > 1.0 + 1e-9:
            continue
        ramp = (kw["cos_low"], kw["cos_high"])
        if used >= 1.0 - 1e-9 and ramp != (GRID["cos_low"][0], GRID["cos_high"][0]):
            continue  # the ramp does not matter without meaning
        out.append(SupportParams(**kw))
    return out


Split = list[tuple[Table, np.ndarray]]  # (table, item indexes) per set


def fast_f1(labels: np.ndarray, detected: np.ndarray) -> float:
    tp = int((labels & detected).sum())
    fp = int((~labels & detected).sum())
    fn = int((labels & ~detected).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def best_threshold(parts: Split, weakest: list[np.ndarray]) -> tuple[float, float]:
    """(threshold, F1): the support threshold whose verdict has the best mean F1 over
    ``parts``, averaged with its :data:`THRESHOLD_NEIGHBOURS` neighbours either side
    (the middle of a run of ties). The verdict is the judge's: the weakest support
    below the threshold *or* a rule (substitution, all-novel) firing; choosing it for
    the support alone, as the first two passes did, tuned a verdict the judge never gives."""
    f1s = []
    for th in THRESHOLDS:
        f1 = sum(
            fast_f1(t.labels[idx], ((w < th) | t.flagged)[idx])
            for (t, idx), w in zip(parts, weakest, strict=True)
        )
        f1s.append(f1 / len(parts))
    k = THRESHOLD_NEIGHBOURS
    smooth = [float(np.mean(f1s[max(0, i - k) : i + k + 1])) for i in range(len(f1s))]
    top = max(smooth)
    ties = [th for f, th in zip(smooth, THRESHOLDS, strict=True) if f >= top - 1e-9]
    return float(ties[len(ties) // 2]), top


def fit(
    parts: Split, f1_parts: Split | None = None
) -> tuple[JudgeParams, float, list[tuple[dict[str, Any], float]]]:
    """The grid point with the best mean AUROC over ``parts``, with the support threshold
    that gives the best mean F1 over ``f1_parts`` (default ``parts``) under it."""
    f1_parts = parts if f1_parts is None else f1_parts
    tried: list[tuple[dict[str, Any], float]] = []
    best: tuple[float, JudgeParams] | None = None
    suff = {
        q: [t.sufficient(JudgeParams(question_coverage=q)) for t, _ in parts]
        for q in QUESTION_COVERAGE
    }
    raw: dict[tuple[float, ...], tuple[float, JudgeParams]] = {}
    for sp in candidates():
        weakest = [t.weakest(sp) for t, _ in parts]
        for q in QUESTION_COVERAGE:
            aurocs = [
                fast_auroc(t.labels[idx], 100 - t.confidence(w, ok)[idx])
                for (t, idx), w, ok in zip(parts, weakest, suff[q], strict=True)
            ]
            score = sum(aurocs) / len(aurocs)
            tried.append(({**asdict(sp), "question_coverage": q}, score))
            raw[_coords(sp, q)] = (score, JudgeParams(support=sp, question_coverage=q))
    # The choice: the best objective averaged with its grid neighbours' (one weight one
    # step away), so a fold does not jump between near-ties that score alike but put
    # the confidence on another scale (pooled held-out AUROC mixes the folds' scales).
    for at, (_, jp) in raw.items():
        near = [raw[n][0] for n in _neighbours(at) if n in raw] + [raw[at][0]]
        smooth = sum(near) / len(near)
        if best is None or smooth > best[0] + 1e-12:
            best = (smooth, jp)
    assert best is not None
    # The threshold does not enter the AUROCs: chosen for the chosen grid point only.
    chosen = best[1]
    threshold, _ = best_threshold(f1_parts, [t.weakest(chosen.support) for t, _ in f1_parts])
    return replace(chosen, support=replace(chosen.support, threshold=threshold)), best[0], tried


AXES = [*GRID, "question_coverage"]


def _coords(sp: SupportParams, q: float) -> tuple[float, ...]:
    return (*tuple(getattr(sp, name) for name in GRID), q)


def _neighbours(at: tuple[float, ...]) -> list[tuple[float, ...]]:
    out = []
    for i, name in enumerate(AXES):
        values = QUESTION_COVERAGE if name == "question_coverage" else GRID[name]
        j = values.index(at[i])
        for k in (j - 1, j + 1):
            if 0 <= k < len(values):
                out.append((*at[:i], values[k], *at[i + 1 :]))
    return out


def predict(t: Table, p: JudgeParams) -> tuple[np.ndarray, np.ndarray]:
    weakest = t.weakest(p.support)
    return t.confidence(weakest, t.sufficient(p)), (weakest < p.support.threshold) | t.flagged


def folds_of(t: Table, k: int) -> np.ndarray:
    groups = sorted(set(t.groups), key=lambda g: (len(g), g))
    order = np.random.default_rng(7).permutation(len(groups))
    fold = {groups[j]: n % k for n, j in enumerate(order)}
    return np.array([fold[g] for g in t.groups])


def cross_validate(tables: list[Table], k: int = 5) -> tuple[list[Any], list[dict[str, Any]]]:
    """Held-out (confidence, detected) per table, fitting on all tables' other folds."""
    fold = [folds_of(t, k) for t in tables]
    held = [(np.zeros(t.n), np.zeros(t.n, dtype=bool)) for t in tables]
    chosen = []
    for f in range(k):
        train = [(t, np.flatnonzero(fd != f)) for t, fd in zip(tables, fold, strict=True)]
        p, score, _ = fit(train, train[:1])
        chosen.append({**asdict(p), "train_objective": round(score, 4)})
        for (conf, det), t, fd in zip(held, tables, fold, strict=True):
            test = np.flatnonzero(fd == f)
            c, d = predict(t, p)
            conf[test], det[test] = c[test], d[test]
    return held, chosen


def report(title: str, items: list[JudgeItem], conf: Any, detected: Any) -> dict[str, Any]:
    m = score_judge(items, [int(c) for c in conf], [bool(d) for d in detected])
    print(f"\n{title}")
    for k in ("auroc", "f1", "precision", "recall", "accuracy"):
        v = m[k]
        print(f"  {k:9s} {v['value']:.3f}  [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]")
    for k, v in m["floors"].items():
        print(f"  floor {k:24s} {v['value']:.3f}  [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]")
    return m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ragtruth", default="../shared/data/ragtruth/ragtruth_qa_dev.jsonl")
    ap.add_argument("--halueval", default="../shared/data/halueval/qa_dev.jsonl")
    ap.add_argument("--cache", default="~/.cache/kredenc/eval-embeddings.db")
    ap.add_argument("--out", default="benchmarks/results/judge_fit.json")
    args = ap.parse_args()
    cache = Path(args.cache).expanduser()
    cache.parent.mkdir(parents=True, exist_ok=True)
    home = tempfile.mkdtemp(prefix="kredenc-fit-")
    kb = Kredenc.open(home, "eval", durability="none", embed_cache=cache)
    judge = SupportJudge(kb.store.embed_cached, every_cosine=True)  # fitting reads every cosine
    tables: dict[str, Table] = {}
    for name, path in (("ragtruth", args.ragtruth), ("halueval", args.halueval)):
        _, items = load_judge_file(path)
        found = [judge.findings(it.question, it.answer, it.contexts) for it in items]
        tables[name] = Table(items, found)
    kb.close()
    rt, he = tables["ragtruth"], tables["halueval"]
    out: dict[str, Any] = {}
    held, chosen = cross_validate([rt, he])
    out["joint_cv5"] = {
        "ragtruth": report("RAGTruth QA, joint 5-fold CV", rt.items, *held[0]),
        "halueval": report("HaluEval QA, joint 5-fold CV", he.items, *held[1]),
        "chosen": chosen,
    }
    everything = [(rt, np.arange(rt.n)), (he, np.arange(he.n))]
    p, score, tried = fit(everything, everything[:1])
    print("\nthe default: fit on both sets:", asdict(p), "mean AUROC", round(score, 4))
    out["default"] = asdict(p)
    losers: dict[str, dict[str, float]] = {}
    for kw, a in tried:
        for name, value in kw.items():
            if name == "threshold":
                continue
            slot = losers.setdefault(name, {})
            slot[str(value)] = max(slot.get(str(value), 0.0), round(a, 4))
    print("best in-sample mean AUROC per value:", json.dumps(losers))
    out["grid_best_per_value"] = losers
    for a, b in (("ragtruth", "halueval"), ("halueval", "ragtruth")):
        src, dst = tables[a], tables[b]
        pa, _, _ = fit([(src, np.arange(src.n))])
        conf, det = predict(dst, pa)
        out[f"{b}_from_{a}"] = report(f"{b} with the fit on {a} alone", dst.items, conf, det)
        out[f"{b}_from_{a}"]["params"] = asdict(pa)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
