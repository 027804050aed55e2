from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.eval import load_multihop, recompute, run
from kredenc.eval.multihop import join_sentences
from kredenc.testing.retrievers import OverlapRetriever


def test_hotpotqa(fixtures: Path) -> None:
    d = fixtures / "multihop"
    ds = load_multihop(d / "hotpotqa_questions.json", d / "hotpotqa_corpus.json")
    assert [doc.id for doc in ds.docs] == ["Rex (dog)", "Paris", "Beagle", "Lisbon"]
    assert ds.docs[0].text == "Rex (dog)\nRex is a beagle. He lives in Paris."
    assert ds.gold == {"h1": ["Rex (dog)", "Beagle"], "h2": ["Paris"]}
    assert ds.gold_missing == 1  # "Missing Page"
    assert ds.formats == {"hotpotqa": 2}
    m = ds.score({"h1": ["Rex (dog)", "Lisbon", "Beagle"], "h2": ["Paris"]})
    assert m["recall@2"] == pytest.approx((0.5 + 1.0) / 2)
    assert m["all_gold@2"] == pytest.approx(0.5)
    assert m["recall@5"] == 1.0 and m["all_gold@5"] == 1.0 and m["all_gold@10"] == 1.0


def test_musique_position_ids_and_pair_matching(fixtures: Path) -> None:
    d = fixtures / "multihop"
    ds = load_multihop(d / "musique_questions.json", d / "musique_corpus.json")
    assert [doc.id for doc in ds.docs] == ["0", "1", "2", "3"]
    # "Paris" repeats: gold is the (title, text) pair at position 2; whitespace is
    # normalised for "France is  in Europe."
    assert ds.gold == {"2hop__1_2": ["2", "1"]}
    assert ds.skipped_no_gold == 1 and ds.gold_missing == 1
    m = ds.score({"2hop__1_2": ["1", "0", "2"]})
    assert m["recall@2"] == 0.5 and m["all_gold@2"] == 0.0
    assert m["recall@5"] == 1.0 and m["all_gold@5"] == 1.0
    assert m["n_queries"] == 1


def test_multihop_end_to_end_gz(gzipped: Callable[[str], Path], tmp_path: Path) -> None:
    d = gzipped("multihop")
    ds = load_multihop(d / "musique_questions.json", d / "musique_corpus.json.gz")
    r = OverlapRetriever()
    result = run(r, ds, run_file=tmp_path / "mh.jsonl")
    assert r.ks == [10]
    # word overlap puts the capital paragraph first, the Texas "Paris" second
    assert result.ranked["2hop__1_2"][:3] == ["2", "0", "1"]
    assert result.metrics["recall@2"] == 0.5 and result.metrics["all_gold@5"] == 1.0
    assert recompute(tmp_path / "mh.jsonl", ds) == result.metrics


def test_join_and_errors(tmp_path: Path) -> None:
    assert join_sentences(["A b.", " C d.", "E f."]) == "A b. C d. E f."
    q = tmp_path / "q.json"
    c = tmp_path / "c.json"
    q.write_text('[{"id": "x", "question": "?"}]')
    c.write_text("[]")
    with pytest.raises(InvalidInput):
        load_multihop(q, c)
    c.write_text('"text"')
    with pytest.raises(InvalidInput):
        load_multihop(q, c)
