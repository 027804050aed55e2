"""Probe: neighbouring query words also searched as phrases on the lexical leg.

The lexical leg scores each query word alone; a card holding "first for women" in that
order scores as one holding "first", "women" and "for" anywhere. The sequential
dependence model (Metzler and Croft, 2005) adds the query's neighbouring word pairs as
phrases; here each two neighbouring content words, with at most two stopwords or single
letters between them, become one FTS5 phrase beside the words
(``retrieve.terms.pair_phrases``; ``SearchParams.pairs``), scored by the same BM25.

Each set is filed as ``kredenc eval`` files it (``bench_feedback.py``'s sessions) and
every question searched with the pairs off and on, everything else the default.

    cd benchmarks && PYTHONPATH=../src:. python probe_pairs.py [--data ../../shared/data] \\
        [--sets scifact,locomo,...] [--limit N]

Prints a table (on - off, paired, 95 % bootstrap CI; better/worse questions and the
search's p50 ms); writes benchmarks/results/pairs.json.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from typing import Any

from _common import print_table, write_results
from bench_feedback import Session, dev_sets_parser, mean_ci, specs


def main(argv: Sequence[str] | None = None) -> int:
    args = dev_sets_parser(__doc__ or "").parse_args(argv)
    made = specs(args.data)
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"sets": {}}
    for name in args.sets.split(","):
        spec = made[name]()
        per: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        ms: dict[bool, list[float]] = {False: [], True: []}
        with tempfile.TemporaryDirectory(prefix=f"kredenc-pairs-{name}-") as home:
            s = Session(spec, home, args.limit)
            try:
                s.file()
                for qid, text, ns, chunked in s.questions:
                    for on in (False, True):
                        ids, took = s.search(text, ns, s.params(chunked, None, pairs=on))
                        per[on].append(spec.metrics(qid, ids))
                        ms[on].append(took)
            finally:
                s.kb.close()
        out["sets"][name] = {}
        for metric in spec.primary:
            off = [m[metric] for m in per[False]]
            on = [m[metric] for m in per[True]]
            d = [b - a for a, b in zip(off, on, strict=True)]
            dm, lo, hi = mean_ci(d)
            better, worse = sum(x > 1e-9 for x in d), sum(x < -1e-9 for x in d)
            entry = {
                "off": round(statistics.fmean(off), 4),
                "on": round(statistics.fmean(on), 4),
                "delta": [round(dm, 4), round(lo, 4), round(hi, 4)],
                "better_worse": [better, worse],
                "ms_p50": [
                    round(statistics.median(ms[False]), 1),
                    round(statistics.median(ms[True]), 1),
                ],
            }
            out["sets"][name][metric] = entry
            rows.append(
                {
                    "set": name,
                    "metric": metric,
                    "off": f"{entry['off']:.4f}",
                    "on": f"{entry['on']:.4f}",
                    "on - off": f"{dm:+.4f} [{lo:+.4f}, {hi:+.4f}]; {better}/{worse}",
                    "ms p50 off/on": "/".join(str(x) for x in entry["ms_p50"]),
                }
            )
    print_table("Neighbouring words as phrases (on - off [95 % CI]; better/worse)", rows)
    write_results("pairs", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
