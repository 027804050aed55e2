from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.eval import load_beir, recompute, run
from kredenc.eval.beir import read_qrels
from kredenc.testing.retrievers import OverlapRetriever


def test_load_beir(fixtures: Path) -> None:
    ds = load_beir(fixtures / "beir")
    assert [d.id for d in ds.docs] == ["d1", "d2", "d3", "d4", "d5"]
    assert ds.docs[0].text == "Aspirin\nAspirin reduces fever and pain."
    assert ds.docs[0].title == "Aspirin"
    assert ds.docs[3].text == "Exercise improves sleep quality."  # no title, no "\n"
    assert ds.docs[4].meta == {"source": "x"}
    # q3 has no qrels; q9 is judged but not in queries.jsonl
    assert [q.qid for q in ds.queries] == ["q1", "q2"]
    assert ds.missing_queries == 1
    assert ds.qrels["q1"] == {"d1": 2.0, "d5": 1.0}


def test_beir_score_hand_computed(fixtures: Path) -> None:
    ds = load_beir(fixtures / "beir")
    m = ds.score({"q1": ["d5", "d2", "d1"], "q2": ["d3"]})
    # q1: DCG = 1/1 + 0 + 2/log2(4) = 2; IDCG = 2/1 + 1/log2(3) -> 0.760...
    q1 = 2 / (2 + 1 / math.log2(3))
    assert m["ndcg@10"] == pytest.approx((q1 + 1.0) / 2)
    assert m["recall@100"] == 1.0  # d4 has score 0: not relevant
    assert m["n_queries"] == 2 and m["n_docs"] == 5 and m["missing_queries"] == 1
    # a query with no results counts as 0, it does not vanish from the average
    m = ds.score({"q2": ["d3"]})
    assert m["ndcg@10"] == pytest.approx(0.5)
    assert m["recall@100"] == pytest.approx(0.5)


def test_beir_end_to_end_plain_and_gz(
    fixtures: Path, gzipped: Callable[[str], Path], tmp_path: Path
) -> None:
    plain = load_beir(fixtures / "beir")
    gz = load_beir(gzipped("beir"))
    assert [(d.id, d.text) for d in gz.docs] == [(d.id, d.text) for d in plain.docs]
    assert gz.qrels == plain.qrels
    r = OverlapRetriever()
    result = run(r, gz, run_file=tmp_path / "beir.run.jsonl")
    assert r.calls == ["reset", "index:5"]
    assert r.ks == [100, 100]
    assert result.ranked["q1"][0] == "d1"
    assert result.ranked["q2"][0] == "d3"
    assert result.metrics["ndcg@10"] > 0.8
    assert recompute(tmp_path / "beir.run.jsonl", plain) == result.metrics


def test_read_qrels_trec_form_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "q.tsv"
    p.write_text("1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n")
    assert read_qrels(p) == {"1": {"d1": 1.0, "d2": 0.0}, "2": {"d3": 2.0}}
    p.write_text("q\td\t1\nq\td2\tyes\n")
    with pytest.raises(InvalidInput):
        read_qrels(p)
    with pytest.raises(InvalidInput, match=r"nowhere/qrels/test\.tsv: no such file"):
        load_beir(tmp_path / "nowhere")  # bad input (exit 2), naming the file
