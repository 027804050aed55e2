"""Would a reranker made from what ships help? Rerank a BEIR run by MiniLM sentence windows.

The candidate: score each of a query's top ``--depth`` documents by the best cosine
between the query and a two-sentence window of the document (title prefixed), with the
same bundled MiniLM model the dense leg uses; alone, and fused with the run's own order
by reciprocal rank. Reads a ``kredenc eval beir --run`` file, prints nDCG@10 for the run,
each reranked order and the seconds per query, and writes ``results/sentence-rerank.json``.

    kredenc --json eval beir ../shared/data/scifact --mode hybrid --run scifact.run.jsonl
    python benchmarks/probe_sentence_rerank.py scifact.run.jsonl ../shared/data/scifact
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np

from _common import print_table, write_results
from kredenc.eval.beir import load_beir
from kredenc.eval.metrics import ndcg_at_k
from kredenc.eval.runner import read_run
from kredenc.providers.embed.minilm import MiniLMEmbedder

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


def windows(title: str, text: str) -> list[str]:
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    pairs = [" ".join(sentences[i : i + 2]) for i in range(max(1, len(sentences) - 1))]
    return [f"{title}. {p}" if title else p for p in pairs if p] or [title or text]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a kredenc eval beir --run file")
    ap.add_argument("dataset", type=Path, help="the BEIR directory it was measured on")
    ap.add_argument("--depth", type=int, default=20, help="documents reranked per query")
    args = ap.parse_args()

    data = load_beir(args.dataset)
    docs = {d.id: d for d in data.docs}
    texts = {q.qid: q.text for q in data.queries}
    run = read_run(args.run)
    embedder = MiniLMEmbedder()
    cache: dict[str, np.ndarray] = {}
    orders: dict[str, dict[str, list[str]]] = {"run": {}, "windows": {}, "fused": {}}
    t0 = time.perf_counter()
    for qid, ranked in run.items():
        if qid not in texts:
            continue
        query = embedder.embed_query(texts[qid])
        top = [d for d in ranked[: args.depth] if d in docs]
        best: dict[str, float] = {}
        for doc_id in top:
            doc = docs[doc_id]
            body = doc.text.removeprefix(f"{doc.title}\n") if doc.title else doc.text
            pieces = windows(doc.title, body)
            missing = [p for p in pieces if p not in cache]
            if missing:
                cache.update(zip(missing, embedder.embed(missing), strict=True))
            best[doc_id] = float(max(float(cache[p] @ query) for p in pieces))
        by_window = sorted(top, key=lambda d: -best[d])
        pos_run = {d: i for i, d in enumerate(top)}
        pos_win = {d: i for i, d in enumerate(by_window)}
        fused = sorted(top, key=lambda d: -(1 / (60 + pos_run[d]) + 1 / (60 + pos_win[d])))
        rest = ranked[args.depth :]
        orders["run"][qid] = ranked
        orders["windows"][qid] = by_window + rest
        orders["fused"][qid] = fused + rest
    seconds = (time.perf_counter() - t0) / max(1, len(orders["run"]))
    rows = []
    for name, ranked_by_query in orders.items():
        score = float(
            np.mean([ndcg_at_k(r, data.qrels[q], 10) for q, r in ranked_by_query.items()])
        )
        rows.append({"order": name, "ndcg@10": round(score, 4)})
    print_table(f"nDCG@10, top {args.depth} reranked", rows)
    print(f"{seconds:.2f} s per query (windows embedded on first sight, cached after)")
    write_results("sentence-rerank", {"depth": args.depth, "rows": rows, "s_per_query": seconds})


if __name__ == "__main__":
    main()
