"""Words for the support check and the contradiction rules: one tokeniser, one stemmer.

:func:`tokens` lower-cases, folds contractions and "no longer" into ``not`` and cuts
word and number tokens (numbers keep their inner ``.,:/-``: ``3.14``, ``2024-06-01``).
:func:`stem` is a small predictable suffix stripper (likes/like, opens/open);
:func:`key` is what two words must share to count as the same word when a sentence is
checked against a context: the stem cut to :data:`KEY_CHARS` characters, so
"introduced"/"introduces"/"introduction" meet without a dictionary.

The memory layer's contradiction rules (``memory/detectors.py``) use the same
tokeniser and stemmer, so a word means the same thing to both.
"""

from __future__ import annotations

import re

__all__ = [
    "KEY_CHARS",
    "NEGATIONS",
    "STOPWORDS",
    "key",
    "stem",
    "tokens",
]

_TOKEN = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_CONTRACTIONS = (
    (re.compile(r"\bcan't\b|\bcannot\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"\bno longer\b|\bnot anymore\b|\bnot any more\b"), "not"),
    (re.compile(r"\bmár nem\b"), "nem"),
)
NEGATIONS = frozenset({"not", "no", "never", "nem", "nincs", "nincsenek", "soha", "sem", "nothing"})

STOPWORDS = frozenset(
    """a an the this that these those is are was were be been being am do does did has
    have had will would shall should can could may might must to of in on at by for with
    from as and or but so than then it its it's i me my we our you your he him his she her
    they them their there here also just still now currently anymore again very really
    a az egy és is van volt lesz hogy""".split()  # noqa: SIM905
)

#: Characters of a stem that two words must share to be the same word in a check.
KEY_CHARS = 6


def tokens(text: str) -> list[str]:
    """Lower-cased word and number tokens, contractions and 'no longer' folded to 'not'."""
    low = text.lower().replace("’", "'")
    for pattern, repl in _CONTRACTIONS:
        low = pattern.sub(repl, low)
    return _TOKEN.findall(low)


def stem(word: str) -> str:
    """A tiny, predictable stemmer: enough to match likes/like and opens/open."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def key(word: str) -> str:
    """The matching key of a lower-cased word: its stem, cut to :data:`KEY_CHARS`."""
    if word[:1].isdigit():
        return word
    if word.endswith("'s"):
        word = word[:-2]
    return stem(word)[:KEY_CHARS]
