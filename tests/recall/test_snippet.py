"""Sentence-window snippets: a long text shown as the sentences around its best match."""

from __future__ import annotations

from kredenc.recall.snippet import ELLIPSIS, snippet
from kredenc.retrieve.message_terms import recall_terms

LONG = (
    "I spent the weekend cleaning out the garage and sorting old boxes. "
    "Most of it was junk from the previous owners. "
    "My sister finally adopted a beagle named Biscuit last Tuesday. "
    "She sends me photos of him every morning before work. "
    "Anyway, the garage looks great now and I can park the car inside."
)


def test_short_text_and_no_limit_are_returned_whole() -> None:
    terms = recall_terms("What is the name of my sister's dog?")
    assert snippet("A beagle named Biscuit.", terms, 200) == "A beagle named Biscuit."
    assert snippet(LONG, terms, None) == LONG
    assert snippet(LONG, terms, 0) == LONG


def test_the_window_is_centred_on_the_sentence_that_matches() -> None:
    terms = recall_terms("What did my sister name the beagle she adopted?")
    out = snippet(LONG, terms, 160)
    assert len(out) <= 160
    assert "adopted a beagle named Biscuit" in out
    assert out.startswith(f"{ELLIPSIS} ") and out.endswith(f" {ELLIPSIS}")
    assert "garage and sorting" not in out  # the head is left out


def test_the_window_grows_to_whole_neighbour_sentences() -> None:
    terms = recall_terms("beagle Biscuit")
    out = snippet(LONG, terms, 220)
    assert "photos of him every morning" in out  # the next sentence first
    body = out.removeprefix(f"{ELLIPSIS} ").removesuffix(f" {ELLIPSIS}")
    assert body in " ".join(LONG.split())  # whole sentences, in order


def test_no_match_takes_the_head_and_one_long_sentence_stays_whole() -> None:
    terms = recall_terms("quantum chromodynamics")
    out = snippet(LONG, terms, 120)
    assert out.startswith("I spent the weekend") and out.endswith(ELLIPSIS)
    one = "word " * 100
    assert snippet(one, terms, 50) == one  # one sentence: the budget cuts it
