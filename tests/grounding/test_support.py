"""Sentence support: words, facts (numbers, dates, names with their relation), polarity,
OUTSIDE KNOWLEDGE, and the pairwise checks the memory layer uses."""

from __future__ import annotations

import pytest

from kredenc.grounding.base import OUTSIDE_KNOWLEDGE
from kredenc.grounding.conflicts import conflicts
from kredenc.grounding.support import (
    Contexts,
    SentenceFacts,
    gather_sentences,
    supports,
)

CONTEXT = (
    "The Transformer was introduced by Vaswani and colleagues in 2017. "
    "It uses 8 attention heads in each layer. "
    "The big model reaches 28.4 BLEU on WMT 2014 English-German. "
    "Training used the Adam optimizer with beta1 = 0.9 and beta2 = 0.98."
)


def one(claim: str, evidence: str = CONTEXT) -> tuple[bool, str, float]:
    s = supports(claim, evidence)
    return s.supported, s.reason, s.support


def test_a_sentence_taken_from_the_context_is_supported() -> None:
    ok, reason, support = one("The big model reaches 28.4 BLEU on WMT 2014 English-German.")
    assert ok, reason
    assert support == 1.0


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        ("The big model reaches 31.2 BLEU on WMT 2014 English-German.", "number 31.2"),
        ("The Transformer was introduced by Vaswani and colleagues in 2015.", "number 2015"),
        ("The Transformer was introduced by Hinton and colleagues in 2017.", "name 'hinton'"),
        ("It uses 16 attention heads in each layer.", "number 16"),
    ],
)
def test_numbers_dates_and_names_must_match(claim: str, why: str) -> None:
    ok, reason, _ = one(claim)
    assert not ok
    assert why in reason


def test_a_number_from_another_statement_is_not_the_same_relation() -> None:
    # 8 is in the context, but as the number of heads, not as a BLEU score.
    claim = "The big model reaches 8 BLEU on WMT 2014 English-German."
    ((ev, facts),) = gather_sentences(claim, Contexts([CONTEXT]))
    assert facts.numbers == ("8", "2014")
    assert ev.loose_numbers == 1
    assert ev.missing_numbers == 0
    assert any("number 8 is in the context but not with the same words" in n for n in ev.notes)
    right = "The big model reaches 28.4 BLEU on WMT 2014 English-German."
    assert supports(right, CONTEXT).support > supports(claim, CONTEXT).support


def test_outside_knowledge_is_never_supported() -> None:
    s = supports(f"{OUTSIDE_KNOWLEDGE} It uses 8 attention heads in each layer.", CONTEXT)
    assert not s.supported
    assert s.support == 0.0
    assert "outside knowledge" in s.reason


def test_negation_against_the_context_is_noted() -> None:
    claim = "Training did not use the Adam optimizer."
    ((ev, _),) = gather_sentences(claim, Contexts([CONTEXT]))
    assert ev.polarity == 1
    assert "negation differs from the context" in ev.notes
    plain = "Training used the Adam optimizer."
    assert supports(plain, CONTEXT).support > supports(claim, CONTEXT).support


def test_invented_content_is_unsupported_and_says_why() -> None:
    s = supports("The authors trained it on a quantum computer in Antarctica.", CONTEXT)
    assert not s.supported
    assert s.reason


def test_list_markers_are_not_numbers() -> None:
    assert SentenceFacts.of("3. It uses 8 attention heads.").numbers == ("8",)


RECIPE = (
    "Heat the oven to 350 F and place the dish into the oven. "
    "Allow the brats to cook for approximately 30 minutes. "
    "Cook it on low for 6 to 8 hours. "
    "Being exposed to sunshine will also increase your levels of vitamin D."
)


@pytest.mark.parametrize(
    "claim",
    [
        # A citation's number is no fact ("passage 2"), whatever numbers the context has.
        "According to passage 2, allow the brats to cook for approximately 30 minutes.",
        "(Passage 1)",
        # A range whose ends the context holds.
        "Cook it on low for 6-8 hours.",
        # One-letter capitals are units and labels, not names.
        "Heat the oven to 350 F before the brats cook for approximately 30 minutes.",
        "Sunshine will increase your levels of vitamin D.",
        # A list item's first word is a verb, not a name.
        "1. Allow The brats to cook for approximately 30 minutes.",
    ],
)
def test_the_fact_rules_leave_citations_units_and_ranges_alone(claim: str) -> None:
    ((ev, _),) = gather_sentences(claim, Contexts([RECIPE]))
    assert not ev.swapped and not ev.novel, ev.notes
    assert ev.missing_numbers == 0 and ev.missing_names == 0, ev.notes


def test_a_number_the_question_holds_is_not_claimed() -> None:
    claim = "The 2016 race took about 30 minutes."
    ((ev, _),) = gather_sentences(claim, Contexts([RECIPE]), question="Who won in 2016?")
    assert ev.missing_numbers == 0 and not ev.swapped
    ((ev, _),) = gather_sentences(claim, Contexts([RECIPE]))
    assert ev.missing_numbers == 1


def test_a_swapped_number_is_still_a_substitution() -> None:
    ((ev, _),) = gather_sentences(
        "Allow the brats to cook for approximately 45 minutes.", Contexts([RECIPE])
    )
    assert ev.swapped == 1
    assert "number 45 where the context says 30" in ev.notes


def test_framing_and_lead_in_sentences_trip_no_rule() -> None:
    ctx = Contexts([RECIPE])
    for text in (
        "Sure, I'll do my best to help you!",
        "Let me know if you need anything.",
        "Good luck!",
        "Based on the passages, here are the steps to cook an osso buco:",
    ):
        ((ev, _),) = gather_sentences(text, ctx)
        assert not ev.novel and not ev.swapped, (text, ev.notes)
    ((ev, _),) = gather_sentences("The brats are grilled over charcoal embers.", ctx)
    assert not ev.novel  # "brats" is in the context
    ((ev, _),) = gather_sentences("Marinate salmon overnight in miso.", ctx)
    assert ev.novel


# -- the pairwise conflict check ------------------------------------------------

CONFLICTS = [
    ("The user drinks green tea, never coffee", "The user switched to black coffee in June"),
    ("Bob does not own a car", "Bob drives his own car to work every day"),
    ("The user never flies; they always take the train", "The user flies to Berlin every month"),
    ("Anna avoids meat entirely", "Anna ordered meat at the steakhouse on Friday"),
    ("The team does not use Windows", "The team installed Windows on every laptop"),
]
COMPATIBLE = [
    ("The user drinks green tea, never coffee", "The user prefers green tea in the morning"),
    ("The user never drinks coffee", "The user avoids coffee"),
    ("Bob does not own a car", "Bob doesn't have a car"),
    ("The user switched to black coffee in June", "In June the user started drinking black coffee"),
    ("The user lives in Budapest", "The user has lived in Budapest since 2019"),
    ("The user never flies", "The user dislikes flying and takes the train"),
]


@pytest.mark.parametrize(("older", "newer"), CONFLICTS)
def test_conflicts_found(older: str, newer: str) -> None:
    assert conflicts(older, newer) is not None
    assert conflicts(newer, older) is not None


@pytest.mark.parametrize(("older", "newer"), COMPATIBLE)
def test_no_conflict_between_compatible_statements(older: str, newer: str) -> None:
    assert conflicts(older, newer) is None
