"""Recall terms: stopwords (English, Hungarian, chat filler), length, duplicates,
light stemming, at most 8, and the FTS5 expression they become."""

from __future__ import annotations

import pytest

from kredenc.retrieve.message_terms import (
    MAX_TERMS,
    STOPWORDS_HU,
    Term,
    reads_hungarian,
    recall_terms,
    stem_en,
    stem_hu,
)
from kredenc.retrieve.terms import STOPWORDS_EN, tokens


def texts(message: str) -> list[str]:
    return [str(t) for t in recall_terms(message)]


def test_drops_stopwords_short_tokens_and_duplicates() -> None:
    assert texts("When did Caroline go to the LGBTQ support group? Caroline!") == [
        "caroline",
        "lgbtq",
        "support",
        "group",
    ]


def test_drops_chat_filler() -> None:
    assert texts("Do you remember what I told you about my sister?") == ["sister"]


@pytest.mark.parametrize(
    "message",
    ["good morning", "Good morning!", "good night, see you tomorrow", "How are you doing?",
     "Hi there, nice to meet you", "good evening everyone", "what's up?"],
)  # fmt: skip
def test_a_greeting_has_no_content_terms(message: str) -> None:
    """A day-one audit: "good morning" recalled three records through "morning" (and
    "good"); a greeting's words are not the thing asked about."""
    assert texts(message) == []


def test_a_greeting_leaves_the_question_after_it() -> None:
    assert texts("Good morning! What do I drink in the morning?") == ["drink", "morning"]
    assert texts("Is the night shift good for me?") == ["night", "shift", "good"]


def test_plural_and_singular_count_once() -> None:
    assert texts("meetings about the meeting notes") == ["meeting", "note"]


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("meetings", "meeting"),
        ("ponies", "pony"),
        ("classes", "class"),
        ("boxes", "box"),
        ("status", "status"),
        ("analysis", "analysis"),
        ("glass", "glass"),
        ("bus", "bus"),
    ],
)
def test_english_stemming_is_light(word: str, stem: str) -> None:
    assert stem_en(word) == stem


def test_at_most_eight_preferring_names_and_numbers() -> None:
    message = (
        "yesterday evening walked along riverside promenade looking at beautiful "
        "colourful lanterns while Zsofia photographed everything in 2023"
    )
    got = texts(message)
    assert len(got) == MAX_TERMS
    assert "zsofia" in got
    assert "2023" in got
    words = tokens(message)
    assert got == sorted(got, key=words.index)  # in the order they appear


def test_stopword_lists() -> None:
    assert {"the", "and", "what"} <= STOPWORDS_EN
    assert {"és", "hogy", "nem", "volt", "egy", "azt"} <= STOPWORDS_HU


def test_english_words_that_are_hungarian_stopwords_survive_in_english() -> None:
    assert "van" in texts("I rented a van for the move")
    assert "mint" in texts("Which tea had mint leaves in it")


def test_hungarian_is_detected() -> None:
    assert reads_hungarian(tokens("Hol laktam tavaly, amikor a kutyával sétáltunk?"))
    assert not reads_hungarian(tokens("Where did I live last year with the dog?"))


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("budapesten", "budapest"),
        ("házban", "ház"),
        ("kutyával", "kutyá"),
        ("barátoknak", "barátok"),
        ("ház", "ház"),
    ],
)
def test_hungarian_stemming_cuts_one_suffix(word: str, stem: str) -> None:
    assert stem_hu(word) == stem


def test_hungarian_terms_are_prefixes() -> None:
    terms = recall_terms("Emlékszel, hol laktunk Budapesten a házban?")
    assert Term("budapest", prefix=True) in terms
    assert Term("ház", prefix=True) in terms
    assert all(t.prefix for t in terms)
    assert "laktunk*" in [str(t) for t in terms]


def test_nothing_left_gives_no_terms() -> None:
    assert recall_terms("what is it? ok, a b c") == []
    assert recall_terms("") == []
