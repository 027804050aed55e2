"""The deterministic judge on real MiniLM vectors: padding, short unsupported answers,
facts, OUTSIDE KNOWLEDGE, an unanswerable question, and determinism."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kredenc.grounding.base import OUTSIDE_KNOWLEDGE, Evaluation
from kredenc.grounding.judge import JudgeParams, SupportJudge
from kredenc.grounding.support import SupportParams
from kredenc.providers.embed.minilm import MiniLMEmbedder

ATTENTION = [
    "Multi-head attention allows the model to jointly attend to information from different "
    "representation subspaces at different positions. In this work we employ h = 8 parallel "
    "attention layers, or heads. For each of these we use dk = dv = dmodel/h = 64.",
    "On the WMT 2014 English-to-German translation task, the big transformer model "
    "outperforms the best previously reported models by more than 2.0 BLEU, establishing a "
    "new state-of-the-art BLEU score of 28.4. Training took 3.5 days on 8 P100 GPUs.",
    "We used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and epsilon = 10^-9. We varied "
    "the learning rate over the course of training, increasing it linearly for the first "
    "warmup steps.",
]


@pytest.fixture(scope="module")
def judge() -> SupportJudge:
    return SupportJudge(MiniLMEmbedder(intra_op_num_threads=1))


def ask(judge: SupportJudge, question: str, answer: str) -> Evaluation:
    return judge.judge(question, answer, ATTENTION)


def test_a_supported_answer_is_trusted(judge: SupportJudge) -> None:
    ev = ask(
        judge,
        "How many attention heads does the Transformer use?",
        "The Transformer employs h = 8 parallel attention layers, or heads.",
    )
    assert not ev.hallucination_detected, ev.hallucination_reason
    assert ev.context_sufficient
    assert ev.confidence_score >= 70
    assert ev.sentences[0].context == 0


def test_padding_with_supported_sentences_does_not_lower_confidence(judge: SupportJudge) -> None:
    q = "What BLEU does the big model reach on WMT 2014 English-German?"
    short = "The big transformer model reaches a BLEU score of 28.4."
    base = ask(judge, q, short)
    padded = short
    for extra in (
        "Training took 3.5 days on 8 P100 GPUs.",
        "It outperforms the best previously reported models by more than 2.0 BLEU.",
        "We used the Adam optimizer with beta1 = 0.9, beta2 = 0.98 and epsilon = 10^-9.",
    ):
        padded += " " + extra
        longer = ask(judge, q, padded)
        assert longer.confidence_score >= base.confidence_score
        assert longer.hallucination_detected == base.hallucination_detected


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Stochastic gradient descent.", "stocha"),  # nothing of it in the context
        ("The RMSProp optimizer.", "rmsprop"),  # a name for the context's Adam
    ],
)
def test_a_short_unsupported_answer_is_still_flagged(
    judge: SupportJudge, answer: str, why: str
) -> None:
    ev = ask(judge, "Which optimizer did they use?", answer)
    assert ev.hallucination_detected
    assert why in ev.hallucination_reason.lower()
    right = ask(judge, "Which optimizer did they use?", "The Adam optimizer.")
    assert not right.hallucination_detected
    assert right.confidence_score > ev.confidence_score


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("The big transformer model reaches a BLEU score of 31.7.", "31.7"),
        ("Training took 3.5 days on 16 P100 GPUs.", "16"),
        ("Training took 3.5 days on 8 TPU chips from Google.", "google"),
    ],
)
def test_fact_mismatches_are_flagged(judge: SupportJudge, answer: str, why: str) -> None:
    ev = ask(judge, "What did the big model reach?", answer)
    assert ev.hallucination_detected
    assert why in ev.hallucination_reason.lower()


def test_outside_knowledge_counts_as_unsupported(judge: SupportJudge) -> None:
    ev = ask(
        judge,
        "How many heads?",
        f"The model uses h = 8 heads. {OUTSIDE_KNOWLEDGE} GPT-4 uses 128 heads.",
    )
    assert ev.hallucination_detected
    assert not ev.sentences[1].supported
    assert ev.sentences[0].supported


def test_an_unanswerable_question_has_insufficient_context(judge: SupportJudge) -> None:
    ev = ask(judge, "Who won the FIFA World Cup 2026?", "The context does not say who won it.")
    assert not ev.context_sufficient
    assert ev.confidence_score < 40
    assert ev.band == "low"


def test_the_result_is_a_pure_function_of_its_inputs(judge: SupportJudge) -> None:
    args = ("What BLEU?", "The big model reaches 28.4 BLEU. It was trained on Mars.", ATTENTION)
    first = judge.judge(*args).to_json()
    again = SupportJudge(judge.embed, JudgeParams()).judge(*args).to_json()
    assert first == again
    assert set(first) == {
        "context_sufficient",
        "confidence_score",
        "hallucination_detected",
        "hallucination_reason",
        "evaluation_summary",
        "sentences",
    }


def test_no_context_and_empty_answer() -> None:
    words_only = SupportJudge()
    ev = words_only.judge("Anything?", "Paris is the capital of France.", [])
    assert ev.hallucination_detected and not ev.context_sufficient
    assert ev.confidence_score == 0
    empty = words_only.judge("Anything?", "  ", ATTENTION)
    assert empty.confidence_score == 0 and not empty.hallucination_detected


def test_the_threshold_moves_the_verdict_not_the_confidence() -> None:
    # scripts/fit_judge.py chooses the threshold after the weights (it does not enter
    # the AUROC): a threshold across a sentence's support flips only the verdict.
    q = "Which optimizer did they use?"
    answer = "They trained it with the Adam optimizer and a carefully warmed schedule."
    base = SupportJudge().judge(q, answer, ATTENTION)
    support = base.sentences[0].support
    assert 0.0 < support < 1.0
    verdicts = {}
    for threshold in (support - 0.01, support + 0.01):
        params = JudgeParams(support=replace(SupportParams(), threshold=threshold))
        ev = SupportJudge(None, params).judge(q, answer, ATTENTION)
        assert ev.confidence_score == base.confidence_score
        verdicts[threshold] = ev.hallucination_detected
    assert verdicts == {support - 0.01: False, support + 0.01: True}


def test_the_judge_embeds_only_what_its_verdict_reads(judge: SupportJudge) -> None:
    """With the meaning at weight 0 (the default) the judge compares a sentence only
    with the units that can still be its evidence, and the question only when its words
    fall short; the evaluation, evidence included, is the one every cosine gives."""
    assert judge.embed is not None
    counted: dict[str, int] = {"lazy": 0, "every": 0}

    def counting(name: str):  # type: ignore[no-untyped-def]
        def embed(texts):  # type: ignore[no-untyped-def]
            counted[name] += len(texts)
            return judge.embed(texts)  # type: ignore[misc]

        return embed

    lazy = SupportJudge(counting("lazy"))
    every = SupportJudge(counting("every"), every_cosine=True)
    assert lazy.lazy and not every.lazy
    assert not SupportJudge(params=JudgeParams(SupportParams(w_bigrams=0.5))).lazy
    cases = [
        ("How many attention heads does the Transformer use?",
         "In this work we employ h = 8 parallel attention layers, or heads. "
         "Training took 3.5 days on 8 P100 GPUs."),  # extractive: the contexts' sentences
        ("What BLEU does the big model reach?", "The big model reaches 31.2 BLEU."),
        ("Who won the FIFA World Cup 2026?", "Brazil won the FIFA World Cup 2026."),
        ("What did they use?", "They trained on a quantum computer in Antarctica."),
    ]  # fmt: skip
    for question, answer in cases:
        assert lazy.judge(question, answer, ATTENTION) == every.judge(question, answer, ATTENTION)
    counted.update(lazy=0, every=0)
    lazy.judge(*cases[0], ATTENTION)
    every.judge(*cases[0], ATTENTION)
    assert counted["lazy"] * 2 <= counted["every"], counted
