"""What a question asks for: its content words and the *slots* its answer must fill.

Shared by generate (a sentence that fills the slot answers better) and reflect (an
answer that leaves a slot empty is incomplete). A slot is the kind of fact a question
word demands: ``count`` ("how many": a whole number), ``number`` ("how much", "how
long", "what number/value/size"), ``date``
("when", "what year"), ``name`` ("who", "whom", "whose", "which company/person").
Content words are the judge's (:func:`kredenc.grounding.support.content_keys`), so
"covered" means the same to the judge, the generator and reflect.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

from kredenc.grounding.support import SentenceFacts, content_keys
from kredenc.grounding.words import key
from kredenc.loop.roles.text import GENERIC_VERBS

__all__ = ["answers", "counted", "covered", "fills", "number_near", "question_keys", "slots"]

_COUNT = re.compile(r"\bhow many\b", re.IGNORECASE)
_NUMBER = re.compile(
    r"\bhow (?:much|long|large|big|fast|often|old|far|deep|wide|high)\b"
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
    r"\s*\(?[\d.]+[a-z]?\)?(?:\s+of\s+\d+)?"
    r"|\(\d+\)",  # an equation's number: "(3)"
    re.IGNORECASE,
)
# A count is a whole number standing alone: not "1.5", "-0.5", "10^-9" nor "x2".
_ANY = re.compile(r"\d+(?:[.,]\d+)*")
_ALPHA = re.compile(r"[^\W\d_]+")
_WHOLE = re.compile(r"(?<![\w.\-−^])\d{1,3}(?:,\d{3})+(?![\w.]\d)|(?<![\w.\-−^])\d+(?![\w.,]\d)")
_YEAR = re.compile(r"\b(?:1[5-9]|20)\d\d\b")
_MONTH = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d", re.IGNORECASE
)


_COUNTED = re.compile(
    r"\bhow many\s+(.+?)(?=\s+(?:do|does|did|is|are|was|were|has|have|had|can|could|will|"
    r"would|should|in|on|of|for|per|at|by)\b|[?.!,]|$)",
    re.IGNORECASE,
)


def counted(question: str) -> str:
    """What a "how many" question counts ("attention heads"), or ""."""
    m = _COUNTED.search(question)
    return m.group(1).strip() if m else ""


#: Keys of verbs too general to say what a question is about ("does it *use*").
_GENERIC = frozenset(key(w) for w in GENERIC_VERBS)


def question_keys(question: str) -> list[str]:
    """The question's distinct content keys, in order, general verbs left out (the roles'
    :data:`~kredenc.loop.roles.text.GENERIC_VERBS`)."""
    return [k for k in dict.fromkeys(content_keys(question)) if k not in _GENERIC]


def slots(question: str) -> frozenset[str]:
    """The slots ``question`` asks to be filled: ``count``, ``number``, ``date``, ``name``."""
    out = set()
    if _COUNT.search(question):
        out.add("count")
    elif _NUMBER.search(question):
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


def number_near(text: str, keys: Iterable[str], window: int = 6, *, whole: bool = False) -> bool:
    """Whether a number (with ``whole``, a whole number: a count) stands within
    ``window`` words of one of ``keys`` in ``text`` ("h = 8 parallel attention layers":
    8 is near "attention"), pointers to tables, sections and equations left out: the
    number a "how many X" question asks for is the one next to X."""
    wanted = set(keys)
    plain = _POINTER.sub(" ", text)
    words = [(m.start(), key(m.group().lower())) for m in _ALPHA.finditer(plain)]
    starts = [w for w, _ in words]
    found = list((_WHOLE if whole else _ANY).finditer(plain))
    numbers = [bisect.bisect(starts, m.start()) for m in found]
    near = [i for i, (_, k) in enumerate(words) if k in wanted]
    # A number between words i-1 and i sits at i - 0.5 in word order.
    if not whole:
        return any(abs(n - 0.5 - j) <= window for n in numbers for j in near)
    # A count stands before what it counts ("8 parallel attention layers", "h = 8 ...
    # heads") or is assigned to it ("warmup_steps = 4000"); a whole number just after
    # the noun is its label ("head 5", "layer 6").
    for m, n in zip(found, numbers, strict=True):
        for j in near:
            if 0 < j - (n - 0.5) <= window:
                return True
            if 0 < (n - 0.5) - j <= 2 and "=" in plain[words[j][0] : m.start()]:
                return True
    return False


def answers(text: str, slot: str, question: str) -> bool:
    """Whether ``text`` fills ``slot`` of ``question``: a count next to what is counted
    or a number next to the question's words (:func:`number_near`), a date or a name
    not already asked (:func:`fills`)."""
    if slot == "count":  # the count stands next to what is counted ("8 ... heads")
        return number_near(text, question_keys(counted(question) or question), whole=True)
    if slot == "number":
        return number_near(text, question_keys(question))
    return fills(text, slot, question)


def covered(keys: Iterable[str], texts: Iterable[str]) -> tuple[list[str], list[str]]:
    """``keys`` split into those found in ``texts`` (by content key) and those not."""
    found = set()
    for text in texts:
        found.update(content_keys(text))
    hit = [k for k in keys if k in found]
    miss = [k for k in keys if k not in found]
    return hit, miss
