"""Turning user text into safe FTS5 queries.

User text never becomes FTS5 syntax: it is cut into word tokens the way FTS5's
``unicode61`` tokenizer cuts it, and each token is double-quoted (a quoted string is
always a plain phrase to FTS5). Operators such as ``NOT``, ``NEAR``, ``*``, ``:`` or
``^`` in the input are thus only ever words or separators.
"""

from __future__ import annotations

import re

# Letters and digits; FTS5's unicode61 treats everything else (underscore included)
# as a separator.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

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


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens, in order."""
    return [t.lower() for t in _TOKEN.findall(text)]


def query_terms(text: str, *, stopwords: frozenset[str] = STOPWORDS_EN) -> list[str]:
    """Distinct tokens worth searching for (stopwords dropped unless nothing else is left)."""
    seen: dict[str, None] = {}
    all_tokens = tokens(text)
    for tok in all_tokens:
        if tok not in stopwords:
            seen.setdefault(tok, None)
    if not seen:
        for tok in all_tokens:
            seen.setdefault(tok, None)
    return list(seen)[:MAX_TERMS]


def fts_match(terms: list[str]) -> str:
    """An FTS5 expression matching any of ``terms`` (each one quoted)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
