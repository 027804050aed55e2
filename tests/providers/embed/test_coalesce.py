"""Concurrent query embeddings run as one batch (providers/embed/coalesce.py), through
every embedder's ``embed_query`` (the base class's coalescer)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from kredenc.errors import InvalidInput
from kredenc.providers.embed.base import Embedder
from kredenc.providers.embed.coalesce import Coalescer
from kredenc.providers.embed.minilm import MiniLMEmbedder
from kredenc.providers.embed.onnx import OnnxEmbedder
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.tiny_models import build_embedder, build_sentence_transformers


def vector_of(text: str) -> np.ndarray:
    """A vector that tells its text apart: its length and the sum of its code points."""
    return np.array([len(text), sum(map(ord, text))], dtype=np.float32)


class SlowEmbed:
    """Records each batch; the first run is held until released, so calls pile up."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        if len(self.batches) == 1:
            assert self.release.wait(10)
        return np.stack([vector_of(t) for t in texts])


def test_a_lone_call_runs_at_once_alone() -> None:
    embed = SlowEmbed()
    embed.release.set()
    coalesce = Coalescer(embed)
    np.testing.assert_array_equal(coalesce("tea"), vector_of("tea"))
    assert embed.batches == [["tea"]]
    assert (coalesce.runs, coalesce.queries) == (1, 1)


def test_calls_that_arrive_during_a_run_share_the_next_one() -> None:
    embed = SlowEmbed()
    coalesce = Coalescer(embed)
    texts = [f"query number {i}" * (i + 1) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(coalesce, texts[0])
        while not embed.batches:
            time.sleep(0.001)
        rest = [pool.submit(coalesce, t) for t in texts[1:]]
        while len(coalesce._queue) < 7:
            time.sleep(0.001)
        embed.release.set()
        results = [first.result(10)] + [f.result(10) for f in rest]
    for text, row in zip(texts, results, strict=True):
        np.testing.assert_array_equal(row, vector_of(text))
    assert embed.batches[0] == [texts[0]]
    assert sorted(embed.batches[1]) == sorted(texts[1:])
    assert (coalesce.runs, coalesce.queries) == (2, 8)


def test_a_batch_is_capped_and_the_rest_follow() -> None:
    embed = SlowEmbed()
    coalesce = Coalescer(embed, max_batch=3)
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(coalesce, "a")
        while not embed.batches:
            time.sleep(0.001)
        rest = [pool.submit(coalesce, t) for t in "bcdefg"]
        while len(coalesce._queue) < 6:
            time.sleep(0.001)
        embed.release.set()
        got = [first.result(10)] + [f.result(10) for f in rest]
    assert [float(row[1]) for row in got] == [float(ord(c)) for c in "abcdefg"]
    assert [len(b) for b in embed.batches] == [1, 3, 3]


def test_a_failed_run_fails_its_callers_and_the_next_run_goes_on() -> None:
    calls: list[list[str]] = []
    gate = threading.Event()

    def embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(list(texts))
        if len(calls) == 1:
            assert gate.wait(10)
            raise RuntimeError("inference failed")
        return np.stack([vector_of(t) for t in texts])

    coalesce = Coalescer(embed)
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(coalesce, "boom")
        while not calls:
            time.sleep(0.001)
        later = [pool.submit(coalesce, t) for t in ("x", "yy")]
        while len(coalesce._queue) < 2:
            time.sleep(0.001)
        gate.set()
        with pytest.raises(RuntimeError, match="inference failed"):
            first.result(10)
        np.testing.assert_array_equal(later[0].result(10), vector_of("x"))
        np.testing.assert_array_equal(later[1].result(10), vector_of("yy"))
    np.testing.assert_array_equal(coalesce("z"), vector_of("z"))


def test_a_short_batch_from_the_embedder_is_an_error_for_every_caller() -> None:
    coalesce = Coalescer(lambda texts: np.zeros((0, 2), dtype=np.float32))
    with pytest.raises(RuntimeError, match="0 rows for 1"):
        coalesce("x")


#: Queries every embedder below can read (the tiny model's words, and one it cannot).
QUESTIONS = [
    "the apple grows on a tree",
    "kestrel",
    "which bird is fast",
    "what is the capital city of paris",
    "a slow boat on the river",
    "red apples and green fruit",
    "what fish is in the water",
    "zebra",
]


def _minilm(tmp_path: Path) -> Embedder:
    return MiniLMEmbedder(query_threads=2)  # on one thread (the default) it never coalesces


def _tiny_onnx(tmp_path: Path) -> Embedder:
    return OnnxEmbedder(build_embedder(tmp_path / "tiny").path, batch_size=3)


def _tiny_sbert(tmp_path: Path) -> Embedder:
    pytest.importorskip("sentence_transformers")
    from kredenc.providers.embed.sbert import SentenceTransformersEmbedder

    return SentenceTransformersEmbedder(build_sentence_transformers(tmp_path / "sbert"))


@pytest.mark.parametrize(
    "make",
    [
        _minilm,
        _tiny_onnx,
        pytest.param(_tiny_sbert, marks=pytest.mark.slow),
        lambda tmp_path: HashEmbedder(),
    ],
    ids=["minilm", "onnx", "sentence-transformers", "hash"],
)
def test_queries_from_many_threads_run_as_one_batch_and_match_one_at_a_time(
    make: Callable[[Path], Embedder], tmp_path: Path
) -> None:
    embedder = make(tmp_path)
    alone = np.stack([embedder.embed_query(q) for q in QUESTIONS])
    coalescer = embedder.query_coalescer
    assert (coalescer.runs, coalescer.queries) == (len(QUESTIONS), len(QUESTIONS))
    # Hold the first run of the burst until every other query waits behind it.
    held = threading.Event()
    run = coalescer._embed

    def first_waits(texts: Sequence[str]) -> np.ndarray:
        if not held.is_set():
            held.set()
            deadline = time.monotonic() + 10
            while len(coalescer._queue) < len(QUESTIONS) - 1:
                assert time.monotonic() < deadline, "the other queries never queued"
                time.sleep(0.001)
        return run(texts)

    coalescer._embed = first_waits
    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        first = pool.submit(embedder.embed_query, QUESTIONS[0])
        assert held.wait(10)
        rest = [pool.submit(embedder.embed_query, q) for q in QUESTIONS[1:]]
        together = np.stack([first.result(10)] + [f.result(10) for f in rest])
    assert coalescer.runs - len(QUESTIONS) == 2  # the first alone, then the other seven
    np.testing.assert_allclose(together, alone, atol=1e-5)
    with pytest.raises(InvalidInput, match="the query is int, not str"):
        embedder.embed_query(7)  # type: ignore[arg-type]
