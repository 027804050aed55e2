"""Search terms for the recall reflex: a few distinctive words of the newest user message.

Rules, in order: cut the message into word tokens the way FTS5 does
(:func:`kredenc.retrieve.terms.tokens`); drop stopwords (English, Hungarian and a few
words of chat filler), tokens shorter than 3 characters and duplicates; stem lightly;
keep at most 8, preferring names and numbers, then longer words, in the order they
appear.

Stemming is light on purpose. The index's FTS5 table stems English with Porter at
both ends, so English words only lose their plural ``-s`` here (two forms of one word
then count once against the 8). Porter knows no Hungarian: when a message reads as
Hungarian, common case endings and plural or accusative suffixes are cut
(``Budapesten`` -> ``budapest``) and the stem is searched as an FTS5 *prefix*
(``"budapest"*``), which finds the inflected forms filed in the index.
"""

from __future__ import annotations

import re

from kredenc.retrieve.terms import STOPWORDS_EN, tokens
from kredenc.storage.index.lexical import Phrase as Term

__all__ = [
    "CHAT_FILLER",
    "MAX_TERMS",
    "MIN_CHARS",
    "STOPWORDS_HU",
    "Term",
    "reads_hungarian",
    "recall_terms",
    "stem_en",
    "stem_hu",
]

MAX_TERMS = 8
MIN_CHARS = 3

# The NLTK/Snowball Hungarian stopword list, with pronoun and question forms added.
STOPWORDS_HU = frozenset(
    """
        a abban ahhoz ahogy ahol aki akik akkor alatt által általában amely amelyek
        amelyekben amelyeket amelyet amelynek ami amit amolyan amíg amikor annak arra
        arról át az azok azon azonban azt aztán azután azzal azért bár be belül benne
        csak de e eddig egész egy egyes egyetlen egyéb egyik egyre ekkor el elég ellen
        elő először előtt első én engem éppen ebben ehhez emilyen ennek erre és ez ezek
        ezen ezt ezzel ezért fel felé hanem hiszen hol honnan hová hogy hogyan igen így
        illetve ilyen ilyenkor is ismét itt jó jól jobban kell kellett keresztül ki kinek
        kit kívül között közül legalább legyen lehet lehetett lenne lenni lesz lett maga
        magát majd már más másik meg még mellett mennyi mert mely melyek mi mikor milyen
        mind minden mindent mindenki mindig mint mintha mire miről mit mivel miért míg
        most nagy nagyobb nagyon ne nekem neked neki nekünk nektek nem nincs nála néha
        néhány nélkül olyan ott ön önök össze ő ők őket pedig persze rá róla s saját sem
        semmi sok sokat sokkal számára szemben szerint szinte talán te tehát teljes ti
        tovább továbbá tőle több téged úgy ugyanis új újabb újra után utána utolsó vagy
        vagyis vagyok valaki valami valamint való van vannak vele veled velem vissza
        viszont volna volt voltak voltam voltunk
    """.split()  # noqa: SIM905
)

# Hungarian stopwords that are also English words (or common names): dropped only
# when the message reads as Hungarian, so "I rented a van" keeps "van".
_AMBIGUOUS_HU = frozenset(
    "aki ami ellen fel hol ide maga meg mind mint mit most nagy ott sem tehát te van".split()  # noqa: SIM905
)

# Chat filler: words of asking rather than of the thing asked about.
_FILLER_EN = frozenset(
    """
        also anything could ever get got hello hey know let may might must okay please
        really recall remember remind shall something tell thank thanks think told
        would yeah yes
    """.split()  # noqa: SIM905
)
_FILLER_HU = frozenset(
    "emlékszel emlékszem mondd mondtam mondtad kérlek köszönöm szia szerinted".split()  # noqa: SIM905
)
CHAT_FILLER = _FILLER_EN | _FILLER_HU

_EN_STOP = STOPWORDS_EN | CHAT_FILLER | (STOPWORDS_HU - _AMBIGUOUS_HU)
_HU_STOP = STOPWORDS_EN | CHAT_FILLER | STOPWORDS_HU
_HU_ONLY = STOPWORDS_HU - STOPWORDS_EN - _AMBIGUOUS_HU
_EN_ONLY = STOPWORDS_EN - STOPWORDS_HU
_HU_ACCENTS = re.compile(r"[áéíóöúüÁÉÍÓÖÚÜ]")
_HU_ONLY_LETTERS = re.compile(r"[őűŐŰ]")
_WORD = re.compile(r"\w+")

# Longest first; a suffix is cut only when at least MIN_CHARS characters remain.
_HU_SUFFIXES = tuple(
    sorted(
        """
        okat eket öket akat ként ból ből ban ben nak nek val vel ról ről tól től hoz
        hez höz nál nél ért ba be ra re ig ok ek ök ak at et ot öt on en ön án én
        """.split(),  # noqa: SIM905
        key=len,
        reverse=True,
    )
)


def reads_hungarian(words: list[str]) -> bool:
    """True when the message has more signs of Hungarian than of English.

    Signs of Hungarian: its function and filler words, and words with its accented
    letters (``ő`` and ``ű``, which only Hungarian uses, count double). Signs of
    English: its function words.
    """
    hu = 0
    for w in words:
        hu += w in _HU_ONLY or w in _FILLER_HU
        hu += 2 if _HU_ONLY_LETTERS.search(w) else bool(_HU_ACCENTS.search(w))
    en = sum(w in _EN_ONLY for w in words)
    return hu > en


def stem_en(word: str) -> str:
    """Strip an English plural ``-s``: ``meetings`` -> ``meeting``, ``ponies`` -> ``pony``.

    Porter (in the index) stems what is left the same way it stems the plural.
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith(("xes", "ches", "shes", "zes")):
        return word[:-2]
    if len(word) > MIN_CHARS and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def stem_hu(word: str) -> str:
    """Cut one common Hungarian case ending or plural/accusative suffix."""
    for suffix in _HU_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_CHARS:
            return word[: -len(suffix)]
    return word


#: Greetings and leave-takings as whole phrases: their words ("good", "morning",
#: "night") are content words elsewhere, so the phrase is dropped, not the words.
_GREETING = re.compile(
    r"\b(?:good\s+(?:morning|afternoon|evening|night|day)(?:\s+(?:to\s+you|everyone|all))?"
    r"|how\s+are\s+(?:you|things)(?:\s+doing)?(?:\s+today)?|how(?:'s|\s+is)\s+it\s+going"
    r"|what(?:'s|\s+is)\s+up|nice\s+to\s+meet\s+you|see\s+you(?:\s+(?:later|soon|tomorrow))?"
    r"|(?:hi|hello|hey)\s+there)\b",
    re.IGNORECASE,
)


def recall_terms(text: str, *, limit: int = MAX_TERMS) -> list[Term]:
    """At most ``limit`` distinct, lightly stemmed terms of ``text`` (see the module doc);
    a greeting ("good morning", "how are you") gives none."""
    words = tokens(_GREETING.sub(" ", text))
    hungarian = reads_hungarian(words)
    stop = _HU_STOP if hungarian else _EN_STOP
    names = {w.lower() for w in _WORD.findall(text) if w[0].isupper()}
    found: dict[str, tuple[Term, float]] = {}
    for position, word in enumerate(words):
        if len(word) < MIN_CHARS or word in stop:
            continue
        if hungarian:
            stem = stem_hu(word)
            term = Term(stem, prefix=True)
        else:
            stem = stem_en(word)
            term = Term(stem)
        if stem in found:
            continue
        special = word in names or any(ch.isdigit() for ch in word)
        # Names and numbers first, then longer words; earlier wins a tie.
        found[stem] = (term, (2.0 if special else 0.0) + min(len(stem), 12) / 12 - position * 1e-6)
    if len(found) > limit:
        keep = set(sorted(found, key=lambda s: -found[s][1])[:limit])
        return [t for s, (t, _) in found.items() if s in keep]
    return [t for t, _ in found.values()]
