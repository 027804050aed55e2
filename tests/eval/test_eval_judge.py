"""``eval/judge.py``: formats told from the records, the metrics with their intervals and
floors, span overlap, the run file; and the binary metrics in ``eval/metrics.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kredenc.errors import InvalidInput
from kredenc.eval.judge import (
    load_judge_file,
    read_judge_run,
    run_judge,
    score_judge,
    score_run,
    write_judge_run,
)
from kredenc.eval.metrics import auroc, bootstrap_ci, classification
from kredenc.grounding.judge import SupportJudge

CTX = "passage 1:Paris is the capital of France.\n\npassage 2:Berlin is the capital of Germany.\n\n"


def rag(response: str, spans: list[tuple[int, int]], source: str) -> dict[str, object]:
    labels = [{"start": a, "end": b, "text": response[a:b]} for a, b in spans]
    return {
        "id": source + response[:3],
        "source_id": source,
        "question": "What is the capital of France?",
        "context": CTX,
        "response": response,
        "hallucinated": bool(spans),
        "labels": labels,
    }


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def ragtruth(tmp_path: Path) -> Path:
    bad = "Paris is the capital of France. It has 90 million residents on Mars."
    return write(
        tmp_path / "rt.jsonl",
        [
            rag("Paris is the capital of France.", [], "1"),
            rag(bad, [(32, len(bad))], "1"),
            rag("Berlin is the capital of Germany.", [], "2"),
            rag("The capital of France is Lyon, home of Napoleon.", [(0, 48)], "2"),
        ],
    )


def test_ragtruth_records_become_one_item_each(ragtruth: Path) -> None:
    fmt, items = load_judge_file(ragtruth)
    assert fmt == "ragtruth"
    assert [it.i for it in items] == [0, 1, 2, 3]
    assert items[0].contexts == (
        "Paris is the capital of France.",
        "Berlin is the capital of Germany.",
    )
    assert items[1].hallucinated and items[1].spans == ((32, 68),)
    assert [it.group for it in items] == ["1", "1", "2", "2"]


def test_halueval_records_are_judged_twice(tmp_path: Path) -> None:
    row = {
        "knowledge": "The Oberoi Group is a hotel company with its head office in Delhi.",
        "question": "The Oberoi Group has its head office in what city?",
        "right_answer": "Delhi",
        "hallucinated_answer": "Mumbai, the financial capital of India.",
    }
    fmt, items = load_judge_file(write(tmp_path / "he.jsonl", [row, row]))
    assert fmt == "halueval"
    assert [(it.i, it.label) for it in items] == [
        (0, "right"),
        (0, "hallucinated"),
        (1, "right"),
        (1, "hallucinated"),
    ]
    assert items[1].contexts == (row["knowledge"],)
    run = run_judge(SupportJudge(), fmt, items)
    right, wrong = run.evaluations[0], run.evaluations[1]
    assert right.confidence_score > wrong.confidence_score
    assert wrong.hallucination_detected and "mumbai" in wrong.hallucination_reason.lower()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "x"}\n', "not a judge record"),
        ("not json\n", "not JSON"),
        ("[1, 2]\n", "not a JSON object"),
        ("\n\n", "no records"),
    ],
)
def test_bad_files_say_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInput, match=message):
        load_judge_file(path)
    with pytest.raises(InvalidInput, match="no such file"):
        load_judge_file(tmp_path / "missing.jsonl")


def test_scores_runs_and_spans(ragtruth: Path, tmp_path: Path) -> None:
    fmt, items = load_judge_file(ragtruth)
    run = run_judge(SupportJudge(), fmt, items)
    detected = [e.hallucination_detected for e in run.evaluations]
    assert detected == [False, True, False, True]
    summary = score_run(run, rounds=200)
    m = summary["metrics"]
    assert m["n"] == 4 and m["hallucinated"] == 2
    assert m["f1"]["value"] == 1.0 and m["auroc"]["value"] == 1.0
    lo, hi = m["auroc"]["ci95"]
    assert 0.0 <= lo <= hi <= 1.0
    assert set(m["floors"]) == {"auroc_length", "auroc_one_minus_overlap"}
    # The unsupported sentences are exactly the labelled spans here.
    assert m["span_precision"]["value"] == 1.0
    assert m["span_recall"]["value"] > 0.9
    path = write_judge_run(tmp_path / "run.jsonl", run)
    rows = read_judge_run(path)
    assert [set(r) for r in rows] == [
        {"i", "label", "confidence_score", "hallucination_detected"}
    ] * 4
    assert [r["label"] for r in rows] == ["right", "hallucinated", "right", "hallucinated"]
    again = score_judge(
        items,
        [r["confidence_score"] for r in rows],
        [r["hallucination_detected"] for r in rows],
        rounds=200,
    )
    assert again["auroc"] == m["auroc"] and again["f1"] == m["f1"]


def test_auroc_counts_ties_half() -> None:
    assert auroc([True, False], [1.0, 0.0]) == 1.0
    assert auroc([True, False], [0.0, 1.0]) == 0.0
    assert auroc([True, False, True, False], [1, 1, 0, 0]) == 0.5
    assert auroc([True, True], [1, 2]) == 0.5  # one class only
    # 3 of 4 positive-negative pairs ordered right.
    assert auroc([True, True, False, False], [0.9, 0.4, 0.5, 0.1]) == 0.75


def test_classification_and_bootstrap() -> None:
    m = classification([True, True, False, False], [True, False, True, False])
    assert m == {"accuracy": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    values = [0.0] * 50 + [1.0] * 50
    lo, hi = bootstrap_ci(lambda idx: sum(values[i] for i in idx) / len(idx), 100, rounds=300)
    assert 0.35 < lo < 0.5 < hi < 0.65
    same = bootstrap_ci(lambda idx: 1.0, 10, rounds=20, groups=["a"] * 5 + ["b"] * 5)
    assert same == (1.0, 1.0)


def test_the_shared_sets_load(shared_data: Path) -> None:
    fmt, items = load_judge_file(shared_data / "ragtruth" / "ragtruth_qa_dev.jsonl")
    assert fmt == "ragtruth" and len(items) == 250 and sum(it.hallucinated for it in items) == 47
    assert all(len(it.contexts) >= 1 for it in items)
    fmt, items = load_judge_file(shared_data / "halueval" / "qa_dev.jsonl")
    assert fmt == "halueval" and len(items) == 500
