"""Ranking metrics, each over one query's ranked ids; and the judge's binary metrics
(AUROC, accuracy/precision/recall/F1) with bootstrap intervals.

Ranked lists are cleaned the same way everywhere (``dedupe``): a repeated id counts
once, at its first rank, as in trec_eval, where a run is a mapping from doc id to
score. LongMemEval's own nDCG variant lives in ``longmemeval.py`` because it differs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence


def dedupe(ranked: Iterable[str]) -> list[str]:
    """Ids in order, each kept at its first occurrence."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in ranked:
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def dcg(gains: Sequence[float]) -> float:
    """sum(gain_i / log2(i + 1)) over ranks i = 1, 2, ... (trec_eval / BEIR)."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    """nDCG@k as trec_eval's ``ndcg_cut_k`` (what BEIR reports).

    Gains are the graded relevance values in ``qrels`` (values <= 0 give no gain),
    discount 1 / log2(rank + 1), and the ideal DCG is built from the qrels' own gains
    sorted descending, cut at k. 0.0 when the query has no positive judgement.
    """
    top = dedupe(ranked)[:k]
    gains = [max(float(qrels.get(d, 0.0)), 0.0) for d in top]
    ideal = sorted((max(float(g), 0.0) for g in qrels.values()), reverse=True)[:k]
    idcg = dcg(ideal)
    return dcg(gains) / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """|relevant ∩ top k| / |relevant|; 0.0 when nothing is relevant."""
    if not relevant:
        return 0.0
    top = set(dedupe(ranked)[:k])
    return sum(1 for d in set(relevant) if d in top) / len(set(relevant))


def all_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 when every relevant id is in the top k (0.0 when nothing is relevant)."""
    if not relevant:
        return 0.0
    top = set(dedupe(ranked)[:k])
    return 1.0 if all(d in top for d in relevant) else 0.0


def any_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 when at least one relevant id is in the top k (hit@k)."""
    top = set(dedupe(ranked)[:k])
    return 1.0 if any(d in top for d in relevant) else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation (numpy's default)."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# -- binary classification (the judge) ------------------------------------------


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """Area under the ROC curve of ``scores`` for the positive ``labels`` (ties count
    half: the Mann-Whitney statistic). 0.5 when one class is absent."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return 0.5
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def classification(labels: Sequence[bool], predicted: Sequence[bool]) -> dict[str, float]:
    """Accuracy, and precision, recall and F1 of the positive class (0.0 when undefined)."""
    tp = sum(1 for y, p in zip(labels, predicted, strict=True) if y and p)
    fp = sum(1 for y, p in zip(labels, predicted, strict=True) if p and not y)
    fn = sum(1 for y, p in zip(labels, predicted, strict=True) if y and not p)
    n = len(labels)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = (n - fp - fn) / n if n else 0.0
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1}


def bootstrap_ci(
    statistic: Callable[[Sequence[int]], float],
    n: int,
    *,
    rounds: int = 1000,
    seed: int = 0,
    groups: Sequence[object] | None = None,
) -> tuple[float, float]:
    """The 95 % percentile bootstrap interval of ``statistic(indexes)`` over ``n`` items.

    ``groups`` (one key per item) resamples whole groups (e.g. all responses to one
    source together), so items that share a source do not narrow the interval.
    """
    rng = random.Random(seed)
    if groups is None:
        units: list[list[int]] = [[i] for i in range(n)]
    else:
        by: dict[object, list[int]] = {}
        for i, g in enumerate(groups):
            by.setdefault(g, []).append(i)
        units = list(by.values())
    values = []
    for _ in range(rounds):
        picked = [i for _ in units for i in units[rng.randrange(len(units))]]
        values.append(statistic(picked))
    return percentile(values, 2.5), percentile(values, 97.5)


def mean_ci(values: Sequence[float], *, rounds: int = 1000, seed: int = 0) -> list[float]:
    """The 95 % bootstrap interval of the mean of per-question ``values`` (resampling
    questions), rounded to 4 places; [0, 0] when there are none."""
    if not values:
        return [0.0, 0.0]
    xs = list(values)
    lo, hi = bootstrap_ci(
        lambda idx: sum(xs[i] for i in idx) / len(idx), len(xs), rounds=rounds, seed=seed
    )
    return [round(lo, 4), round(hi, 4)]
