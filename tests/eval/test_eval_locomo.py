from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.eval import load_locomo, normalise_evidence, recompute, run
from kredenc.testing.retrievers import OverlapRetriever


def test_normalise_evidence_quirks() -> None:
    valid = {"D1:1", "D1:2", "D11:26", "D30:5", "D8:6", "D9:17"}
    rep = normalise_evidence(
        ["D8:6; D9:17", "D:11:26", "D30:05", "D", "D10:", "D4:36", "D1:1 D1:2", "d1:1"], valid
    )
    assert rep.ids == ["D8:6", "D9:17", "D11:26", "D30:5", "D1:1", "D1:2"]
    assert rep.split == 2
    assert rep.normalised == 3  # D:11:26, D30:05, d1:1 (a repeat, kept once)
    assert rep.dropped == ["D", "D10:", "D4:36"]
    assert normalise_evidence([], valid).ids == []


def test_load_locomo(fixtures: Path) -> None:
    ds = load_locomo(fixtures / "locomo.json")
    convs = list(ds.groups())
    assert [len(g.docs) for g in convs] == [6, 3]
    assert [g.k for g in convs] == [20, 20]
    doc = convs[0].docs[2]
    assert doc.id == "D1:3"
    assert doc.text == "Ann: Here he is, napping. [image: a photo of a beagle puppy on a couch]"
    assert doc.meta == {"session": 1, "date": "1:00 pm on 1 May, 2023", "speaker": "Ann"}
    assert [q.qid for q in convs[0].queries] == [
        "conv-a:0",
        "conv-a:1",
        "conv-a:2",
        "conv-a:3",
        "conv-a:5",
    ]
    assert [q.qid for q in convs[1].queries] == ["conv-b:0", "conv-b:1"]
    assert ds.evidence["conv-a:1"] == ["D1:1", "D2:1"]
    assert ds.evidence["conv-a:2"] == ["D2:3"]
    assert ds.evidence["conv-a:3"] == ["D2:1"]
    assert ds.evidence["conv-b:1"] == ["D1:3", "D1:2"]
    assert ds.dropped == ["conv-a:3 D", "conv-a:6 D9:9", "conv-a:6 D10:"]
    assert ds.skipped == {3: 1, 4: 1}


def test_locomo_score_hand_computed(fixtures: Path) -> None:
    ds = load_locomo(fixtures / "locomo.json")
    m = ds.score(
        {
            "conv-a:0": ["D1:3"],
            "conv-a:1": ["D1:1", "D1:2", "D2:1"],
            "conv-a:2": ["D2:1"],
            "conv-a:3": ["D2:2", "D2:1"],
            "conv-b:0": ["D1:1"],
            "conv-b:1": ["D1:2"],
        }
    )
    assert m["n_questions"] == 6 and m["n_conversations"] == 2
    assert m["recall@1"] == pytest.approx(3 / 6)
    assert m["recall@5"] == pytest.approx(4.5 / 6)
    assert m["hit@1"] == pytest.approx(4 / 6)
    assert m["by_category"]["4"]["recall@1"] == pytest.approx(2 / 3)
    assert m["by_category"]["4"]["n"] == 3
    assert m["by_category"]["1"]["recall@1"] == pytest.approx(0.5)
    assert m["by_category"]["1"]["recall@5"] == 1.0
    assert m["by_category"]["2"]["recall@1"] == 0.0
    assert m["by_category"]["3"]["recall@1"] == pytest.approx(0.5)
    assert set(m["by_category"]) == {"1", "2", "3", "4"}
    assert m["adversarial"] == {
        "n": 1,
        **{f"{x}@{k}": 0.0 for x in ("recall", "hit") for k in (1, 5, 10, 20)},
    }
    assert m["evidence"] == {
        "ids": 9,
        "normalised": 2,
        "split": 2,
        "dropped": 3,
        "dropped_ids": ["conv-a:3 D", "conv-a:6 D9:9", "conv-a:6 D10:"],
    }
    assert m["skipped_no_evidence"] == 2
    assert m["skipped_by_category"] == {"3": 1, "4": 1}


def test_locomo_end_to_end_gz(gzipped: Callable[[str], Path], tmp_path: Path) -> None:
    ds = load_locomo(gzipped("locomo.json"))  # only locomo.json.gz exists
    r = OverlapRetriever()
    result = run(r, ds, run_file=tmp_path / "locomo.jsonl")
    assert r.calls == ["reset", "index:6", "reset", "index:3"]
    assert r.ks == [20] * 7
    assert result.ranked["conv-b:0"][0] == "D1:1"
    assert result.n_groups == 2 and result.n_docs == 9
    assert recompute(tmp_path / "locomo.jsonl", ds) == result.metrics


def test_locomo_rejects_other_json(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"a": 1}')
    with pytest.raises(InvalidInput):
        load_locomo(p)
    p.write_text('[{"qa": []}]')
    with pytest.raises(InvalidInput):
        load_locomo(p)


def test_a_locomo_session_date_reads_as_unix_seconds() -> None:
    from datetime import UTC, datetime

    from kredenc.eval.locomo import date_seconds

    assert (
        date_seconds("1:56 pm on 8 May, 2023")
        == datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()
    )
    assert date_seconds("2023-05-08") is None
