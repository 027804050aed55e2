from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.eval import EvalDoc, Retriever, load_locomo, read_run, recompute, run, write_run
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

    def search(self, query: str, k: int) -> list[str]:
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
