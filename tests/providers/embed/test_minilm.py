"""MiniLMEmbedder against fp32 sentence-transformers vectors, plus shape, norm and order."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed.minilm import (
    DIM,
    MAX_BATCH_TOKENS,
    MODEL_ID,
    MiniLMEmbedder,
    _batches,
    read_vocab,
)

FIXTURE = Path(__file__).parents[2] / "fixtures/embed/minilm_fp32_reference.json"
MIN_COSINE = 0.995


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder(intra_op_num_threads=1, batch_size=4)


@pytest.fixture(scope="module")
def reference() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))["items"]
    return items


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_matches_fp32_reference(embedder: MiniLMEmbedder, reference: list[dict[str, Any]]) -> None:
    texts = [item["text"] for item in reference]
    assert any(item["tokens_untruncated"] > 256 for item in reference)
    ours = embedder.embed(texts)
    cosines = [cos(v, np.asarray(item["vector"])) for v, item in zip(ours, reference, strict=True)]
    worst = min(range(len(cosines)), key=cosines.__getitem__)
    assert cosines[worst] >= MIN_COSINE, (texts[worst][:60], cosines[worst])


def test_paraphrase_closer_than_unrelated(embedder: MiniLMEmbedder) -> None:
    a, b, c, d = embedder.embed(
        [
            "How do I reset my password?",
            "I forgot my password, how can I change it?",
            "The recipe needs two cups of flour and an egg.",
            "Bake the cake with flour, eggs and sugar.",
        ]
    )
    assert cos(a, b) > cos(a, c) + 0.3
    assert cos(c, d) > cos(a, d)


def test_shape_dtype_norm_and_metadata(embedder: MiniLMEmbedder) -> None:
    out = embedder.embed(["one", "two words", ""])
    assert out.shape == (3, DIM) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert embedder.model_id == MODEL_ID == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder.dim == 384
    assert embedder.embed_one("one").shape == (DIM,)


def test_empty_list() -> None:
    fresh = MiniLMEmbedder()
    out = fresh.embed([])
    assert out.shape == (0, DIM) and out.dtype == np.float32
    assert not fresh.loaded


def test_order_kept_across_sorted_batches(embedder: MiniLMEmbedder) -> None:
    texts = [
        "short",
        "a much longer sentence " * 20,
        "mid length text here",
        "x",
        "another fairly long sentence about kitchen cupboards and drawers " * 5,
        "y z",
    ]
    batched = embedder.embed(texts)
    single = np.stack([embedder.embed_one(t) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert embedder.embed(texts[::-1]) == pytest.approx(batched[::-1], abs=1e-5)


def test_batches_are_bounded_by_texts_and_padded_tokens() -> None:
    lengths = np.array([3, 3, 4, 10, 10, 50, 200, 256, 256], dtype=np.int64)
    runs = _batches(lengths, 4, 512)
    covered = [i for run in runs for i in range(len(lengths))[run]]
    assert covered == list(range(len(lengths)))  # every text once, in order
    for run in runs:
        part = lengths[run]
        assert len(part) <= 4
        assert len(part) == 1 or len(part) * int(part.max()) <= 512
    assert [lengths[r].tolist() for r in runs] == [[3, 3, 4, 10], [10, 50], [200, 256], [256]]


def test_default_runs_hold_at_most_1024_padded_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 16: the arena keeps the largest run's activations, so the default budget is
    # the embedder's memory bound; 12 abstracts of 256 tokens run 4 at a time.
    emb = MiniLMEmbedder(intra_op_num_threads=1)
    assert emb.max_batch_tokens == MAX_BATCH_TOKENS == 1024
    shapes: list[tuple[int, int]] = []
    real = MiniLMEmbedder._run

    def spy(self: MiniLMEmbedder, rt: Any, ids: np.ndarray, mask: np.ndarray) -> Any:
        shapes.append(ids.shape)
        return real(self, rt, ids, mask)

    monkeypatch.setattr(MiniLMEmbedder, "_run", spy)
    texts = [f"abstract {i} " + "protein " * 300 for i in range(12)] + ["short"] * 40
    assert emb.embed(texts).shape == (52, DIM)
    assert all(rows * width <= 1024 or rows == 1 for rows, width in shapes)
    assert sum(rows for rows, _ in shapes) == 52
    assert (4, 256) in shapes


def test_the_same_vectors_whatever_the_token_budget() -> None:
    # Long texts run 1 per batch under the smallest budget and 6 per batch under the
    # largest: the vectors are the same beyond float rounding (issue 16's memory bound).
    texts = [f"{w} " * n for w, n in (("tea", 240), ("cupboard", 30), ("x", 1), ("drawer", 120))]
    texts += ["Multi-head attention attends to several subspaces.", "ok"]
    small = MiniLMEmbedder(intra_op_num_threads=1, max_batch_tokens=256).embed(texts)
    large = MiniLMEmbedder(intra_op_num_threads=1, max_batch_tokens=8192).embed(texts)
    np.testing.assert_allclose(small, large, atol=1e-5)
    with pytest.raises(InvalidInput, match="max_batch_tokens"):
        MiniLMEmbedder(max_batch_tokens=100)


def test_truncates_to_256_tokens(embedder: MiniLMEmbedder) -> None:
    base = "word " * 300
    a, b = embedder.embed([base, base + "completely different ending about volcanoes"])
    assert cos(a, b) > 0.99999


def test_lazy_thread_safe_load(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []
    real_load = MiniLMEmbedder._load

    def slow_counting_load(self: MiniLMEmbedder) -> Any:
        loads.append(1)
        time.sleep(0.05)
        return real_load(self)

    monkeypatch.setattr(MiniLMEmbedder, "_load", slow_counting_load)
    fresh = MiniLMEmbedder(intra_op_num_threads=1)
    assert not fresh.loaded
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(fresh.embed_one("hello"))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fresh.loaded and len(results) == 4 and len(loads) == 1
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], atol=1e-6)


def test_vocab_ships_with_the_package() -> None:
    vocab = read_vocab()
    assert len(vocab) == 30522
    assert vocab["[PAD]"] == 0 and vocab["[CLS]"] == 101 and vocab["[SEP]"] == 102


def test_bad_input(embedder: MiniLMEmbedder) -> None:
    with pytest.raises(InvalidInput):
        embedder.embed("a string, not a list")
    with pytest.raises(InvalidInput):
        embedder.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        MiniLMEmbedder(batch_size=0)


def test_missing_model_file(tmp_path: Path) -> None:
    broken = MiniLMEmbedder(model_path=tmp_path / "nope.onnx")
    with pytest.raises(ProviderError, match="not found"):
        broken.embed(["x"])


def test_corrupt_model_file(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(ProviderError, match="cannot load MiniLM"):
        MiniLMEmbedder(model_path=bad).embed(["x"])


def test_refuses_to_load_onnxruntime_after_usearch() -> None:
    # A subprocess: importing onnxruntime after usearch would kill this interpreter.
    code = (
        "import usearch.index\n"
        "from kredenc.errors import ProviderError\n"
        "from kredenc.providers.embed.minilm import MiniLMEmbedder\n"
        "try:\n"
        "    MiniLMEmbedder().embed(['x'])\n"
        "except ProviderError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "refused: onnxruntime must be imported before usearch" in done.stdout
