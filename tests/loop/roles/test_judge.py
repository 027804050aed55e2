"""The judge tool: the SupportJudge (or LLMJudge) on the generated answer, markers stripped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kredenc.engine import Kredenc
from kredenc.grounding.base import Evaluation
from kredenc.loop.roles.generate import NOT_FOUND, Generate
from kredenc.loop.roles.judge import JudgeTool

from .answer_side import filled, mind_for, services


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    yield from filled(tmp_path_factory.mktemp("judge"))


def _judged(kb: Kredenc, question: str, text: str | None = None, **extra: object) -> Evaluation:
    mind = mind_for(kb, question, **extra)
    Generate().run(mind, services(kb))
    if text is not None:
        mind.write("generate.text", text)
        mind.write("generate.abstained", False)
    assert JudgeTool().run(mind, services(kb)).status == "ok"
    evaluation: Evaluation = mind.read("judge.evaluation")
    return evaluation


def test_a_cited_extract_is_supported(kb: Kredenc) -> None:
    ev = _judged(kb, "How many attention heads does the Transformer use?")
    assert ev.context_sufficient and not ev.hallucination_detected
    assert ev.confidence_score >= 70 and ev.band == "context verified"
    # The [n] markers were stripped: no sentence of the judged text carries one.
    assert all("[1]" not in s.text for s in ev.sentences)


def test_a_changed_number_is_caught(kb: Kredenc) -> None:
    ev = _judged(
        kb,
        "How many attention heads does the Transformer use?",
        "In this work we employ h = 16 parallel attention layers, or heads. [1]",
    )
    # (The SupportJudge puts this sentence at its threshold: not flagged, but not verified.)
    assert ev.confidence_score < 70 and ev.band != "context verified"


def test_outside_knowledge_counts_unsupported(kb: Kredenc) -> None:
    ev = _judged(
        kb,
        "How many attention heads does the Transformer use?",
        "In this work we employ h = 8 parallel attention layers, or heads. [1] "
        "[OUTSIDE KNOWLEDGE] Later models used 96 heads.",
    )
    assert ev.hallucination_detected


def test_no_answer_is_not_sufficient_and_low(kb: Kredenc) -> None:
    mind = mind_for(kb, "Who won the FIFA World Cup 2026?")
    Generate().run(mind, services(kb))
    assert mind.read("generate.text") == NOT_FOUND
    JudgeTool().run(mind, services(kb))
    ev = mind.read("judge.evaluation")
    assert not ev.context_sufficient and ev.confidence_score < 40 and not ev.hallucination_detected


def test_chit_chat_needs_no_context_but_a_factual_message_does(kb: Kredenc) -> None:
    ev = _judged(kb, "Hi there!", **{"decide.retrieve": False})
    assert ev.context_sufficient and not ev.hallucination_detected
    ev = _judged(kb, "Who won the FIFA World Cup 2026?", **{"decide.retrieve": False})
    assert not ev.context_sufficient


def test_missing_answer_skips(kb: Kredenc) -> None:
    mind = mind_for(kb, "How many heads?")
    assert JudgeTool().run(mind, services(kb)).status == "skipped"
