"""The candidates of a misspelt word and the rule that picks one (storage/index/spelling)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from kredenc.storage.index import spelling


def distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment) distance, the slow textbook way."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


@given(st.text(alphabet="abcdez", min_size=spelling.MIN_LETTERS, max_size=9))
def test_the_edits_are_every_word_one_edit_away_and_only_those(word: str) -> None:
    got = spelling.edits(word)
    assert len(got) == len(set(got))
    assert word not in got
    assert all(distance(word, e) == 1 for e in got)
    # Every word of letters a-z one edit away (checked over a small alphabet's worth).
    expected = {
        w
        for w in (
            {word[:i] + word[i + 1 :] for i in range(len(word))}
            | {word[:i] + c + word[i:] for i in range(len(word) + 1) for c in "abcdez"}
            | {word[:i] + c + word[i + 1 :] for i in range(len(word)) for c in "abcdez"}
            | {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}
        )
        if w != word
    }
    assert expected <= set(got)


@given(st.text(alphabet="abcdez", min_size=1, max_size=spelling.MIN_LETTERS - 1))
def test_a_short_word_gets_back_only_a_letter_it_dropped(word: str) -> None:
    got = spelling.edits(word)
    assert len(got) == len(set(got)) and word not in got
    assert all(len(e) == len(word) + 1 and distance(word, e) == 1 for e in got)
    assert {word[:i] + c + word[i:] for i in range(len(word) + 1) for c in "abcdez"} <= set(got)


def test_the_edits_come_swaps_first_then_a_letter_added_dropped_changed() -> None:
    got = spelling.edits("abcde")
    assert got[:2] == ["bacde", "acbde"]
    assert got.index("zabcde") < got.index("bcde") < got.index("zbcde")


def test_only_words_of_four_to_24_ascii_letters_are_corrected() -> None:
    assert spelling.correctable("sydeney")
    assert spelling.correctable("pars")  # four letters: by a letter added only
    assert not spelling.correctable("bat")  # three: too many neighbours
    assert not spelling.correctable("x1000a")  # a code, not a word
    assert not spelling.correctable("naïve")
    assert not spelling.correctable("a" * 25)
    assert spelling.correctable("a" * 24)


def test_respell_replaces_whole_words_in_any_case() -> None:
    fixes = {"sydeney": "sydney", "reserach": "research"}
    assert (
        spelling.respell("Sydeney's RESERACH on sydeneys", fixes) == "sydney's research on sydeneys"
    )
    assert spelling.respell("unchanged text", {}) == "unchanged text"
    # A word that reads as a regular expression is matched as written.
    assert spelling.respell("a bbb c", {"b+": "x"}) == "a bbb c"


class Lookups:
    """An index's lookups over a vocabulary of words (each word its own term but for
    its trailing "s" letters, dropped) held by ``counts`` cards, ``scope`` of them visible."""

    def __init__(self, counts: dict[str, int], scope: set[str]) -> None:
        self.counts = counts
        self.scope = scope
        self.calls: list[str] = []

    def stems(self, words: Sequence[str]) -> list[str]:
        self.calls.append("stems")
        return [w.rstrip("s") for w in words]

    def held(self, terms: Sequence[str]) -> dict[str, int]:
        self.calls.append("counts")
        return {t: self.counts[t] for t in terms if t in self.counts}

    def in_scope(self, word: str) -> bool:
        self.calls.append(f"scope {word}")
        return word in self.scope or self.stems([word])[0] in self.scope


def test_nearest_takes_the_most_held_term_in_scope_in_one_lookup_of_each_kind() -> None:
    index = Lookups({"sydney": 3, "stare": 1, "star": 5, "tower": 2}, {"sydney", "stare", "star"})
    got = spelling.nearest(
        ["sydeney", "starx", "towre", "zzzzzz"], index.stems, index.held, index.in_scope
    )
    assert got == {"sydeney": "sydney", "starx": "star"}  # "tower": out of scope
    assert index.calls[:2] == ["stems", "counts"]
    assert spelling.nearest([], index.stems, index.held, index.in_scope) == {}


def test_nearest_never_offers_the_words_own_term() -> None:
    # "cats" is "cat" to the index: its edit "cat" is the same term, no correction.
    index = Lookups({"cat": 9}, {"cat"})
    assert spelling.nearest(["catss"], index.stems, index.held, index.in_scope) == {}


def test_nearest_checks_at_most_five_held_candidates_against_the_scope() -> None:
    held = {w: 10 - i for i, w in enumerate(["bbbbb", "cbbbb", "dbbbb", "ebbbb", "fbbbb", "gbbbb"])}
    index = Lookups(held, {"gbbbb"})
    assert spelling.nearest(["abbbb"], index.stems, index.held, index.in_scope) == {}
    assert sum(c.startswith("scope") for c in index.calls) == 5


def test_a_query_of_many_long_unheld_words_looks_up_a_bounded_number_of_candidates() -> None:
    # A 4,000-character query of 24-letter words no card holds would otherwise stem and
    # look up ~1,300 candidates a word: a search made a hundred times dearer on demand.
    stemmed: list[int] = []

    def stems(words: Sequence[str]) -> list[str]:
        stemmed.append(len(words))
        return list(words)

    words = [chr(97 + i % 26) * 12 + chr(97 + i // 26) * 12 for i in range(64)]
    got = spelling.nearest(words, stems, lambda terms: {}, lambda word: True)
    assert got == {}
    assert sum(stemmed) <= spelling.MAX_CANDIDATES + len(words)
    # The words come in query order: the first ones are the ones looked up.
    first = Lookups({"sydney": 1}, {"sydney"})
    assert spelling.nearest(["sydeney", *words], first.stems, first.held, first.in_scope) == {
        "sydeney": "sydney"
    }
