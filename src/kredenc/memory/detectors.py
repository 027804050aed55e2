"""The reasoning seams of the lifecycle jobs, with deterministic defaults.

Two small protocols: a :class:`ContradictionDetector` decides whether two memory
texts contradict each other, a :class:`Summariser` condenses an episode into a few
sentences. The defaults here use no model at all (rules and term statistics), so
the jobs are deterministic and cost nothing. A model-backed implementation (the
reasoning loop's LLM provider) plugs in through the same two protocols; nothing in
the jobs knows which one it got.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kredenc.grounding.conflicts import conflicts
from kredenc.grounding.words import NEGATIONS, STOPWORDS, tokens
from kredenc.grounding.words import stem as _stem


@dataclass(frozen=True)
class Contradiction:
    """Why two texts contradict: ``kind`` names the rule, ``reason`` explains it."""

    kind: str  # negation, antonym, number, date (a model detector may add its own)
    reason: str


@runtime_checkable
class ContradictionDetector(Protocol):
    def detect(self, older: str, newer: str) -> Contradiction | None:
        """The contradiction between two texts, or None when they agree or are unrelated."""
        ...


@runtime_checkable
class Summariser(Protocol):
    def summarise(self, texts: Sequence[str], *, max_chars: int = 400) -> str:
        """A summary of ``texts`` (in filing order) of at most ``max_chars`` characters."""
        ...


# -- words (the tokeniser and stemmer are grounding.words') ----------------------

_ISO_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}/\d{1,2}/\d{2,4}$")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Identifiers, not quantities: "ticket 123", "room 4", "version 2".
_ID_WORDS = _words(
    """ticket issue bug pr pull order invoice room floor no number id version v step
    page chapter section line bus flight gate platform route item case"""
)
_MONTHS = {
    name: i
    for i, names in enumerate(
        (
            "january január",
            "february feb február",
            "march március",
            "april apr április",
            "may május",
            "june jun június",
            "july jul július",
            "august aug augusztus",
            "september sep sept szeptember",
            "october oct október",
            "november nov november",
            "december dec december",
        ),
        start=1,
    )
    for name in names.split()
}
_WEEKDAYS = {
    name: i
    for i, names in enumerate(
        (
            "monday mondays hétfő hétfőn",
            "tuesday tuesdays kedd kedden",
            "wednesday wednesdays szerda szerdán",
            "thursday thursdays csütörtök csütörtökön",
            "friday fridays péntek pénteken",
            "saturday saturdays szombat szombaton",
            "sunday sundays vasárnap vasárnapon",
        ),
        start=1,
    )
    for name in names.split()
}

# Antonym concepts: each word form maps to (concept, polarity).
_ANTONYM_PAIRS = (
    ("open opens opened nyitva", "closed close closes shut nyitott zárva zárt"),
    ("on", "off"),
    ("works working work functional fixed működik", "broken broke fails failing failed"),
    ("true igaz", "false hamis"),
    ("available", "unavailable"),
    ("like likes liked love loves loved", "dislike dislikes disliked hate hates hated"),
    ("increase increases increased increasing rise rises rose", "decrease decreases decreased"),
    ("enabled enable", "disabled disable"),
    ("online", "offline"),
    ("allowed permitted", "forbidden prohibited banned"),
    ("alive living", "dead died"),
    ("valid", "invalid"),
    ("correct", "incorrect wrong"),
    ("accepted accept approved", "rejected reject declined denied"),
    ("passed pass passes", "failed fail"),
    ("active", "inactive"),
    ("visible shown", "hidden"),
    ("possible", "impossible"),
    ("legal", "illegal"),
    ("full", "empty"),
    ("hot", "cold"),
    ("cheap inexpensive", "expensive"),
    ("safe", "dangerous unsafe"),
    ("public", "private"),
    ("present", "absent"),
    ("succeeded success successful", "failure unsuccessful"),
    ("won win wins", "lost lose loses"),
    ("started start starts running", "stopped stop stops"),
    ("included", "excluded"),
)
_ANTONYMS: dict[str, tuple[str, int]] = {}
for _pos, _neg in _ANTONYM_PAIRS:
    _concept = _pos.split()[0]
    for _w in _pos.split():
        _ANTONYMS.setdefault(_w, (_concept, 1))
    for _w in _neg.split():
        _ANTONYMS.setdefault(_w, (_concept, -1))


@dataclass(frozen=True)
class _Parsed:
    negations: int
    content: frozenset[str]  # stems of words that are not stop words, numbers or dates
    polarity: dict[str, int]  # antonym concept -> +1 / -1 (0 when both forms occur)
    numbers: tuple[str, ...]  # quantities, in order
    dates: tuple[str, ...]  # dates, months and weekdays, normalised, in order


def _parse(text: str) -> _Parsed:
    toks = tokens(text)
    negations = 0
    content: set[str] = set()
    polarity: dict[str, int] = {}
    numbers: list[str] = []
    dates: list[str] = []
    for i, tok in enumerate(toks):
        prev = toks[i - 1] if i else ""
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if tok in NEGATIONS:
            negations += 1
        elif tok[0].isdigit():
            if _ISO_DATE.match(tok):
                dates.append(tok)
            elif prev in _ID_WORDS:
                content.add(tok)  # an identifier is part of what the sentence is about
            elif _is_month(prev, toks[i - 2] if i > 1 else "") and _day(tok):
                dates[-1] += f"-{int(tok)}"  # "March 3"
            elif _is_month(nxt, "") and _day(tok):
                dates.append(f"{int(tok)}")  # "3 March": the month completes it
            elif len(tok) == 4 and tok.isdigit() and 1900 <= int(tok) <= 2100:
                dates.append(f"y{tok}")
            else:
                numbers.append(tok.replace(",", "."))
        elif _is_month(tok, prev):
            month = f"m{_MONTHS[tok]}"
            if dates and prev[:1].isdigit() and dates[-1] == str(int(prev)):
                dates[-1] = f"{month}-{dates[-1]}"
            else:
                dates.append(month)
        elif tok in _WEEKDAYS:
            dates.append(f"d{_WEEKDAYS[tok]}")
        elif tok in _ANTONYMS and (tok != "on" or nxt in _ON_ENDS):
            concept, sign = _ANTONYMS[tok]
            polarity[concept] = sign if polarity.get(concept, sign) == sign else 0
        elif tok not in STOPWORDS:
            content.add(_stem(tok))
    return _Parsed(negations, frozenset(content), polarity, tuple(numbers), tuple(dates))


# "on" is a state ("the light is on") only at the end of a clause, else a preposition.
_ON_ENDS = frozenset({"", "and", "or", "but", "now", "again", "today", "all"})
# "may" is a month only where a date can stand ("in May", "on May 3", "3 May").
_MAY_BEFORE = frozenset({"in", "of", "since", "until", "by", "early", "late", "mid", "on"})


def _is_month(tok: str, prev: str) -> bool:
    if tok not in _MONTHS:
        return False
    return tok != "may" or prev in _MAY_BEFORE or prev[:1].isdigit()


def _day(tok: str) -> bool:
    return tok.isdigit() and 1 <= int(tok) <= 31


def _close(a: frozenset[str], b: frozenset[str], slack: float = 0.25) -> bool:
    """The same statement frame: few content words differ, and most are shared."""
    union = a | b
    if not union:
        return True
    differ = len(a ^ b)
    return differ <= max(1, int(slack * len(union))) and len(a & b) >= max(1, len(union) // 2)


class RuleDetector:
    """Deterministic contradiction rules for two similar texts.

    A contradiction needs the same statement frame (nearly the same content words)
    and one of: an odd number of polarity flips (negation asymmetry — "is" / "is not",
    "never", "no longer", Hungarian "nem" — and antonym swaps such as open/closed;
    a negated antonym agrees: "not open" = "closed"), or the same frame with
    different quantities, or with different dates. Identifiers ("ticket 12") are
    part of the frame, not quantities, so two tickets are two subjects.
    """

    def detect(self, older: str, newer: str) -> Contradiction | None:
        a, b = _parse(older), _parse(newer)
        swapped = [
            c for c in a.polarity.keys() & b.polarity.keys() if a.polarity[c] * b.polarity[c] < 0
        ]
        # A concept on one side only is an ordinary content word.
        only = {c for c in a.polarity.keys() ^ b.polarity.keys()}
        ca = a.content | {c for c in only if c in a.polarity}
        cb = b.content | {c for c in only if c in b.polarity}
        if not _close(frozenset(ca), frozenset(cb)):
            return None
        negation_flip = (a.negations % 2) != (b.negations % 2)
        flips = int(negation_flip) + len(swapped)
        if flips % 2 == 1:
            if swapped and not negation_flip:
                return Contradiction("antonym", f"opposite terms ({', '.join(sorted(swapped))})")
            if negation_flip and not swapped:
                return Contradiction("negation", "one statement negates the other")
            return Contradiction("negation", "negation and opposite terms disagree")
        if flips:
            return None  # e.g. "not open" vs "closed": the same claim
        # Quantities and dates compare slot by slot: an extra one is more detail.
        if a.dates and len(a.dates) == len(b.dates) and a.dates != b.dates:
            return Contradiction("date", f"different dates ({_show(a.dates)} vs {_show(b.dates)})")
        if a.numbers and len(a.numbers) == len(b.numbers) and a.numbers != b.numbers:
            return Contradiction(
                "number", f"different numbers ({_show(a.numbers)} vs {_show(b.numbers)})"
            )
        return None


class GroundedDetector:
    """The rules, then the grounding layer's conflict check
    (:func:`kredenc.grounding.conflicts.conflicts`): a word one text negates and the other
    asserts, about the same subject ("The user drinks green tea, never coffee" /
    "The user switched to black coffee in June"), kind ``polarity``. The default of the
    contradictions job."""

    def __init__(self, rules: ContradictionDetector | None = None) -> None:
        self.rules = rules or RuleDetector()

    def detect(self, older: str, newer: str) -> Contradiction | None:
        found = self.rules.detect(older, newer)
        if found is not None:
            return found
        why = conflicts(older, newer)
        return Contradiction("polarity", why) if why else None


def _show(values: tuple[str, ...]) -> str:
    return ", ".join(values)


# -- summaries -----------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _terms(sentence: str) -> frozenset[str]:
    return frozenset(
        _stem(t) for t in tokens(sentence) if t not in STOPWORDS and (len(t) > 2 or t.isdigit())
    )


class ExtractiveSummariser:
    """Picks the most central sentences of an episode (no model).

    Centrality is the cosine between a sentence's terms and the episode's term
    centroid (each term weighted by the share of memories that use it), so a
    sentence about what the episode is mostly about wins. Near-duplicates
    (term Jaccard >= ``dedup``) are skipped, and so are asides: sentences less than
    ``min_relative`` times as central as the best one. The picks keep their filing
    order.

    It never merges contradicting memories: a memory that a later one of the episode
    contradicts (``detector``, by default :class:`GroundedDetector`) is left out, so the
    summary says what holds now ("switched to black coffee in June"), not both sides.
    """

    def __init__(
        self,
        dedup: float = 0.6,
        min_relative: float = 0.5,
        detector: ContradictionDetector | None = None,
    ) -> None:
        self.dedup = dedup
        self.min_relative = min_relative
        self.detector = detector or GroundedDetector()

    def current(self, texts: Sequence[str]) -> list[str]:
        """``texts`` (in filing order) less those a later one contradicts."""
        return [
            older
            for i, older in enumerate(texts)
            if not any(self.detector.detect(older, newer) for newer in texts[i + 1 :])
        ]

    def summarise(self, texts: Sequence[str], *, max_chars: int = 400) -> str:
        if max_chars <= 0:
            return ""
        texts = self.current(texts)
        items: list[tuple[int, str, frozenset[str]]] = []
        for text in texts:
            for sentence in _sentences(text):
                items.append((len(items), " ".join(sentence.split()), _terms(sentence)))
        if not items:
            return ""
        share: dict[str, float] = {}
        for text in texts:
            for term in _terms(text):
                share[term] = share.get(term, 0.0) + 1.0 / len(texts)
        norm = math.sqrt(sum(v * v for v in share.values())) or 1.0

        def centrality(terms: frozenset[str]) -> float:
            if not terms:
                return 0.0
            return sum(share.get(t, 0.0) for t in terms) / (math.sqrt(len(terms)) * norm)

        scored = sorted(
            ((centrality(t), o, s, t) for o, s, t in items), key=lambda x: (-x[0], x[1])
        )
        floor = scored[0][0] * self.min_relative
        ranked = [(o, s, t) for c, o, s, t in scored if c >= floor]
        chosen: list[tuple[int, str, frozenset[str]]] = []
        used = 0
        for order, sentence, terms in ranked:
            if any(_jaccard(terms, t) >= self.dedup for _, _, t in chosen):
                continue
            if any(sentence == s for _, s, _ in chosen):
                continue
            text = sentence if sentence[-1] in ".!?" else sentence + "."
            extra = len(text) + (1 if chosen else 0)
            if used + extra > max_chars:
                if not chosen:
                    chosen.append((order, _cut(text, max_chars), terms))
                    break
                continue
            chosen.append((order, text, terms))
            used += extra
        chosen.sort(key=lambda it: it[0])
        return " ".join(s for _, s, _ in chosen)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def _cut(text: str, limit: int) -> str:
    """``text`` cut on a word boundary to at most ``limit`` characters, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - 1)]
    space = cut.rfind(" ")
    if space > len(cut) // 2:
        cut = cut[:space]
    return (cut.rstrip(" ,;:") + "…")[:limit]
