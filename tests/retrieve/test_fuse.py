"""Weighted reciprocal rank fusion, checked against sums worked out by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kredenc.retrieve.fuse import weighted_rrf

WEIGHTS = {"dense": 0.6, "lexical": 0.4}


def test_two_legs_by_hand() -> None:
    # lexical: a b c     dense: b d a     k = 60, weights 0.6 dense / 0.4 lexical
    fused = dict(weighted_rrf({"lexical": ["a", "b", "c"], "dense": ["b", "d", "a"]}, WEIGHTS))
    expected = {
        "a": 0.4 / 61 + 0.6 / 63,  # 0.016081...
        "b": 0.4 / 62 + 0.6 / 61,  # 0.016287...
        "c": 0.4 / 63,  # 0.006349...
        "d": 0.6 / 62,  # 0.009677...
    }
    assert fused == pytest.approx(expected, rel=1e-12)
    assert fused["b"] == pytest.approx(0.016287678477, rel=1e-10)  # 0.0064516129 + 0.0098360656
    order = [
        item
        for item, _ in weighted_rrf({"lexical": ["a", "b", "c"], "dense": ["b", "d", "a"]}, WEIGHTS)
    ]
    assert order == ["b", "a", "d", "c"]


def test_weights_are_normalised() -> None:
    legs = {"lexical": ["a", "b"], "dense": ["b", "c"]}
    base = weighted_rrf(legs, WEIGHTS)
    for weights in ({"dense": 3, "lexical": 2}, {"dense": 60.0, "lexical": 40.0}):
        scaled = weighted_rrf(legs, weights)
        assert [i for i, _ in scaled] == [i for i, _ in base]
        assert [s for _, s in scaled] == pytest.approx([s for _, s in base], rel=1e-12)
    # 3:1 is 0.75 / 0.25 after normalising.
    fused = dict(weighted_rrf(legs, {"dense": 3, "lexical": 1}))
    assert fused["b"] == pytest.approx(0.25 / 62 + 0.75 / 61)


def test_rrf_constant() -> None:
    fused = dict(weighted_rrf({"lexical": ["a", "b"], "dense": ["b"]}, WEIGHTS, k=1))
    assert fused == pytest.approx({"a": 0.4 / 2, "b": 0.4 / 3 + 0.6 / 2})


def test_a_leg_without_weight_is_ignored() -> None:
    fused = weighted_rrf({"lexical": ["a"], "dense": ["b", "a"]}, {"dense": 1.0, "lexical": 0.0})
    assert [i for i, _ in fused] == ["b", "a"]
    assert [s for _, s in fused] == pytest.approx([1 / 61, 1 / 62])
    # A leg missing from the weights counts as weight 0.
    assert weighted_rrf({"lexical": ["a"], "graph": ["z"]}, WEIGHTS) == [("a", 1 / 61)]


def test_one_leg_alone_gets_all_the_weight() -> None:
    fused = weighted_rrf({"lexical": ["a", "b"]}, WEIGHTS)
    assert [i for i, _ in fused] == ["a", "b"]
    assert [s for _, s in fused] == pytest.approx([1 / 61, 1 / 62])


def test_ties_keep_first_seen_order() -> None:
    # x and y tie exactly (0.5 / 61 each): legs in the order given decide.
    even = {"dense": 1.0, "lexical": 1.0}
    assert [i for i, _ in weighted_rrf({"lexical": ["x"], "dense": ["y"]}, even)] == ["x", "y"]
    assert [i for i, _ in weighted_rrf({"dense": ["y"], "lexical": ["x"]}, even)] == ["y", "x"]


def test_empty_legs_and_bad_weights() -> None:
    assert weighted_rrf({"lexical": [], "dense": []}, WEIGHTS) == []
    with pytest.raises(ValueError, match="positive"):
        weighted_rrf({"lexical": ["a"]}, {"lexical": 0.0})
    with pytest.raises(ValueError, match="positive"):
        weighted_rrf({}, WEIGHTS)


ranked = st.lists(st.integers(0, 30), unique=True, max_size=20)


@given(lexical=ranked, dense=ranked, wd=st.floats(0.01, 10), wl=st.floats(0.01, 10))
@settings(max_examples=200, derandomize=True)
def test_matches_the_formula(lexical: list[int], dense: list[int], wd: float, wl: float) -> None:
    fused = weighted_rrf({"lexical": lexical, "dense": dense}, {"dense": wd, "lexical": wl})
    total = wd + wl
    for item, score in fused:
        want = 0.0
        if item in lexical:
            want += (wl / total) / (60 + lexical.index(item) + 1)
        if item in dense:
            want += (wd / total) / (60 + dense.index(item) + 1)
        assert math.isclose(score, want, rel_tol=1e-12)
    assert {i for i, _ in fused} == set(lexical) | set(dense)
    scores = [s for _, s in fused]
    assert scores == sorted(scores, reverse=True)
    # The fused scores of all items sum to at most 1 / (k + 1) per unit of weight.
    assert sum(scores) <= sum(1 / (60 + r) for r in range(1, 21)) + 1e-12


def test_weighted_minmax_by_hand() -> None:
    from kredenc.retrieve.fuse import weighted_minmax

    legs = {
        "dense": [("a", 0.9), ("b", 0.5), ("c", 0.1)],  # a 1.0, b 0.5, c 0.0
        "lexical": [("b", 12.0), ("d", 4.0)],  # b 1.0, d 0.0
    }
    fused = dict(weighted_minmax(legs, {"dense": 3.0, "lexical": 2.0}))  # 0.6 / 0.4
    assert fused["a"] == pytest.approx(0.6)
    assert fused["b"] == pytest.approx(0.6 * 0.5 + 0.4 * 1.0)
    assert fused["c"] == pytest.approx(0.0)
    assert fused["d"] == pytest.approx(0.0)
    assert [k for k, _ in weighted_minmax(legs, {"dense": 0.6, "lexical": 0.4})][:2] == ["b", "a"]


def test_weighted_minmax_single_item_and_bad_weights() -> None:
    from kredenc.retrieve.fuse import weighted_minmax

    assert weighted_minmax({"dense": [("x", 0.3)]}, {"dense": 1.0}) == [("x", 1.0)]
    with pytest.raises(ValueError, match="positive"):
        weighted_minmax({"dense": [("x", 0.3)]}, {"dense": 0.0})


def test_weighted_minmax_depth_clips_below_the_normalising_window() -> None:
    from kredenc.retrieve.fuse import weighted_minmax

    leg = [("a", 10.0), ("b", 6.0), ("c", 2.0), ("d", 1.0)]
    full = dict(weighted_minmax({"lexical": leg}, {"lexical": 1.0}))
    top2 = dict(weighted_minmax({"lexical": leg}, {"lexical": 1.0}, depth=2))
    assert full["b"] == pytest.approx(5 / 9)
    assert top2 == {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0}
    # The top's order does not depend on how deep the list is beyond the window.
    longer = [*leg, ("e", 0.5), ("f", 0.1)]
    assert (
        weighted_minmax({"lexical": longer}, {"lexical": 1.0}, depth=2)[:2]
        == list(top2.items())[:2]
    )
