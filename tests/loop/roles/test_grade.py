"""grade: a calibrated relevance per chunk, classed by the two thresholds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kredenc.engine import Kredenc
from kredenc.loop.roles import grade
from kredenc.loop.roles.grade import Grade, classify, features, relevance
from kredenc.loop.tool import Services
from kredenc.records import Hit, LegScore
from kredenc.retrieve.query import search

from .conftest import MakeServices
from .helpers import TinyLLM, mind

TEXTS = [
    "We used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and epsilon = 1e-9.",
    "The Transformer uses multi-head attention with h = 8 parallel attention heads.",
    "Our garden has tomatoes, beans and a small pond with goldfish.",
    "The quarterly budget meeting was moved to Thursday afternoon.",
]


def _hit(i: str, body: str, lex: int | None, dense: int | None, title: str = "") -> Hit:
    legs = {}
    if lex:
        legs["lexical"] = LegScore(lex, 1.0)
    if dense:
        legs["dense"] = LegScore(dense, 0.5)
    return Hit(id=i, text=body, score=0.0, kind="note", drawer="d", legs=legs, title=title)


def test_features_follow_their_definitions() -> None:
    hits = [
        _hit("a", "adam optimizer beta values", 1, 2, title="Adam optimizer"),
        _hit("b", "garden pond goldfish", None, 1),
    ]
    q = np.array([1.0, 0.0], dtype=np.float32)
    vecs = {
        "a": np.array([0.8, 0.6], dtype=np.float32),
        "b": np.array([0.0, 1.0], dtype=np.float32),
    }
    rows = features("Which beta values for the Adam optimizer?", hits, q, vecs)
    a, b = (dict(zip(grade.FEATURES, r, strict=True)) for r in rows)
    assert a["cos"] == pytest.approx(0.8) and a["cos_gap"] == 0.0
    assert b["cos"] == pytest.approx(0.0) and b["cos_gap"] == pytest.approx(-0.8)
    assert a["coverage"] == pytest.approx(1.0) and b["coverage"] == 0.0
    assert (a["lex_rr"], a["dense_rr"], b["lex_rr"], b["dense_rr"]) == (1.0, 0.5, 0.0, 1.0)
    assert a["title"] == pytest.approx(2 / 4) and b["title"] == 0.0  # adam, optimizer of 4


def test_relevance_is_a_probability_rising_with_the_evidence() -> None:
    low, high = relevance([[0.1, -0.5, 0.0, 0.0, 0.0, 0.0], [0.7, 0.0, 1.0, 1.0, 1.0, 1.0]])
    assert 0.0 < low < 0.05
    assert 0.9 < high < 1.0
    assert classify(0.5, 0.47, 0.04) == "CORRECT"
    assert classify(0.2, 0.47, 0.04) == "AMBIGUOUS"
    assert classify(0.01, 0.47, 0.04) == "INCORRECT"


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    """A store with the real model (the fitted coefficients assume its cosines)."""
    with Kredenc.open(Path(tmp_path_factory.mktemp("minilm")), durability="none") as kb:
        kb.remember_many([{"text": t} for t in TEXTS])
        yield kb


@pytest.mark.slow
def test_the_relevant_chunk_is_correct_and_the_garden_incorrect(minilm: Kredenc) -> None:
    query = "What beta2 value did the Adam optimizer use?"
    hits = search(minilm.store, minilm.namespace, query, k=4)
    m = mind(query, retrieve_chunks=hits)
    Grade().run(m, Services(minilm.store, minilm.namespace, minilm.settings))
    verdicts = {v.id: v for v in m.read("grade.verdicts")}
    by_text = {h.text: verdicts[h.id] for h in hits}
    assert [v.id for v in m.read("grade.verdicts")] == [h.id for h in hits]  # same order
    assert by_text[TEXTS[0]].verdict == "CORRECT"
    assert by_text[TEXTS[2]].verdict == "INCORRECT"
    assert by_text[TEXTS[0]].relevance > by_text[TEXTS[1]].relevance > by_text[TEXTS[2]].relevance


def test_the_tool_grades_every_chunk_in_order(kb: Kredenc, services: MakeServices) -> None:
    kb.remember_many([{"text": t} for t in TEXTS])
    hits = search(kb.store, kb.namespace, "Adam optimizer beta2", k=4)
    m = mind("Adam optimizer beta2", retrieve_chunks=hits)
    result = Grade().run(m, services(grade_upper=0.99, grade_lower=0.0))
    verdicts = m.read("grade.verdicts")
    assert [v.id for v in verdicts] == [h.id for h in hits]
    assert {v.verdict for v in verdicts} <= {"AMBIGUOUS", "CORRECT"}
    assert all(0.0 <= v.relevance <= 1.0 for v in verdicts)
    assert result.note.endswith("0 incorrect")


def test_skips_when_retrieval_did_not_run(services: MakeServices) -> None:
    assert Grade().run(mind("q"), services()).status == "skipped"
    assert Grade().run(mind("q", decide_retrieve=False), services()).status == "skipped"


def test_the_llm_grades_with_reasons(kb: Kredenc, services: MakeServices) -> None:
    kb.remember_many([{"text": t} for t in TEXTS[:2]])
    hits = search(kb.store, kb.namespace, "Adam optimizer", k=2)
    llm = TinyLLM([{"verdicts": [{"n": 1, "verdict": "INCORRECT", "reason": "off-topic"}]}])
    m = mind("Adam optimizer", retrieve_chunks=hits)
    result = Grade().run(m, services(llm=llm, role_grade="llm"))
    first, second = m.read("grade.verdicts")
    assert (first.verdict, first.reason) == ("INCORRECT", "off-topic")
    assert second.reason == "not graded by the LLM"  # the rules' class for what it left out
    assert result.prompt_tokens == 100
    assert '"text":' in llm.calls[0][0][1]["content"]  # chunks went in the data envelope


def test_from_the_second_iteration_a_chunk_answering_the_focus_counts(minilm: Kredenc) -> None:
    """reflect's focus is the open part of the question: a chunk that answers it is graded
    by it too (the higher relevance wins), and only from the second iteration on."""
    query = "Which numbers describe the model used in the garden?"
    hits = search(minilm.store, minilm.namespace, "Adam optimizer beta2", k=4)
    svc = Services(minilm.store, minilm.namespace, minilm.settings)
    adam = next(h.id for h in hits if h.text == TEXTS[0])

    def relevance_of_adam(**keys: object) -> float:
        m = mind(query, retrieve_chunks=hits, **keys)
        Grade().run(m, svc)
        return next(v.relevance for v in m.read("grade.verdicts") if v.id == adam)

    plain = relevance_of_adam()
    first = relevance_of_adam(reflect_focus="Adam optimizer beta2")  # iteration 1: ignored
    later = relevance_of_adam(reflect_focus="Adam optimizer beta2", loop_iteration=2)
    assert first == plain
    assert later > plain and later >= 0.5
