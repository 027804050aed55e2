"""Probe: a chunk's dense score from its sentences' vectors (small-to-big).

Issue 17's sentence-window measurement (``kredenc eval … --units sentences``, docs/
benchmarks.md) found the dense leg better on sentence units (SciFact dense alone
0.693 against 0.672 on chunks) and the lexical leg worse (0.671 against 0.683). This
probe asks what a chunk gains from both: every corpus is filed as ``kredenc eval``
files it (chunks, the eval's search with its graph hop and coverage), and only the
dense leg changes: a chunk's dense score is the best cosine between the query and the
sentence units (``ingest.chunker.sentence_spans``, 300 characters, titled as sentence
filing embeds them) that overlap it (``--score sentences``), or the better of that and
the chunk's own vector (``--score both``). ``--score chunk`` is the eval itself.

The sentence vectors come from the shared eval embedding cache (a sentence-filing eval
run fills it) or are embedded here. A probe, not a product path: the store's ANN index
is bypassed by an exact scan of the unit matrix.

    cd benchmarks && PYTHONPATH=../src:. ../.venv/bin/python probe_sentence_vectors.py \\
        --set scifact --score sentences --run /tmp/scifact.sv.jsonl

Prints the eval's summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench_feedback import CACHE

SCORES = ("chunk", "sentences", "both")


def unit_matrix(kb: Any, retriever: Any, docs: Sequence[Any]) -> tuple[np.ndarray, list[int]]:
    """Every sentence unit's vector, and the rowid of the chunk each unit row scores
    (a unit overlapping two chunks has a row for each)."""
    from kredenc.ingest.chunker import DEFAULT_SENTENCE_SIZE, sentence_spans
    from kredenc.storage.index.cards import embed_text_of
    from kredenc.storage.index.filters import Filters
    from kredenc.storage.index.reads import RecordQuery

    store = kb.store
    ns = retriever.namespace
    listed = store.index.list_records(ns, RecordQuery(types=("chunk",)))
    rowid_of = store.index.rowids_for(ns, [rid for rid, _ in listed], Filters())
    chunks: dict[str, list[int]] = {}
    for rid, address in listed:
        eval_id = str(store.haystack.read(address)["meta"]["eval_id"])
        chunks.setdefault(eval_id, []).append(rowid_of[rid])
    texts: list[str] = []
    owners: list[int] = []
    for d in docs:
        text = d.text.strip()
        rowids = chunks.get(d.id)
        if not text or not rowids:
            continue
        spans = [(a, b) for a, b in retriever.chunk_spans(text) if text[a:b].strip()]
        assert len(spans) == len(rowids), d.id
        start = len(d.title) if d.title and text.startswith(d.title) else 0
        for a, b in sentence_spans(text[start:], DEFAULT_SENTENCE_SIZE):
            piece = text[start + a : start + b]
            embedded = embed_text_of({"title": d.title, "text": piece})
            for (c0, c1), rowid in zip(spans, rowids, strict=True):
                if start + a < c1 and start + b > c0:
                    texts.append(embedded)
                    owners.append(rowid)
    unique = list(dict.fromkeys(texts))
    vectors = store.embed_cached(unique)
    row = {t: i for i, t in enumerate(unique)}
    return np.asarray(vectors, dtype=np.float32)[[row[t] for t in texts]], owners


def patch_dense(kb: Any, matrix: np.ndarray, owners: list[int], score: str) -> None:
    """Make the store's dense leg score chunks by their units (exact scan)."""
    index = kb.store.index
    own = np.asarray(owners)
    chunk_dense = index.dense

    def dense(ns: str, query: Any, k: int, filters: Any) -> list[tuple[int, float]]:
        sims = matrix @ np.asarray(query, dtype=np.float32)
        best: dict[int, float] = {}
        order = np.argsort(-sims)
        for i in order[: k * 20]:
            rowid = int(own[i])
            if rowid not in best:
                best[rowid] = float(sims[i])
        if score == "both":
            for rowid, s in chunk_dense(ns, query, k, filters):
                best[rowid] = max(best.get(rowid, -1.0), s)
        ranked = sorted(best.items(), key=lambda x: -x[1])
        return ranked[:k]

    index.dense = dense


def main(argv: Sequence[str] | None = None) -> int:
    from kredenc import Kredenc
    from kredenc.eval import load_beir, load_multihop, run
    from kredenc.eval.engine_retriever import EngineRetriever

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../../shared/data"))
    ap.add_argument("--set", choices=("scifact", "hotpotqa", "musique"), required=True)
    ap.add_argument("--score", choices=SCORES, default="sentences")
    ap.add_argument("--run", type=Path, default=None, help="Write the ranked lists here.")
    args = ap.parse_args(argv)
    if args.set == "scifact":
        dataset: Any = load_beir(args.data / "scifact")
        hops = 0
    else:
        m = args.data / "multihop"
        dataset = load_multihop(m / f"{args.set}_dev200.json", m / f"{args.set}_dev200_corpus.json")
        hops = 1
    with tempfile.TemporaryDirectory(prefix="kredenc-sv-") as home:
        kb = Kredenc.open(home, "eval", durability="none", embed_cache=CACHE)
        try:
            opts: dict[str, Any] = {"mode": "hybrid"}
            if hops:
                opts["hops"] = hops
            retriever = EngineRetriever(kb.store, mention_links=kb.settings.mention_links, **opts)
            (group,) = list(dataset.groups())
            retriever.reset()
            retriever.index(group.docs)
            # Filed once, above: the runner's reset and index are no-ops now.
            retriever.reset = lambda: None  # type: ignore[method-assign]
            retriever.index = lambda _docs: None  # type: ignore[method-assign]
            if args.score != "chunk":
                matrix, owners = unit_matrix(kb, retriever, group.docs)
                patch_dense(kb, matrix, owners, args.score)
            result = run(retriever, dataset, run_file=args.run)
        finally:
            kb.close()
    summary = result.summary()
    summary["config"] = {"score": args.score, **opts}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
