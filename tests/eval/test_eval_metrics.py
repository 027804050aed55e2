from __future__ import annotations

import math

import pytest

from kredenc.eval.metrics import (
    all_at_k,
    any_at_k,
    dcg,
    dedupe,
    ndcg_at_k,
    percentile,
    recall_at_k,
)


def test_ndcg_graded_hand_computed() -> None:
    # qrels: d1 = 2, d2 = 1, d3 = 1. Ranked: d2, x, d1.
    # DCG  = 1/log2(2) + 0/log2(3) + 2/log2(4)             = 1 + 0 + 1      = 2
    # IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4)             = 2 + 0.63093 + 0.5 = 3.13093
    qrels = {"d1": 2.0, "d2": 1.0, "d3": 1.0}
    assert ndcg_at_k(["d2", "x", "d1"], qrels, 10) == pytest.approx(2 / (2.5 + 1 / math.log2(3)))
    assert ndcg_at_k(["d2", "x", "d1"], qrels, 10) == pytest.approx(0.638788, abs=1e-6)


def test_ndcg_cut_and_ideal_from_qrels() -> None:
    qrels = {"a": 1.0, "b": 1.0, "c": 1.0}
    # k = 2: ideal has two relevant docs at ranks 1 and 2 even though three exist.
    assert ndcg_at_k(["a", "x"], qrels, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # a relevant doc below the cut gives nothing
    assert ndcg_at_k(["x", "y", "a"], qrels, 2) == 0.0
    # binary, one relevant at rank 2
    assert ndcg_at_k(["x", "a"], {"a": 1.0}, 10) == pytest.approx(1 / math.log2(3))


def test_ndcg_zero_gain_and_duplicates() -> None:
    assert ndcg_at_k(["a"], {"a": 0.0}, 10) == 0.0
    assert ndcg_at_k([], {"a": 1.0}, 10) == 0.0
    # a repeated id counts once, at its first rank
    assert ndcg_at_k(["a", "a", "b"], {"a": 1.0, "b": 1.0}, 10) == pytest.approx(1.0)


def test_recall_all_any() -> None:
    ranked = ["a", "x", "b", "y"]
    assert recall_at_k(ranked, ["a", "b", "c"], 1) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, ["a", "b", "c"], 3) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, [], 3) == 0.0
    assert all_at_k(ranked, ["a", "b"], 2) == 0.0
    assert all_at_k(ranked, ["a", "b"], 3) == 1.0
    assert any_at_k(ranked, ["b"], 2) == 0.0
    assert any_at_k(ranked, ["b"], 3) == 1.0


def test_helpers() -> None:
    assert dedupe(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    assert dcg([]) == 0.0
    assert percentile([], 50) == 0.0
    assert percentile([5.0], 95) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([float(i) for i in range(1, 21)], 95) == pytest.approx(19.05)
