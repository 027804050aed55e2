"""Words one typo away, for a query word that no card holds.

A misspelt query word ("sydeney", "reknowned", "buisiness") matches no card on the
lexical leg and lands somewhere else on the dense one: one typo per question costs 4-10
points on every dev set (docs/benchmarks.md, "One typo per question"). An index that
knows its words can offer the word the user meant: of the words one edit away (two
neighbouring letters swapped, a letter added, dropped or changed: Damerau-Levenshtein
distance 1) that the namespace's cards hold, the one most cards hold.

Only words that *no* card holds are corrected, so a query whose words are all in the
store is searched exactly as written; and only words of :data:`MIN_LETTERS` letters or
more, as ASCII letters: a short word has too many neighbours to pick one ("cat": "bat",
"car", "cut"...), and a word with digits is a code, a version or a date, not a typo.
A word of :data:`SHORTEST` letters (one fewer) is corrected only by a letter added: a
5-letter word that lost one.

This module makes the candidates; each index looks them up in its own vocabulary
(``Index.corrections``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

#: The shortest word corrected by any edit.
MIN_LETTERS = 5
#: The shortest word corrected at all: one shorter than :data:`MIN_LETTERS` is
#: corrected only by a letter added (the dropped letter of a word of MIN_LETTERS).
SHORTEST = 4
#: The longest: past it a word is more likely an identifier than an English word, and
#: its candidates grow with its length (about 54 per letter).
MAX_LETTERS = 24
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_LETTERS = re.compile(r"[a-z]+")


def correctable(word: str) -> bool:
    """Whether ``word`` (a lower-cased query token) is one this module corrects."""
    return SHORTEST <= len(word) <= MAX_LETTERS and _LETTERS.fullmatch(word) is not None


def edits(word: str) -> list[str]:
    """The distinct words one edit from ``word``, in the order a tie is broken by:
    swaps of two neighbouring letters, then a letter added (the commonest slips drop
    one), then a letter dropped, then a letter changed; left to right within each. A
    word shorter than :data:`MIN_LETTERS`: only the words a letter added makes."""
    out: dict[str, None] = {}
    n = len(word)
    if n < MIN_LETTERS:  # a short word: only the letter it may have dropped
        for i in range(n + 1):
            for ch in _ALPHABET:
                out[word[:i] + ch + word[i:]] = None
        return list(out)
    for i in range(n - 1):
        if word[i] != word[i + 1]:
            out[word[:i] + word[i + 1] + word[i] + word[i + 2 :]] = None
    for i in range(n + 1):
        for ch in _ALPHABET:
            out[word[:i] + ch + word[i:]] = None
    for i in range(n):
        out[word[:i] + word[i + 1 :]] = None
    for i in range(n):
        for ch in _ALPHABET:
            if ch != word[i]:
                out[word[:i] + ch + word[i + 1 :]] = None
    out.pop(word, None)
    return list(out)


def respell(text: str, corrections: dict[str, str]) -> str:
    """``text`` with each corrected word (matched whole, in any case) replaced by its
    correction: what the dense leg embeds."""
    if not corrections:
        return text
    pattern = re.compile(
        r"(?<![^\W_])(" + "|".join(re.escape(w) for w in corrections) + r")(?![^\W_])",
        re.IGNORECASE,
    )
    return pattern.sub(lambda m: corrections[m.group(1).lower()], text)


#: At most this many held candidates of a word are checked against the caller's scope.
_CHECKED = 5
#: The candidates one query may look up: its unheld words are corrected in query order
#: while their edits fit (a word of 8 letters has about 430, one of 24 about 1,300). A
#: query of many long words that no card holds would otherwise cost a hundred searches.
MAX_CANDIDATES = 2000


def nearest(
    words: Sequence[str],
    stems: Callable[[Sequence[str]], list[str]],
    counts: Callable[[Sequence[str]], dict[str, int]],
    in_scope: Callable[[str], bool],
) -> dict[str, str]:
    """The correction of each of ``words`` (words no card holds) that has one: of the
    word's :func:`edits` whose index term is not its own, the one whose term the most
    cards hold (ties in edit order) among those a card in the caller's scope holds.

    The index supplies its lookups: ``stems`` (each word's index term, "" for none),
    ``counts`` (of index terms, those some card of the store holds, with how many) and
    ``in_scope`` (whether a card the caller may see holds the word). Each is called
    once for all the words but ``in_scope``. Both backends run this one rule, so they
    correct alike. Words are taken in order while their edits fit in
    :data:`MAX_CANDIDATES`; the rest are left as typed.
    """
    per_word: list[list[str]] = []
    taken: list[str] = []
    budget = MAX_CANDIDATES
    for word in dict.fromkeys(words):
        cands = edits(word)
        if len(cands) > budget:
            break
        budget -= len(cands)
        taken.append(word)
        per_word.append(cands)
    words = taken
    if not words:
        return {}
    flat = [c for cands in per_word for c in cands]
    terms = stems([*words, *flat])
    own, terms = terms[: len(words)], terms[len(words) :]
    firsts: list[dict[str, str]] = []  # per word: index term -> the first edit making it
    at = 0
    for word_own, cands in zip(own, per_word, strict=True):
        first: dict[str, str] = {}
        for candidate, term in zip(cands, terms[at : at + len(cands)], strict=True):
            if term and term != word_own:
                first.setdefault(term, candidate)
        at += len(cands)
        firsts.append(first)
    held = counts(list({t: None for first in firsts for t in first}))
    out: dict[str, str] = {}
    for word, first in zip(words, firsts, strict=True):
        order = {term: i for i, term in enumerate(first)}
        found = sorted((t for t in first if t in held), key=lambda t: (-held[t], order[t]))
        for term in found[:_CHECKED]:
            if in_scope(first[term]):
                out[word] = first[term]
                break
    return out
