"""Lexical helpers of the deterministic roles: content terms, names, sentences, cues.

Content terms come from :func:`kredenc.retrieve.message_terms.recall_terms` (the recall
reflex's stopwords, chat filler and light stemming), so the roles and the reflex agree
on what a message is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kredenc.retrieve.message_terms import recall_terms
from kredenc.retrieve.terms import STOPWORDS_EN, tokens

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
_QUESTION_START = re.compile(
    r"^\s*(what|who|whom|whose|which|when|where|why|how|is|are|was|were|do|does|did|can|"
    r"could|should|would|will|has|have|had|tell|list|name|explain|describe|summari[sz]e|"
    r"give|show|find|compare|mi|ki|hol|mikor|hogyan|miért|melyik|hány|mennyi)\b",
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


def words(text: str) -> list[str]:
    return tokens(text)


def strip_citations(text: str) -> str:
    """``text`` without ``[n]`` citation markers."""
    return _CITATION.sub("", text)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def is_question(text: str) -> bool:
    return "?" in text or bool(_QUESTION_START.match(text))


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


def names(text: str, skip: Iterable[str] = ()) -> list[str]:
    """Names in ``text`` in order (capitalised spans not opening a sentence unless
    they are names elsewhere, tokens with digits), each once, ``skip`` left out
    (compared lower-cased)."""
    text = strip_citations(text)
    skipped = {s.lower() for s in skip}
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
            if len(name) < 2 or name.lower() in skipped:
                continue
            found.setdefault(name, None)
    return list(found)


def _common_opening(word: str) -> bool:
    """A sentence's first word that is an ordinary word, not a name."""
    low = word.lower()
    return low in STOPWORDS_EN or low in CHAT_WORDS or bool(_QUESTION_START.match(low))
