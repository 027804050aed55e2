"""End to end with the shipped answer agent and the built-in roles on the real Attention
paper: the answer cites the passage stating the number of heads. Skipped without the
shared corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.engine import Kredenc

PDF = (
    Path(__file__).resolve().parents[2].parent
    / "shared/data/documents/pdf/attention_is_all_you_need_1706.03762v7.pdf"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PDF.exists(), reason=f"shared corpus not found at {PDF}"),
]


def test_how_many_heads_is_answered_with_the_passage_stating_h_8(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "store", durability="none") as kb:
        assert kb.ingest(PDF).documents == 1
        answer = kb.ask("How many attention heads does the Transformer use?", session_id="e2e")
    assert answer.retrieved and answer.citations, answer.text
    cited = [c.text for c in answer.citations]
    assert any("h = 8" in t for t in cited), cited
    assert "8" in answer.text
    assert all(c.page is not None and c.origin.endswith(".pdf") for c in answer.citations)
    assert [s.tool for s in answer.trace[:8]] == [
        "decide",
        "rewrite",
        "retrieve",
        "grade",
        "verify",
        "generate",
        "judge",
        "reflect",
    ]
    assert answer.evaluation is not None
    assert all(s.status != "failed" for s in answer.trace), answer.trace
