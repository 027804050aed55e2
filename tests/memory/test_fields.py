"""One validation function: strict rejects, lenient clamps and coerces with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.memory.fields import validate_fields
from kredenc.testing.embedders import HashEmbedder


def test_strict_rejects_lenient_clamps_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    bad = {"importance": 1.7, "confidence": -0.2, "kind": "gossip", "status": "great"}
    with pytest.raises(InvalidInput):
        validate_fields(bad, strict=True)
    with caplog.at_level("WARNING"):
        out = validate_fields(bad, strict=False)
    assert (out["importance"], out["confidence"]) == (1.0, 0.0)
    assert (out["kind"], out["status"]) == ("note", "unvalidated")
    assert "clamped" in caplog.text and "unknown" in caplog.text


def test_lenient_batch_files_coerced_values(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        (m,) = kb.remember_many([{"text": "x", "importance": 3, "kind": "??"}], strict=False)
        got = kb.get(m.id)
        assert (got.importance, got.kind) == (1.0, "note")
        with pytest.raises(InvalidInput):
            kb.remember_many([{"text": "x", "importance": 3}])


def test_deprecated_hidden_unless_asked_for(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        old = kb.remember("the deploy day is Monday")
        kb.score(old.id, status="deprecated", reason="moved to Tuesday")
        for mode in ("lexical", "dense", "hybrid"):
            assert old.id not in {h.id for h in kb.search("deploy day", mode=mode)}
            shown = kb.search("deploy day", mode=mode, include_deprecated=True)
            assert old.id in {h.id for h in shown}
