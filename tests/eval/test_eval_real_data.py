"""Smoke tests on the shared evaluation data: reading and counting only, no retrieval."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.eval import load_beir, load_locomo, load_longmemeval, load_multihop

pytestmark = pytest.mark.slow


def test_scifact(shared_data: Path) -> None:
    ds = load_beir(shared_data / "scifact")
    assert len(ds.docs) == 5183
    assert len(ds.queries) == 300
    assert ds.missing_queries == 0
    assert sum(len(v) for v in ds.qrels.values()) == 339
    ids = {d.id for d in ds.docs}
    assert all(doc in ids for judged in ds.qrels.values() for doc in judged)


def test_multihop(shared_data: Path) -> None:
    d = shared_data / "multihop"
    hp = load_multihop(d / "hotpotqa_dev30.json", d / "hotpotqa_dev30_corpus.json")
    assert (len(hp.docs), len(hp.queries), hp.gold_missing) == (300, 30, 0)
    assert hp.formats == {"hotpotqa": 30}
    assert all(len(g) == 2 for g in hp.gold.values())
    mq = load_multihop(d / "musique_dev20.json", d / "musique_dev20_corpus.json")
    assert (len(mq.docs), len(mq.queries), mq.gold_missing) == (394, 20, 0)
    assert sum(len(g) for g in mq.gold.values()) == 50


def test_locomo(shared_data: Path) -> None:
    ds = load_locomo(shared_data / "locomo" / "locomo_dev.json")
    groups = list(ds.groups())
    assert len(groups) == 5
    assert sum(len(g.queries) for g in groups) + sum(ds.skipped.values()) == 999
    # the dev file's quirks: 'D8:6; D9:17' (split), 'D:11:26' (normalised),
    # 'D' and 'D10:19' (dropped: malformed / not in conv-42), two empty evidence lists
    assert ds.split == 1 and ds.normalised == 1
    assert ds.dropped == ["conv-42:58 D10:19", "conv-42:88 D"]
    assert ds.skipped == {3: 2}
    assert sum(1 for c in ds.category.values() if c == 5) == 237


def test_longmemeval(shared_data: Path) -> None:
    path = shared_data / "longmemeval" / "longmemeval_s_dev66.json.gz"
    ds = load_longmemeval(path)
    assert len(ds.entries) + ds.skipped_abstention + ds.skipped_no_target == 66
    assert ds.skipped_abstention == 6
    assert ds.skipped_no_target == 10  # single-session-assistant: evidence not in user turns
    assert sum(h.duplicates for h in ds.haystacks.values()) == 3
    turn = load_longmemeval(path, granularity="turn")
    assert [e["question_id"] for e in turn.entries] == [e["question_id"] for e in ds.entries]
    assert all(any("answer" in lab for lab in h.labels) for h in turn.haystacks.values())
