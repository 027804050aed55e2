"""Ranking metrics, each over one query's ranked ids.

Ranked lists are cleaned the same way everywhere (``dedupe``): a repeated id counts
once, at its first rank, as in trec_eval, where a run is a mapping from doc id to
score. LongMemEval's own nDCG variant lives in ``longmemeval.py`` because it differs.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence


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
