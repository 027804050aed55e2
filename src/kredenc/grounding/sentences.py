"""Sentences of a text, with their character offsets.

A sentence ends at ``.``, ``!`` or ``?`` (and any closing quotes or brackets) followed
by whitespace and then something that can start a sentence (a capital, a digit, a
quote, a bracket, a list marker), except after an abbreviation ("e.g.", "Dr.", "U.S.",
"No. 5") or an initial ("J. Smith"). A number's decimal point never ends one ("3.14"
has no space after it). Line structure counts too: a blank line ends a sentence, and
so does a line break before a list item ("1.", "2)", "-", "*", "•"), whose marker stays
with its item. Offsets are into the original text: ``text[s.start:s.end] == s.text``,
with surrounding whitespace left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Sentence", "split"]

ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st vs etc e.g i.e cf al approx dept est fig figs no nos
    vol vols pp p ed eds inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec
    mt ft gen gov col lt sgt capt rev u.s u.k u.n a.m p.m ph.d b.a m.a b.sc m.sc""".split()  # noqa: SIM905
)

_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)")
_STARTS = re.compile(r"\s+[\"'“‘(\[]?[A-Z0-9À-ÖØ-Þ•*-]")
_LIST_ITEM = re.compile(r"\n[ \t]*(?:\d{1,3}[.)]|[-*•])[ \t]+")
_BLANK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Sentence:
    text: str
    start: int
    end: int


def _word_before(text: str, end: int) -> str:
    """The token that ends at ``end`` (the position of the stop), lower-cased."""
    start = end
    while start > 0 and not text[start - 1].isspace() and text[start - 1] not in "(\"'“":
        start -= 1
    return text[start:end].lower()


def _is_abbreviation(text: str, stop: int) -> bool:
    word = _word_before(text, stop)
    if not word:
        return False
    if word in ABBREVIATIONS:
        return True
    # An initial ("J. Smith") or a dotted acronym ("U.S.A.").
    return (len(word) == 1 and word.isalpha()) or bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))


def _cuts(text: str) -> list[int]:
    cuts: set[int] = set()
    for m in _END.finditer(text):
        end = m.end()
        if not _STARTS.match(text, end):
            continue
        if (
            text[m.start()] == "."
            and m.end() - m.start() == 1
            and _is_abbreviation(text, m.start())
        ):
            continue
        # A list marker alone ("1.") is not a sentence: it belongs to what follows.
        line_start = text.rfind("\n", 0, m.start()) + 1
        if re.fullmatch(r"[ \t]*\d{1,3}", text[line_start : m.start()]):
            continue
        cuts.add(end)
    for pattern in (_LIST_ITEM, _BLANK):
        for m in pattern.finditer(text):
            cuts.add(m.start())
    return sorted(cuts)


def split(text: str) -> list[Sentence]:
    """The sentences of ``text`` in order, stripped, with offsets (empty ones dropped)."""
    out: list[Sentence] = []
    start = 0
    for cut in [*_cuts(text), len(text)]:
        piece = text[start:cut]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            s = start + lead
            out.append(Sentence(stripped, s, s + len(stripped)))
        start = cut
    return out
