"""Turning user text into safe FTS5 queries.

User text never becomes FTS5 syntax: it is cut into word tokens the way FTS5's
``unicode61`` tokenizer cuts it, and each token is double-quoted (a quoted string is
always a plain phrase to FTS5). Operators such as ``NOT``, ``NEAR``, ``*``, ``:`` or
``^`` in the input are thus only ever words or separators.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Sequence

from kredenc.storage.index.lexical import Phrase, any_of

# ASCII letters and digits; FTS5's unicode61 treats everything else (underscore
# included) as a separator.
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9]+")

STOPWORDS_EN = frozenset(
    """
        a about above after again against all am an and any are as at be because been
        before being below between both but by can could did do does doing down during
        each few for from further had has have having he her here hers herself him
        himself his how i if in into is it its itself just me more most my myself no nor
        not now of off on once only or other our ours ourselves out over own same she
        should so some such than that the their theirs them themselves then there these
        they this those through to too under until up very was we were what when where
        which while who whom why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905
)

MAX_TERMS = 64


def _in_token(ch: str) -> bool:
    """Letters and digits, and also combining marks and private-use characters.

    A mark stays inside its word ("nai\u0308ve", or "i\u0307" from lower-casing "İ"):
    FTS5 folds diacritics away (``remove_diacritics 2``) and splits the rest itself
    inside the quoted phrase, so the word still matches. Cutting at the mark would
    search for "nai" and "ve". FTS5 also keeps private-use characters (``Co``) in tokens.
    """
    if ch.isalnum():
        return True
    category = unicodedata.category(ch)
    return category[0] == "M" or category == "Co"


def has_prefix(ordered: Sequence[str], prefix: str) -> bool:
    """Whether a word of ``ordered`` (sorted) starts with ``prefix``: the words that do
    sort together from ``prefix`` on, so one binary search answers what a scan of every
    word would."""
    i = bisect.bisect_left(ordered, prefix)
    return i < len(ordered) and ordered[i].startswith(prefix)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens, in order.

    Idempotent: quoting the tokens and cutting again gives the same tokens.
    """
    if text.isascii():
        return [t.lower() for t in _ASCII_TOKEN.findall(text)]
    out: list[str] = []
    start = -1
    for i, ch in enumerate(text):
        if _in_token(ch):
            if start < 0:
                start = i
        elif start >= 0:
            out.append(text[start:i].lower())
            start = -1
    if start >= 0:
        out.append(text[start:].lower())
    return out


# An English clitic after an apostrophe ("user's", "don't", "we'll"): FTS5 cuts it off
# as a word of its own ("s", "t", "ll"), which would match every card with a possessive.
_CLITIC = re.compile(r"(?<=[^\W_])['’ʼ](?:s|t|d|ll|m|re|ve)(?![^\W_])", re.IGNORECASE)


def words(text: str) -> list[str]:
    """The word tokens of a query (:func:`tokens`), without English clitics: "the
    user's mother" is "the", "user", "mother", never "s".

    Only the query side drops them. The cards keep FTS5's own cut ("user's" is
    "user" and "s" there): the card "user" matches the query's "user", and no query
    term is a lone clitic any more, so the "s" tokens of the cards match nothing.
    """
    return tokens(_CLITIC.sub("", text))


def query_terms(text: str, *, stopwords: frozenset[str] = STOPWORDS_EN) -> list[str]:
    """Distinct words worth searching for (:func:`words`; stopwords dropped unless
    nothing else is left)."""
    seen: dict[str, None] = {}
    all_tokens = words(text)
    for tok in all_tokens:
        if tok not in stopwords:
            seen.setdefault(tok, None)
    if not seen:
        for tok in all_tokens:
            seen.setdefault(tok, None)
    return list(seen)[:MAX_TERMS]


def pair_phrases(text: str, *, gap: int = 2, limit: int = 16) -> list[str]:
    """Each two neighbouring content words of ``text`` as one phrase, with the stopwords
    or single letters between them (at most ``gap``): "first for women", "arthur s
    magazine", cut as FTS5 cuts the cards, so a card holding the words in that order
    matches."""
    toks = tokens(text)
    content = [i for i, t in enumerate(toks) if t not in STOPWORDS_EN and len(t) > 1]
    out: dict[str, None] = {}
    for a, b in itertools.pairwise(content):
        if b - a - 1 <= gap:
            out.setdefault(" ".join(toks[a : b + 1]), None)
    return list(out)[:limit]


def phrases(terms: list[str]) -> list[Phrase]:
    """The lexical leg's phrases for ``terms`` (each one quoted when it reaches FTS5)."""
    return [Phrase(t) for t in terms]


def fts_match(terms: list[str]) -> str:
    """An FTS5 expression matching any of ``terms`` (each one quoted)."""
    return any_of(phrases(terms))
