"""``kredenc eval`` in-process: one fresh store per configuration, multihop walks one
hop by default."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.interfaces import cli_eval
from kredenc.testing.embedders import HashEmbedder

from .test_cli import run_main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "multihop"


@pytest.fixture
def stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every store the eval opens, in order (HashEmbedder: no model is loaded)."""
    opened: list[Path] = []

    @contextmanager
    def fake_store(cache: str) -> Iterator[Kredenc]:
        home = tmp_path / f"store{len(opened)}"
        opened.append(home)
        kb = Kredenc.open(home, "eval", embedder=HashEmbedder(), durability="none")
        try:
            yield kb
        finally:
            kb.close()

    monkeypatch.setattr(cli_eval, "_eval_store", fake_store)
    return opened


def _multihop(*args: str) -> list[str]:
    q, c = FIXTURES / "hotpotqa_questions.json", FIXTURES / "hotpotqa_corpus.json"
    return ["--json", "eval", "multihop", str(q), str(c), *args]


def test_each_configuration_gets_its_own_store(
    stores: list[Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # BM25 statistics span the whole FTS table: a shared store would let the corpora
    # filed for earlier rows shift the scores of later ones.
    argv = _multihop("--mode", "lexical", "--mode", "hybrid", "--hops", "0", "--hops", "1")
    code, out, err = run_main(argv, capsys, monkeypatch)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["config"] for r in rows] == [
        {"mode": "lexical"},
        {"mode": "lexical", "hops": 1},
        {"mode": "hybrid"},
        {"mode": "hybrid", "hops": 1},
    ]
    assert len(stores) == 4 and len(set(stores)) == 4


def test_multihop_walks_one_hop_unless_told(
    stores: list[Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_main(_multihop("--mode", "lexical"), capsys, monkeypatch)
    assert code == 0, err
    row = json.loads(out)
    assert row["config"] == {"mode": "lexical", "hops": 1}
    code, out, err = run_main(_multihop("--mode", "lexical", "--hops", "0"), capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)["config"] == {"mode": "lexical"}
