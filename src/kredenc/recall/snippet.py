"""A long recalled text shown as the window of its sentences around the best match.

The sentence-window idea (as in Veritas' sentence windows or LlamaIndex's
``SentenceWindowNodeParser``): the part of a long turn or passage that a question
calls for is usually one sentence and its neighbours, so showing that window instead of
the text's head leaves room in the same character budget for more records. The
sentence holding most of the recall's terms is the centre (the first on a tie; the
first sentence when none holds any), and its neighbours are added, the next one first,
while the window fits. Left-out text is marked with ``…`` at the cut ends.

Pure function of the text, the terms and the size (no store).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kredenc.retrieve.names import sentences

__all__ = ["ELLIPSIS", "snippet"]

ELLIPSIS = "…"


def _matcher(terms: Sequence[Any]) -> re.Pattern[str] | None:
    """One pattern for the terms: each term (a stem) opens a word (``\\bstem``), case
    folded; a stem is a prefix of the words it comes from, so this counts them."""
    texts = sorted({str(getattr(t, "text", t)).lower() for t in terms} - {""}, key=len)
    if not texts:
        return None
    return re.compile(r"\b(?:" + "|".join(re.escape(t) for t in reversed(texts)) + ")", re.I)


def _matches(pattern: re.Pattern[str] | None, sentence: str) -> int:
    """How many distinct terms open a word of ``sentence``."""
    if pattern is None:
        return 0
    return len({m.lower() for m in pattern.findall(sentence)})


def snippet(text: str, terms: Sequence[Any], chars: int | None) -> str:
    """``text`` when it is at most ``chars`` long (or ``chars`` is None or 0), else the
    window of whole sentences around the one that holds most of ``terms`` (stemmed
    words, e.g. :func:`kredenc.retrieve.message_terms.recall_terms`), at most ``chars``
    long with its ``…`` marks where it can be; a centre sentence longer than that is
    returned alone (the budget cuts it)."""
    if not chars or len(text) <= chars:
        return text
    parts = sentences(text)
    if len(parts) <= 1:
        return text
    pattern = _matcher(terms)
    scores = [_matches(pattern, p) for p in parts]
    best = max(range(len(parts)), key=lambda i: (scores[i], -i))
    lo = hi = best  # the window is parts[lo : hi + 1]

    def size(a: int, b: int) -> int:
        body = sum(len(p) for p in parts[a : b + 1]) + (b - a)
        return body + (2 if a > 0 else 0) + (2 if b < len(parts) - 1 else 0)

    grown = True
    while grown:
        grown = False
        if hi + 1 < len(parts) and size(lo, hi + 1) <= chars:
            hi, grown = hi + 1, True
        if lo > 0 and size(lo - 1, hi) <= chars:
            lo, grown = lo - 1, True
    window = " ".join(parts[lo : hi + 1])
    return (
        (f"{ELLIPSIS} " if lo > 0 else "")
        + window
        + (f" {ELLIPSIS}" if hi < len(parts) - 1 else "")
    )
