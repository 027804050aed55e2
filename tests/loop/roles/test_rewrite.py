"""rewrite: follow-ups become standalone queries; questions that stand alone stay."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kredenc.engine import Kredenc
from kredenc.loop.roles.rewrite import Rewrite, standalone, sub_queries

from .conftest import MakeServices
from .helpers import ATTENTION, TinyLLM, mind

ADAM = [
    {"role": "user", "content": "What optimizer did they use?"},
    {
        "role": "assistant",
        "content": "They trained the Transformer with the Adam optimizer [1], varying the "
        "learning rate over the course of training [2].",
    },
]


def test_a_pronoun_carries_the_previous_answers_entity_and_question_terms() -> None:
    query = standalone("What were its hyperparameters?", ADAM)
    assert query.startswith("What were its hyperparameters?")
    assert "Adam" in query and "optimizer" in query


def test_a_short_follow_up_without_a_name_is_elliptical() -> None:
    assert "Adam" in standalone("How many layers?", ADAM)
    assert "optimizer" in standalone("And the learning rate?", ADAM)


@pytest.mark.parametrize(
    "question",
    [
        "What is BLEU?",
        "How many attention heads does the Transformer base model use?",
        "Were Scott Derrickson and Ed Wood of the same nationality?",
        "Which dataset was used for English-to-French translation?",
    ],
)
def test_a_question_that_stands_alone_is_kept(question: str) -> None:
    assert standalone(question, ADAM) == question


def test_without_history_nothing_is_resolved() -> None:
    assert standalone("What were its hyperparameters?", []) == "What were its hyperparameters?"


def test_a_comparison_gets_one_sub_query_per_entity() -> None:
    assert sub_queries("Were Scott Derrickson and Ed Wood of the same nationality?") == [
        "Scott Derrickson nationality",
        "Ed Wood nationality",
    ]
    assert sub_queries("Which is older, the Eiffel Tower or the Statue of Liberty?") == [
        "Eiffel Tower older",
        "Statue of Liberty older",
    ]
    assert sub_queries("What is the BLEU score of the big model?") == []


def test_the_tool_writes_query_and_queries(services: MakeServices) -> None:
    m = mind("What were its hyperparameters?", ADAM)
    result = Rewrite().run(m, services())
    assert "Adam" in m.read("rewrite.query") and m.read("rewrite.queries") == []
    assert result.note.startswith("standalone: ")
    m = mind("What is BLEU?", ADAM)
    assert Rewrite().run(m, services()).note == "stands alone"
    assert m.read("rewrite.query") == "What is BLEU?"


def test_no_retrieval_means_no_rewrite(services: MakeServices) -> None:
    m = mind("thanks", decide_retrieve=False)
    assert Rewrite().run(m, services()).status == "skipped"
    assert m.read("rewrite.query", None) is None


def test_the_llm_rewrites_when_chosen(services: MakeServices) -> None:
    llm = TinyLLM([{"query": "Adam optimizer hyperparameters", "queries": ["", "beta2 Adam"]}])
    m = mind("What were its hyperparameters?", ADAM)
    Rewrite().run(m, services(llm=llm, role_rewrite="llm"))
    assert m.read("rewrite.query") == "Adam optimizer hyperparameters"
    assert m.read("rewrite.queries") == ["beta2 Adam"]
    assert "Adam optimizer" in llm.calls[0][0][1]["content"]  # the history reached it


@pytest.fixture(scope="module")
def attention(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    if not ATTENTION.exists():
        pytest.skip(f"shared corpus not found at {ATTENTION} (set KREDENC_DATA)")
    with Kredenc.open(tmp_path_factory.mktemp("att"), durability="none") as store:
        assert store.ingest(ATTENTION).documents == 1
        yield store


@pytest.mark.slow
def test_the_rewritten_follow_up_finds_the_adam_hyperparameters(attention: Kredenc) -> None:
    query = standalone("What were its hyperparameters?", ADAM)
    hits = attention.search(query, k=3)
    assert any("0.98" in h.text and "10" in h.text for h in hits), [h.text[:80] for h in hits]
