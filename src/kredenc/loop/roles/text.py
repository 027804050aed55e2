"""Lexical helpers of the deterministic roles: content terms, names, sentences, cues.

Names, content terms and sentences are :mod:`kredenc.retrieve.names` (search's
iterative mode reads passages the same way); this module adds the cues.
"""

from __future__ import annotations

import re

from kredenc.retrieve.names import (
    CHAT_WORDS,
    GENERIC_VERBS,
    QUESTION_START,
    content_terms,
    names,
    sentences,
    strip_citations,
)
from kredenc.retrieve.terms import tokens

__all__ = [
    "ANAPHORA",
    "CHAT_WORDS",
    "GENERIC_VERBS",
    "PRONOUNS",
    "WEAK_ANAPHORA",
    "content_terms",
    "has_anaphora",
    "is_bridge",
    "is_comparison",
    "is_question",
    "names",
    "refers_to_user",
    "sentences",
    "strip_citations",
    "words",
]

#: Words that refer back to something said before: pronouns, then weaker words that
#: often do not ("the same nationality", "that year"), counted only in a message
#: without a name of its own.
PRONOUNS = frozenset(
    "it its itself they them their theirs these those he him his she her hers former latter".split()  # noqa: SIM905
)
WEAK_ANAPHORA = frozenset("this that there such one ones same above".split())  # noqa: SIM905
ANAPHORA = PRONOUNS | WEAK_ANAPHORA
_FOLLOW_UP = re.compile(
    r"^\s*(and|also|what about|how about|what of|and what about|same for|why|how so|"
    r"which one|tell me more|more on|then)\b",
    re.IGNORECASE,
)
_USER_OWN = frozenset("my mine myself our ours".split())  # noqa: SIM905
_USER_SAID = frozenset(
    """
    said say told tell mentioned mention asked ask wrote write did do have had was am
    like liked prefer preferred
    """.split()  # noqa: SIM905
)
_COMPARE = re.compile(
    r"\b(compare|comparison|versus|vs\.?|both|either|neither|difference|differ|between|"
    r"same|older|younger|earlier|later|first|larger|smaller|bigger|more|less|longer|"
    r"shorter|higher|lower)\b|\bor\b",
    re.IGNORECASE,
)
_BRIDGE = re.compile(
    r"\bwhose\b|\bwho\s+(?:was|is|were|are|has|had|\w+ed)\b|"
    r"\b(?:that|which)\s+(?:was|is|were|are|has|had)\b|\bwhere\s+\w+\s+born\b",
    re.IGNORECASE,
)


def words(text: str) -> list[str]:
    return tokens(text)


def is_question(text: str) -> bool:
    return "?" in text or bool(QUESTION_START.match(text))


def refers_to_user(text: str) -> bool:
    """True when ``text`` asks about the user: "my ...", "what did I say ..."."""
    found = tokens(text)
    if any(w in _USER_OWN for w in found):
        return True
    return ("i" in found or "we" in found) and any(w in _USER_SAID for w in found)


def has_anaphora(text: str) -> bool:
    """True when ``text`` refers back (a pronoun, "the same", "what about ...")."""
    if _FOLLOW_UP.match(text):
        return True
    found = tokens(text)
    if any(w in PRONOUNS for w in found):
        return True
    return any(w in WEAK_ANAPHORA for w in found) and not names(text)


def is_comparison(text: str) -> bool:
    return bool(_COMPARE.search(text))


def is_bridge(text: str) -> bool:
    """A nested relation ("the director of the film that ...") asking a second hop."""
    return bool(_BRIDGE.search(text))
