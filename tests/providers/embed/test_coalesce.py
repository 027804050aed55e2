"""Concurrent query embeddings run as one batch (providers/embed/coalesce.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kredenc.providers.embed.coalesce import Coalescer
from kredenc.providers.embed.minilm import MiniLMEmbedder


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


def test_minilm_queries_from_many_threads_match_one_at_a_time() -> None:
    minilm = MiniLMEmbedder()
    questions = [
        "when do we deploy?",
        "what does the user drink in the morning",
        "who is my manager",
        "which pizza do I like best",
        "what optimizer did the transformer paper use",
        "hi",
        "where did we go on holiday last year?",
        "the user's mother",
    ]
    alone = np.stack([minilm.embed_query(q) for q in questions])
    barrier = threading.Barrier(len(questions))

    def at_once(q: str) -> np.ndarray:
        barrier.wait(10)
        return minilm.embed_query(q)

    runs_before = minilm._queries.runs if minilm._queries else 0
    with ThreadPoolExecutor(len(questions)) as pool:
        together = np.stack(list(pool.map(at_once, questions)))
    cosines = (alone * together).sum(axis=1)
    assert cosines.min() > 0.9999
    assert minilm._queries is not None
    assert minilm._queries.runs - runs_before < len(questions)
