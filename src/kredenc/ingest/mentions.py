"""Links between passages by title mention: ``a mentions b`` when a's text names b's title.

Encyclopedic corpora (Wikipedia paragraphs, wikis, notes named after their subject)
link implicitly: the paragraph that answers the second half of a question is usually
the one whose title the first paragraph mentions. Filing those links as ``mentions``
edges gives graph expansion something to walk.

Matching is whole-word and case-insensitive, over the same word tokens the lexical
leg uses (``retrieve.terms.tokens``), so "Al-Hilal" matches "al hilal". A trailing
parenthetical disambiguator ("Lilu (mythology)") is dropped before matching, as a
text names the subject, not the disambiguator. A title is not linkable when it is
shorter than two characters, has no letter, or is a single stopword. A passage never
links to itself or to a passage of the same title (the same subject, not a mention),
and keeps at most ``max_per_doc`` targets, in the order they first appear in its
text (longest title first at the same position).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kredenc.retrieve.terms import STOPWORDS_EN, tokens

_DISAMBIGUATOR = re.compile(r"\s*\([^()]*\)\s*$")
MAX_TITLE_TOKENS = 12


@dataclass(frozen=True)
class Titled:
    """One passage: its id, its title ('' for none) and the text to look for mentions in."""

    id: str
    title: str
    text: str


def title_key(title: str) -> tuple[str, ...] | None:
    """The token sequence a mention of ``title`` must contain, or None when it is not
    linkable (too short, no letter, a lone stopword, or too long to be a name)."""
    surface = _DISAMBIGUATOR.sub("", title).strip() or title.strip()
    if len(surface) < 2:
        return None
    key = tuple(tokens(surface))
    if not key or len(key) > MAX_TITLE_TOKENS:
        return None
    if not any(ch.isalpha() for tok in key for ch in tok):
        return None
    if len(key) == 1 and key[0] in STOPWORDS_EN:
        return None
    return key


def mention_pairs(
    passages: Sequence[Titled],
    *,
    targets: Sequence[Titled] | None = None,
    max_per_doc: int = 10,
) -> list[tuple[str, str]]:
    """(source id, target id) for every passage whose text mentions another's title.

    Titles come from ``targets`` (default: the passages themselves; a document's lead
    chunk, say, when every chunk of it is a passage). Several targets may share a
    title (MuSiQue repeats them): a mention links to each, within the bound.
    """
    if max_per_doc <= 0:
        return []
    by_key: dict[tuple[str, ...], list[str]] = {}
    for t in passages if targets is None else targets:
        key = title_key(t.title) if t.title else None
        if key is not None:
            by_key.setdefault(key, []).append(t.id)
    if not by_key:
        return []
    longest = max(len(k) for k in by_key)
    firsts = {k[0] for k in by_key}
    out: list[tuple[str, str]] = []
    for p in passages:
        own_key = title_key(p.title) if p.title else None
        own = set(by_key.get(own_key, ())) if own_key is not None else set()
        words = tokens(p.text)
        found: dict[str, None] = {}
        for i, word in enumerate(words):
            if word not in firsts:
                continue
            for n in range(min(longest, len(words) - i), 0, -1):
                for target in by_key.get(tuple(words[i : i + n]), ()):
                    if target != p.id and target not in own:
                        found.setdefault(target, None)
            if len(found) >= max_per_doc:
                break
        out.extend((p.id, t) for t in list(found)[:max_per_doc])
    return out
