from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from kredenc.errors import InvalidInput
from kredenc.eval import load_longmemeval, recompute, run
from kredenc.eval.longmemeval import (
    asked_at,
    date_seconds,
    evaluate_retrieval,
    evaluate_retrieval_turn2session,
    official_dcg,
)
from kredenc.testing.retrievers import OverlapRetriever

KEYS = ("recall_any", "recall_all", "ndcg_any")


# -- a line-for-line numpy copy of xiaowu0162/LongMemEval src/retrieval/eval_utils.py ---
def ref_dcg(relevances: Sequence[float], k: int) -> float:
    rel = np.asarray(relevances, dtype=float)[:k]
    if rel.size:
        return float(rel[0] + np.sum(rel[1:] / np.log2(np.arange(2, rel.size + 1))))
    return 0.0


def ref_ndcg(
    rankings: Sequence[int], correct: set[str], corpus_ids: Sequence[str], k: int
) -> float:
    relevances = [1 if d in correct else 0 for d in corpus_ids]
    sorted_rel = [relevances[i] for i in rankings[:k]]
    ideal = ref_dcg(sorted(relevances, reverse=True), k)
    actual = ref_dcg(sorted_rel, k)
    return 0.0 if ideal == 0 else actual / ideal


def ref_eval(
    rankings: Sequence[int], correct: set[str], corpus_ids: Sequence[str], k: int
) -> tuple[float, float, float]:
    recalled = {corpus_ids[i] for i in rankings[:k]}
    return (
        float(any(d in recalled for d in correct)),
        float(all(d in recalled for d in correct)),
        ref_ndcg(rankings, correct, corpus_ids, k),
    )


def test_matches_numpy_reference_on_random_rankings() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 30)
        ids = [f"s{rng.randint(0, 8)}_{i + 1}" for i in range(n)]
        ids = [("answer_" + x) if rng.random() < 0.2 else x for x in ids]
        correct = {x for x in ids if "answer" in x}
        rankings = list(range(n))
        rng.shuffle(rankings)
        rankings = rankings[: rng.randint(0, n)]
        for k in (1, 3, 5, 10, 30, 50):
            assert evaluate_retrieval(rankings, correct, ids, k) == pytest.approx(
                ref_eval(rankings, correct, ids, k)
            )


def test_official_dcg_does_not_discount_rank_two() -> None:
    assert official_dcg([0, 1], 10) == 1.0
    assert official_dcg([0, 0, 1], 10) == pytest.approx(1 / math.log2(3))
    assert official_dcg([1, 1, 1], 2) == 2.0
    assert official_dcg([], 5) == 0.0


def test_turn2session_widens_k() -> None:
    labels = ["s1_1", "s1_3", "answer_a_1", "s2_1", "noans_a_3"]
    correct = {"answer_a_1"}
    # top 2 turns are both from s1: k=2 widens to 3 turns to cover 2 sessions
    assert evaluate_retrieval_turn2session([0, 1, 2, 3, 4], correct, labels, 2)[0] == 1.0
    assert evaluate_retrieval([0, 1, 2, 3, 4], correct, labels, 2)[0] == 0.0


def test_load_session_level(fixtures: Path) -> None:
    ds = load_longmemeval(fixtures / "longmemeval.json")
    assert ds.skipped_abstention == 1  # q2_abs
    assert ds.skipped_no_target == 1  # q3: evidence only in an assistant turn
    hay = ds.haystacks["q1"]
    assert [d.id for d in hay.docs] == ["s_a", "answer_x_1", "s_b", "answer_x_2"]
    assert hay.duplicates == 1  # the second s_a
    # user turns only, joined with one space
    assert hay.docs[1].text == "I have a cat named Tom. I also like green tea."
    assert hay.docs[1].meta == {
        "date": "2023/05/02 (Tue) 09:00",
        "session_id": "answer_x_1",
        "time": date_seconds("2023/05/02 (Tue) 09:00"),
    }
    # answer_x_2's only has_answer turn is the assistant's: relabelled, not gold
    assert hay.labels == ["s_a", "answer_x_1", "s_b", "noans_x_2"]
    groups = list(ds.groups())
    assert [g.queries[0].qid for g in groups] == ["q1", "q4"]
    assert groups[0].k == 50
    assert groups[0].queries[0].meta["question_type"] == "multi-session"


def test_session_score_hand_computed(fixtures: Path) -> None:
    ds = load_longmemeval(fixtures / "longmemeval.json")
    m = ds.score({"q1": ["s_b", "answer_x_1", "s_a", "answer_x_2"], "q4": ["answer_y", "s_c"]})
    assert m["n_questions"] == 2 and m["duplicate_ids"] == 1
    # q1: gold answer_x_1 at rank 2; q4: gold at rank 1
    assert m["recall_any@1"] == 0.5 and m["recall_all@1"] == 0.5
    assert m["recall_any@3"] == 1.0 and m["recall_all@3"] == 1.0
    assert m["ndcg_any@1"] == 0.5
    assert m["ndcg_any@3"] == 1.0  # rank 2 is not discounted in the official dcg
    assert m["by_type"]["multi-session"]["recall_any@1"] == 0.0
    assert m["by_type"]["single-session-user"]["n"] == 1
    assert "turn2session" not in m


def test_turn_level(fixtures: Path) -> None:
    ds = load_longmemeval(fixtures / "longmemeval.json", granularity="turn")
    hay = ds.haystacks["q1"]
    assert [d.id for d in hay.docs] == [
        "s_a_1",
        "answer_x_1_1",
        "answer_x_1_3",
        "s_b_1",
        "answer_x_2_1",
    ]
    assert hay.labels == ["s_a_1", "answer_x_1_1", "noans_x_1_3", "s_b_1", "noans_x_2_1"]
    # turn index counts assistant turns too: the user turn of answer_y is turn 2
    assert [d.id for d in ds.haystacks["q4"].docs] == ["s_c_1", "answer_y_2"]
    assert [g.k for g in ds.groups()] == [5, 2]
    m = ds.score({"q1": ["answer_x_1_3", "s_b_1", "answer_x_1_1"], "q4": ["answer_y_2"]})
    assert m["recall_any@1"] == 0.5
    assert m["recall_any@3"] == 1.0
    assert m["ndcg_any@3"] == pytest.approx((1 / math.log2(3) + 1.0) / 2)
    s = m["turn2session"]
    # q1 at k=1: top turn's session is noans_x_1 (a different label from answer_x_1)
    assert s["recall_any@1"] == 0.5 and s["recall_any@3"] == 1.0


def test_end_to_end_plain_gz_recompute(
    fixtures: Path, gzipped: Callable[[str], Path], tmp_path: Path
) -> None:
    for gran in ("session", "turn"):
        ds = load_longmemeval(gzipped("longmemeval.json"), granularity=gran)
        r = OverlapRetriever()
        result = run(r, ds, run_file=tmp_path / f"lme-{gran}.jsonl")
        assert r.calls[::2] == ["reset", "reset"]
        assert result.ranked["q4"][0] == ("answer_y" if gran == "session" else "answer_y_2")
        plain = load_longmemeval(fixtures / "longmemeval.json", granularity=gran)
        assert recompute(tmp_path / f"lme-{gran}.jsonl", plain) == result.metrics
        for key in KEYS:
            assert 0.0 <= result.metrics[f"{key}@50"] <= 1.0


def test_rejects_bad_input(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('[{"question_id": "a"}]')
    with pytest.raises(InvalidInput):
        load_longmemeval(p)
    with pytest.raises(InvalidInput):
        load_longmemeval(p, granularity="word")  # type: ignore[arg-type]


def test_pooled_puts_every_session_in_one_corpus_and_scores_each_question_alone(
    fixtures: Path,
) -> None:
    from kredenc.eval import load_longmemeval_pooled

    ds = load_longmemeval_pooled(fixtures / "longmemeval.json")
    ids = [d.id for d in ds.docs]
    assert len(ids) == len(set(ids)) == 8 and ds.duplicate_sessions == 2
    (group,) = ds.groups()
    assert [q.qid for q in group.queries] == ["q1", "q4"] and group.k == 50
    assert ds.gold["q4"] == {"answer_y"}
    q1_gold = sorted(ds.gold["q1"])
    assert q1_gold and all(g.startswith("answer_x") for g in q1_gold)
    # another question's answer session is no gold for this one
    m = ds.score({"q1": ["s_a", *q1_gold], "q4": ["answer_x_1", "s_c", "answer_y"]})
    assert m["recall_any@1"] == 0.0 and m["recall_any@3"] == 1.0
    assert m["recall_all@1"] == 0.0 and m["recall_all@3"] == 1.0
    lo, hi = m["ci95"]["recall_any@1"]
    assert lo == hi == 0.0
    m = ds.score({"q1": q1_gold, "q4": []})
    assert m["recall_any@5"] == 0.5 and m["ci95"]["recall_any@5"] == [0.0, 1.0]


def test_a_longmemeval_date_reads_as_unix_seconds() -> None:
    from datetime import UTC, datetime

    from kredenc.eval.longmemeval import date_seconds

    assert (
        date_seconds("2023/03/11 (Sat) 05:28")
        == datetime(2023, 3, 11, 5, 28, tzinfo=UTC).timestamp()
    )
    assert date_seconds("") is None and date_seconds("11 March 2023") is None


def test_a_question_is_asked_at_its_date_or_after_its_last_session() -> None:
    day = "2023/05/30 (Tue) 10:00"
    entry = {"question_date": day, "haystack_dates": ["2023/05/29 (Mon) 09:00"]}
    assert asked_at(entry) == date_seconds(day)
    later = {"question_date": day, "haystack_dates": ["2023/05/30 (Tue) 21:00"]}
    assert asked_at(later) == date_seconds("2023/05/30 (Tue) 21:00") + 60  # type: ignore[operator]
    assert asked_at({"question_date": ""}) is None
