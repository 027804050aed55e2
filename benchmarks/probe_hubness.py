"""Probe: the dense leg's cosine corrected for hubs (CSLS) or for the corpus mean.

A small embedder's vectors are not spread evenly: some passages ("hubs") sit close to
almost every query and crowd the dense leg's top ranks whatever is asked. Two standard
corrections, each with its constants fixed from the literature (nothing fitted here):

- ``csls``: cross-domain similarity local scaling (Conneau et al., 2018). A passage's
  score is ``2 cos(q, d) - r_d`` (the query's own term is the same for every passage),
  where ``r_d`` is the mean cosine of ``d`` to its 10 nearest other passages of the
  same shard: a passage close to everything is marked down by what it is close to.
- ``center``: the cosine after the shard's mean vector is taken from the query and from
  every passage (mean-centring, as in all-but-the-top, Mu and Viswanath, 2018, first
  step): what every passage shares stops counting as likeness.

The probe replaces ``VectorShard.search`` with an exact search of the whole shard under
the variant (the ANN graph is bypassed: this measures ranking, not cost; ``r_d`` and the
mean are computed once per shard). Each set is filed as ``kredenc eval`` files it
(``bench_feedback.py``'s sessions) and every question searched with each variant,
everything else the default (min-max fusion, so the score's scale does not matter).

Decision rule, written before the first run: a variant is adopted only if its primary
metric gains on at least 3 of the 5 sets, no set loses significantly (the paired
95 % interval wholly below 0), and at least one gain is significant.

    cd benchmarks && PYTHONPATH=../src:. python probe_hubness.py [--data ../../shared/data] \\
        [--sets scifact,locomo,...] [--limit N]

Prints a table (variant - off, paired, 95 % bootstrap CI; better/worse questions);
writes benchmarks/results/hubness.json.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from _common import machine, print_table, write_results
from bench_feedback import Session, dev_sets_parser, mean_ci, specs

VARIANTS = ("off", "csls", "center")
NEIGHBOURS = 10  # Conneau et al.'s k
BLOCK = 1024

_mode = {"variant": "off"}
_cache: dict[tuple[int, int, str], Any] = {}


def _hub_scores(matrix: np.ndarray) -> np.ndarray:
    """Mean cosine of each row to its NEIGHBOURS nearest other rows."""
    n = len(matrix)
    k = min(NEIGHBOURS, n - 1)
    out = np.zeros(n, dtype=np.float32)
    if k <= 0:
        return out
    for start in range(0, n, BLOCK):
        sims = matrix[start : start + BLOCK] @ matrix.T
        for i in range(len(sims)):
            sims[i, start + i] = -np.inf  # not itself
        top = np.partition(-sims, k - 1, axis=1)[:, :k]
        out[start : start + len(sims)] = -top.mean(axis=1)
    return out


def _prepared(shard: Any, variant: str) -> Any:
    n = shard._n
    key = (id(shard), n, variant)
    if key not in _cache:
        m = shard._matrix[:n]
        if variant == "csls":
            _cache[key] = _hub_scores(m)
        else:
            mu = m.mean(axis=0)
            c = m - mu
            c /= np.linalg.norm(c, axis=1, keepdims=True) + 1e-12
            _cache[key] = (mu, c.astype(np.float32))
    return _cache[key]


def _search(original: Any) -> Any:
    def search(self: Any, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        variant = _mode["variant"]
        if variant == "off":
            return original(self, query, k)
        with self._lock:
            n = self._n
            if n == 0 or k <= 0:
                return []
            if variant == "csls":
                cos = self._matrix[:n] @ query
                scores = cos - 0.5 * _prepared(self, "csls")
            else:
                mu, c = _prepared(self, "center")
                q = query - mu
                q = q / (np.linalg.norm(q) + 1e-12)
                scores = c @ q
            k = min(k, n)
            order = np.lexsort((self._rowids[:n], -scores))[:k]
            return [(int(self._rowids[i]), float(scores[i])) for i in order]

    return search


def main(argv: Sequence[str] | None = None) -> int:
    from kredenc.storage.index.vectors import VectorShard

    args = dev_sets_parser(__doc__ or "").parse_args(argv)
    VectorShard.search = _search(VectorShard.search)  # type: ignore[method-assign]
    made = specs(args.data)
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"machine": machine(), "sets": {}}
    for name in args.sets.split(","):
        spec = made[name]()
        per: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        with tempfile.TemporaryDirectory(prefix=f"kredenc-hub-{name}-") as home:
            s = Session(spec, home, args.limit)
            try:
                s.file()
                for qid, text, ns, chunked in s.questions:
                    for variant in VARIANTS:
                        _mode["variant"] = variant
                        ids, _ = s.search(text, ns, s.params(chunked, None))
                        per[variant].append(spec.metrics(qid, ids))
            finally:
                _mode["variant"] = "off"
                s.kb.close()
        out["sets"][name] = {}
        for metric in spec.primary:
            off = [m[metric] for m in per["off"]]
            entry: dict[str, Any] = {"off": round(statistics.fmean(off), 4), "n": len(off)}
            for variant in VARIANTS[1:]:
                on = [m[metric] for m in per[variant]]
                d = [b - a for a, b in zip(off, on, strict=True)]
                dm, lo, hi = mean_ci(d)
                better, worse = sum(x > 1e-9 for x in d), sum(x < -1e-9 for x in d)
                entry[variant] = {
                    "mean": round(statistics.fmean(on), 4),
                    "delta": [round(dm, 4), round(lo, 4), round(hi, 4)],
                    "better_worse": [better, worse],
                }
                rows.append(
                    {
                        "set": name,
                        "metric": metric,
                        "variant": variant,
                        "off": f"{entry['off']:.4f}",
                        "variant mean": f"{entry[variant]['mean']:.4f}",
                        "variant - off": f"{dm:+.4f} [{lo:+.4f}, {hi:+.4f}]; {better}/{worse}",
                    }
                )
            out["sets"][name][metric] = entry
        print(f"{name} done", flush=True)
    print_table("Dense cosine corrected for hubs (variant - off [95 % CI]; better/worse)", rows)
    write_results("hubness", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
