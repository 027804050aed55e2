"""Names and content terms of a text, by rule (no model): what the answer loop's roles
and the iterative search (:mod:`kredenc.retrieve.iterative`) read a question or a
passage for.

Content terms come from :func:`kredenc.retrieve.message_terms.recall_terms` (the recall
reflex's stopwords, chat filler and light stemming), so the roles, the reflex and
search agree on what a message is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from kredenc.retrieve.message_terms import recall_terms
from kredenc.retrieve.terms import STOPWORDS_EN

#: Words of small talk: a message made only of these (and stopwords) asks nothing.
CHAT_WORDS = frozenset(
    """
    hi hello hey hiya howdy yo greetings morning afternoon evening night goodnight
    day today tonight bye goodbye cya later cheer cheers thank thanks thx ty appreciate
    appreciated welcome great good nice cool awesome perfect wonderful amazing fantastic
    excellent brilliant lovely fine okay ok alright sure yep yup nope sounds helpful
    useful doing going everything fun haha lol wow glad happy sorry pleasure bot
    assistant chat talk meet weekend much lot lots szép szépen jó reggelt estét napot
    """.split()  # noqa: SIM905
)

#: Verbs too general to say what a message is about (dropped from content terms).
GENERIC_VERBS = frozenset(
    """
    use used using make made get do did does done work say said tell told see help
    find found show give go want need
    """.split()  # noqa: SIM905
)

#: A question's opening word.
QUESTION_START = re.compile(
    r"^\s*(what|who|whom|whose|which|when|where|why|how|is|are|was|were|do|does|did|can|"
    r"could|should|would|will|has|have|had|tell|list|name|explain|describe|summari[sz]e|"
    r"give|show|find|compare|mi|ki|hol|mikor|hogyan|miért|melyik|hány|mennyi)\b",
    re.IGNORECASE,
)
_CITATION = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# A name: capitalised words (with inner connectors like "of", "de"), or a token with
# digits or inner capitals (GPT-4, BLEU, WMT2014).
_NAME = re.compile(
    r"\b(?:[A-Z][\w'’\-]*[\w])(?:\s+(?:of|de|la|von|van|the)?\s*[A-Z][\w'’\-]*[\w])*"
    r"|\b\w*\d\w*(?:-\w+)*\b"
)


def content_terms(text: str, limit: int = 16) -> list[str]:
    """The content terms of ``text`` (stemmed lightly), small talk left out."""
    return [
        t.text
        for t in recall_terms(text, limit=limit + 8)
        if t.text not in CHAT_WORDS and t.text not in GENERIC_VERBS
    ][:limit]


def strip_citations(text: str) -> str:
    """``text`` without ``[n]`` citation markers."""
    return _CITATION.sub("", text)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def names(text: str, skip: Iterable[str] = ()) -> list[str]:
    """Names in ``text`` in order (capitalised spans not opening a sentence unless
    they are names elsewhere, tokens with digits), each once, ``skip`` left out
    (compared lower-cased)."""
    skipped = {s.lower() for s in skip}
    return [n for n in _names(text) if n.lower() not in skipped]


@lru_cache(maxsize=1024)
def _names(text: str) -> tuple[str, ...]:
    """:func:`names` without ``skip``; memoised (the loop reads the question's names in
    several roles of every ask)."""
    text = strip_citations(text)
    found: dict[str, None] = {}
    for sentence in sentences(text):
        for match in _NAME.finditer(sentence):
            name = match.group().strip(" -'’")
            parts = name.split()
            if match.start() == 0 and parts and _common_opening(parts[0]):
                parts = parts[1:]  # "The Transformer" -> "Transformer"; "What" -> ""
                while parts and parts[0].lower() in {"of", "de", "la", "the"}:
                    parts = parts[1:]
            name = " ".join(parts)
            if not name or name.lower() in STOPWORDS_EN or name.lower() in CHAT_WORDS:
                continue
            if len(name) < 2:
                continue
            found.setdefault(name, None)
    return tuple(found)


def _common_opening(word: str) -> bool:
    """A sentence's first word that is an ordinary word, not a name."""
    low = word.lower()
    return low in STOPWORDS_EN or low in CHAT_WORDS or bool(QUESTION_START.match(low))
