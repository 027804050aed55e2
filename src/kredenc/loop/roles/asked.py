"""What a question asks for: its content words and the *slots* its answer must fill.

Shared by generate (a sentence that fills the slot answers better) and reflect (an
answer that leaves a slot empty is incomplete). A slot is the kind of fact a question
word demands: ``number`` ("how many", "how much", "what number/value/size"), ``date``
("when", "what year"), ``name`` ("who", "whom", "whose", "which company/person").
Content words are the judge's (:func:`kredenc.grounding.support.content_keys`), so
"covered" means the same to the judge, the generator and reflect.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kredenc.grounding.support import SentenceFacts, content_keys
from kredenc.grounding.words import key, tokens

__all__ = ["covered", "fills", "number_near", "question_keys", "slots"]

_NUMBER = re.compile(
    r"\bhow (?:many|much|long|large|big|fast|often|old|far|deep|wide|high)\b"
    r"|\bwhat (?:is |was |are |were )?(?:the )?(?:number|amount|value|size|count|rate|"
    r"percentage|score|dimension\w*)\b",
    re.IGNORECASE,
)
_DATE = re.compile(r"\bwhen\b|\bwhat (?:year|date|month|day)\b|\bwhich year\b", re.IGNORECASE)
_NAME = re.compile(
    r"\bwho(?:m|se)?\b|\b(?:which|what) (?:company|person|team|country|city|author|"
    r"organi[sz]ation)\b",
    re.IGNORECASE,
)
# "Table 3", "Section 3.2.2", "Figure 1", "Eq. (2)", "layer 5 of 6": pointers, not answers.
_POINTER = re.compile(
    r"\b(?:tables?|figures?|fig\.|sections?|eq\.|equations?|rows?|layer|chapter|page)"
    r"\s*\(?[\d.]+[a-z]?\)?(?:\s+of\s+\d+)?",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b(?:1[5-9]|20)\d\d\b")
_MONTH = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d", re.IGNORECASE
)


def question_keys(question: str) -> list[str]:
    """The question's distinct content keys, in order."""
    return list(dict.fromkeys(content_keys(question)))


def slots(question: str) -> frozenset[str]:
    """The slots ``question`` asks to be filled: ``number``, ``date``, ``name``."""
    out = set()
    if _NUMBER.search(question):
        out.add("number")
    if _DATE.search(question):
        out.add("date")
    if _NAME.search(question):
        out.add("name")
    return frozenset(out)


def fills(text: str, slot: str, question: str = "") -> bool:
    """Whether ``text`` holds a fact of the kind ``slot``, not already in ``question``."""
    facts = SentenceFacts.of(_POINTER.sub(" ", text))
    asked = SentenceFacts.of(question) if question else None
    if slot == "number":
        given = set(asked.numbers) if asked else set()
        return any(n not in given for n in facts.numbers)
    if slot == "date":
        given_years = set(_YEAR.findall(question))
        return any(y not in given_years for y in _YEAR.findall(text)) or bool(_MONTH.search(text))
    if slot == "name":
        given = set(asked.names) | set(asked.keys) if asked else set()
        return any(n not in given for n in facts.names)
    return False


def number_near(text: str, keys: Iterable[str], window: int = 6) -> bool:
    """Whether a number stands within ``window`` words of one of ``keys`` in ``text``
    ("h = 8 parallel attention layers": 8 is near "attention"), pointers to tables and
    sections left out: the number a "how many X" question asks for is the one next to X."""
    wanted = set(keys)
    toks = tokens(_POINTER.sub(" ", text))
    where = [i for i, t in enumerate(toks) if t[:1].isdigit()]
    if not where or not wanted:
        return False
    near = [i for i, t in enumerate(toks) if t[:1].isalpha() and key(t) in wanted]
    return any(abs(i - j) <= window for i in where for j in near)


def covered(keys: Iterable[str], texts: Iterable[str]) -> tuple[list[str], list[str]]:
    """``keys`` split into those found in ``texts`` (by content key) and those not."""
    found = set()
    for text in texts:
        found.update(content_keys(text))
    hit = [k for k in keys if k in found]
    miss = [k for k in keys if k not in found]
    return hit, miss
