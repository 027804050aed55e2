"""The pairwise conflict check: does a newer text deny what an older one says?

A conflict is a content word one text negates and the other asserts ("The user drinks
green tea, never coffee" / "The user switched to black coffee in June": coffee), the
two about the same subject (they share another content word). A word is negated
within three words after a negation or a refusal verb ("never coffee", "doesn't drink
coffee", "avoids coffee"), up to the end of the clause. The memory layer's
contradictions job uses it (``memory/detectors.GroundedDetector``).
"""

from __future__ import annotations

import re

from kredenc.grounding.support import NOT_CONTENT
from kredenc.grounding.words import NEGATIONS, key, tokens

__all__ = ["conflicts"]

POLARITY_FLIP = frozenset(
    """avoid avoids avoided quit quits stopped stop stops gave refuse refuses refused
    without lack lacks lacked none dislike dislikes disliked hate hates hated""".split()  # noqa: SIM905
)


def _scoped_keys(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(asserted keys, negated keys): a word within three words after a negation or
    a refusal verb ("never coffee", "doesn't drink coffee", "avoids coffee") is negated,
    up to the end of the clause."""
    asserted: set[str] = set()
    negated: set[str] = set()
    scope = 0
    for tok in re.findall(r"[\w']+|[,;.!?]", text.lower().replace("’", "'")):
        if tok in ",;.!?" or tok in {"but", "however", "yet", "now"}:
            scope = 0
            continue
        for t in tokens(tok):
            if t in NEGATIONS or t in POLARITY_FLIP:
                scope = 3
                continue
            if t in NOT_CONTENT or (len(t) < 2 and not t.isdigit()):
                continue
            (negated if scope else asserted).add(key(t))
            scope = max(0, scope - 1)
    return frozenset(asserted), frozenset(negated - asserted)


def conflicts(older: str, newer: str) -> str | None:
    """Why ``newer`` contradicts ``older`` (None when it does not, as far as words tell).

    A conflict is a content word one text negates and the other asserts ("The user
    drinks green tea, never coffee" / "The user switched to black coffee in June":
    coffee), with the two about the same subject (they share another content word).
    """
    a_pos, a_neg = _scoped_keys(older)
    b_pos, b_neg = _scoped_keys(newer)
    flipped = sorted((a_neg & b_pos) | (a_pos & b_neg))
    if not flipped:
        return None
    shared = (a_pos | a_neg) & (b_pos | b_neg)
    if not shared - set(flipped):
        return None
    return f"one says {flipped[0]!r} is not so, the other that it is"
