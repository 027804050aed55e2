"""Sentence splitting with offsets: abbreviations, decimals, initials, lists."""

from __future__ import annotations

import pytest

from kredenc.grounding.sentences import split


def texts(text: str) -> list[str]:
    return [s.text for s in split(text)]


def test_offsets_point_into_the_text() -> None:
    text = "  The model uses h = 8 heads.  It reaches 28.4 BLEU!\nDone?  "
    for s in split(text):
        assert text[s.start : s.end] == s.text
    assert texts(text) == ["The model uses h = 8 heads.", "It reaches 28.4 BLEU!", "Done?"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith met Mr. Jones. They talked.", ["Dr. Smith met Mr. Jones.", "They talked."]),
        ("It costs 3.14 dollars. Cheap.", ["It costs 3.14 dollars.", "Cheap."]),
        ("Use tools, e.g. a hammer. Then rest.", ["Use tools, e.g. a hammer.", "Then rest."]),
        ("J. R. R. Tolkien wrote it. Fine.", ["J. R. R. Tolkien wrote it.", "Fine."]),
        ("The U.S. Army won. It was 1945.", ["The U.S. Army won.", "It was 1945."]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("no capital after. so one sentence", ["no capital after. so one sentence"]),
    ],
)
def test_sentence_ends(text: str, expected: list[str]) -> None:
    assert texts(text) == expected


def test_list_items_are_sentences_with_their_markers() -> None:
    text = "Steps:\n1. Boil the water.\n2. Add the eggs. Wait.\n- Serve\n* Eat\n\nThe end"
    assert texts(text) == [
        "Steps:",
        "1. Boil the water.",
        "2. Add the eggs.",
        "Wait.",
        "- Serve",
        "* Eat",
        "The end",
    ]


def test_empty_and_blank() -> None:
    assert split("") == []
    assert split(" \n\n ") == []
