from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.eval import (
    EvalDoc,
    Retriever,
    agreement,
    load_locomo,
    read_run,
    recompute,
    run,
    write_run,
)
from kredenc.testing.retrievers import OverlapRetriever


def test_overlap_retriever_meets_protocol() -> None:
    assert isinstance(OverlapRetriever(), Retriever)


def test_run_result_timing_summary_and_run_file(fixtures: Path, tmp_path: Path) -> None:
    ds = load_locomo(fixtures / "locomo.json")
    seen: list[tuple[int, int]] = []
    result = run(OverlapRetriever(), ds, progress=lambda q, g: seen.append((q, g)))
    assert seen == [(5, 1), (7, 2)]
    t = result.timing
    assert t["n_searches"] == 7 and t["n_indexed"] == 9 and t["n_groups"] == 2
    assert 0.0 <= t["search_ms_p50"] <= t["search_ms_p95"]
    assert t["index_s"] >= 0.0
    summary = result.summary()
    assert json.loads(json.dumps(summary))["metrics"] == json.loads(json.dumps(result.metrics))
    assert summary["dataset"] == "locomo"

    path = result.write_run(tmp_path / "sub" / "run.jsonl")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 7
    assert set(lines[0]) == {"qid", "ranked", "ms"}
    assert lines[0]["qid"] == "conv-a:0"
    assert read_run(path) == result.ranked
    assert recompute(path, ds) == result.metrics


class NumericIds:
    """Returns ints: the runner keeps ids as strings."""

    def reset(self) -> None: ...

    def index(self, docs: Sequence[EvalDoc]) -> None: ...

    def search(self, query: str, k: int, *, asked_at: float | None = None) -> list[str]:
        return [1, 2]  # type: ignore[list-item]


def test_ids_become_strings(fixtures: Path) -> None:
    result = run(NumericIds(), load_locomo(fixtures / "locomo.json"))
    assert result.ranked["conv-a:0"] == ["1", "2"]


def test_read_run_errors(tmp_path: Path) -> None:
    p = write_run(tmp_path / "r.jsonl", {"a": ["1"], "b": []})
    assert read_run(p) == {"a": ["1"], "b": []}
    p.write_text('{"qid": "a", "ranked": []}\n{"qid": "a", "ranked": []}\n')
    with pytest.raises(InvalidInput, match="twice"):
        read_run(p)
    p.write_text('{"qid": "a"}\n')
    with pytest.raises(InvalidInput):
        read_run(p)
    p.write_text("not json\n")
    with pytest.raises(InvalidInput):
        read_run(p)


def test_agreement_counts_sets_orders_and_overlap() -> None:
    a = {"q1": ["x", "y", "z"], "q2": ["x", "y", "z"], "q3": ["x", "y", "z"], "q4": ["x"]}
    b = {"q1": ["x", "y", "z"], "q2": ["y", "x", "z"], "q3": ["x", "y", "w"], "q5": ["x"]}
    out = agreement(a, b, k=3)
    assert out["queries"] == 5  # q4 and q5 are each empty in the other run
    assert out["same_set"] == 0.4  # q1, q2
    assert out["same_order"] == 0.2  # q1
    assert out["overlap"] == pytest.approx((1 + 1 + 2 / 3 + 0 + 0) / 5, abs=1e-4)
    assert out["differ"] == ["q3", "q4", "q5"]
    lo, hi = out["same_set_ci95"]
    assert 0.0 <= lo <= out["same_set"] <= hi <= 1.0
    # Only the top k counts: a difference below it is no difference.
    assert agreement({"q": ["x", "y", "z"]}, {"q": ["x", "y", "w"]}, k=2)["same_order"] == 1.0
    assert agreement({"q": []}, {"q": []}, k=10)["overlap"] == 1.0
    with pytest.raises(InvalidInput, match="k >= 1"):
        agreement(a, b, k=0)
