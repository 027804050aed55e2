"""What a question asks for: slots, what a count counts, and where a number stands."""

from __future__ import annotations

import pytest

from kredenc.loop.roles.asked import answers, counted, number_near, question_keys, slots


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("How many attention heads does the Transformer use?", {"count"}),
        ("How long did training take?", {"number"}),
        ("What is the size of the vocabulary?", {"number"}),
        ("When was the paper published?", {"date"}),
        ("Who wrote the paper?", {"name"}),
        ("What optimizer did they use?", set()),
    ],
)
def test_slots(question: str, expected: set[str]) -> None:
    assert slots(question) == expected


def test_counted_is_what_the_question_counts() -> None:
    assert counted("How many attention heads does the Transformer use?") == "attention heads"
    assert counted("how many GPUs were used?") == "GPUs"
    assert counted("What optimizer?") == ""


@pytest.mark.parametrize(
    ("text", "fills"),
    [
        ("In this work we employ h = 8 parallel attention layers, or heads.", True),
        ("We used 300,000 training steps for the heads.", True),
        ("The Transformer uses multi-head attention in three different ways.", False),
        ("Table 3 rows (A) vary the number of attention heads.", False),  # a pointer
        ("Single-head attention is 0.9 BLEU worse with heads.", False),  # not a whole number
        ("The heads follow equation (3) below.", False),  # an equation's number
    ],
)
def test_a_count_is_a_whole_number_next_to_what_is_counted(text: str, fills: bool) -> None:
    assert answers(text, "count", "How many heads does it use?") is fills


def test_number_near_measures_words_between() -> None:
    keys = question_keys("warmup steps")
    assert number_near("We used warmup_steps = 4000.", keys, whole=True)
    assert not number_near("warmup one two three four five six seven eight 4000", keys, window=6)


def test_general_verbs_are_not_question_words() -> None:
    assert "use" not in question_keys("How many heads does the Transformer use?")


def test_a_name_or_date_already_in_the_question_does_not_fill_it() -> None:
    assert not answers("The World Cup 2026 is soon.", "date", "When is the World Cup 2026?")
    assert answers("It starts on June 11, 2026.", "date", "When is the World Cup 2026?")
    assert answers("It was won by Argentina.", "name", "Who won the World Cup?")
    assert not answers("The World Cup was won.", "name", "Who won the World Cup?")


@pytest.mark.parametrize(
    ("text", "fills"),
    [
        ("In this work we employ h = 8 parallel attention layers, or heads.", True),
        ("We used warmup_steps = 4000.", True),
        ("Isolated attentions for attention heads 5 and 6 of layer 5.", False),  # labels
        ("The figure shows head 3 of the encoder.", False),
    ],
)
def test_a_count_precedes_what_it_counts_or_is_assigned_to_it(text: str, fills: bool) -> None:
    keys = question_keys("How many attention heads or warmup steps are used?")
    assert number_near(text, keys, whole=True) is fills
