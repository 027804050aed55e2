"""Index cards for conversation turns: what words find a turn by.

A turn alone is often not enough to find it ("Yes, the blue one!"): its card's
context column carries the turns just before it in the same conversation, the
speaker and the session, weighted below the turn's own words (see
``SqliteIndex.lexical``). Only *preceding* turns are used, because a turn is filed
when it happens and records are never rewritten. Its tags name the session, the
speaker and the terms the recall reflex would extract from it (:func:`turn_tags`).

Measured on LoCoMo dev (turn-level recall@10, lexical leg): the turn alone 0.624,
with the 3 preceding turns as context 0.732.
"""

from __future__ import annotations

from collections.abc import Sequence

from kredenc.recall.terms import recall_terms

CONTEXT_TURNS = 3


def turn_context(
    texts: Sequence[str], index: int, *, window: int = CONTEXT_TURNS, header: str = ""
) -> str:
    """The context for ``texts[index]``: ``header`` and up to ``window`` turns before it."""
    before = [t for t in texts[max(0, index - window) : index] if t]
    return " ".join([header, *before]).strip() if header else " ".join(before)


def turn_tags(session_id: str, role: str, text: str) -> list[str]:
    """A turn's tags: ``session:<id>``, ``speaker:<role>`` and the terms the recall
    reflex extracts from the text (stopwords dropped, lightly stemmed, at most 8)."""
    terms = [t.text for t in recall_terms(text)]
    return [f"session:{session_id}", f"speaker:{role}", *dict.fromkeys(terms)]
