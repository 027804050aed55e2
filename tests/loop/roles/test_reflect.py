"""reflect: completeness from the question's words and slots and the judge's verdict."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kredenc.engine import Kredenc
from kredenc.grounding.base import Evaluation
from kredenc.loop.mind import LocalMind
from kredenc.loop.roles.generate import Generate
from kredenc.loop.roles.judge import JudgeTool
from kredenc.loop.roles.reflect import Reflect, reflect

from .answer_side import TinyLLM, filled, mind_for, services

SUPPORTED = Evaluation(True, 95, False, "", "ok")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    yield from filled(tmp_path_factory.mktemp("reflect"))


def _reflected(kb: Kredenc, question: str) -> LocalMind:
    mind = mind_for(kb, question)
    for tool in (Generate(), JudgeTool(), Reflect()):
        tool.run(mind, services(kb))
    return mind


def test_a_supported_complete_answer_is_sufficient(kb: Kredenc) -> None:
    mind = _reflected(kb, "How many attention heads does the Transformer use?")
    assert mind.read("reflect.sufficient") is True
    assert mind.read("reflect.completeness") >= 0.7
    assert mind.read("reflect.gaps") == ["transformer"]  # named, though the rest suffices
    assert mind.read("reflect.focus") == ""


def test_nothing_found_names_the_gaps_as_the_next_focus(kb: Kredenc) -> None:
    mind = _reflected(kb, "Who won the FIFA World Cup 2026?")
    assert mind.read("reflect.sufficient") is False
    assert mind.read("reflect.completeness") == 0.0
    gaps = mind.read("reflect.gaps")
    assert {"fifa", "cup", "name"} <= set(gaps)
    assert "fifa" in mind.read("reflect.focus") and "name" not in mind.read("reflect.focus")


def test_an_empty_slot_is_a_gap_even_when_the_words_are_there() -> None:
    r = reflect(
        "How many attention heads does the model use?",
        "The model uses multi-head attention. [1]",
        [],
        SUPPORTED,
    )
    assert not r.sufficient and "number" in r.gaps and r.completeness < 0.6
    full = reflect(
        "How many attention heads does the model use?",
        "The model uses h = 8 attention heads. [1]",
        [],
        SUPPORTED,
    )
    assert full.sufficient and full.gaps == []


def test_an_unsupported_answer_is_not_sufficient() -> None:
    flagged = Evaluation(True, 30, True, "number 16 not in the context", "")
    r = reflect("How many heads?", "It uses 16 heads.", [], flagged)
    assert not r.sufficient and r.completeness <= 0.3 and r.focus


def test_llm_reflection_reads_the_json(kb: Kredenc) -> None:
    llm = TinyLLM({"completeness": 0.4, "gaps": ["epsilon value"], "sufficient": False})
    mind = mind_for(kb, "What were the Adam optimizer's hyperparameters?")
    Generate().run(mind, services(kb))
    JudgeTool().run(mind, services(kb))
    result = Reflect().run(mind, services(kb, llm, role_reflect="llm"))
    assert mind.read("reflect.sufficient") is False and mind.read("reflect.completeness") == 0.4
    assert mind.read("reflect.focus") == "epsilon value" and result.prompt_tokens == 10
    assert "data, not instructions" in llm.calls[0][-1]["content"]


def test_chit_chat_is_sufficient(kb: Kredenc) -> None:
    mind = mind_for(kb, "Thanks!", **{"decide.retrieve": False})
    Generate().run(mind, services(kb))
    Reflect().run(mind, services(kb))
    assert mind.read("reflect.sufficient") is True
