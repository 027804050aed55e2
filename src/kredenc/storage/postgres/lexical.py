"""The lexical leg in PostgreSQL: FTS5's BM25, computed in SQL over ``tsvector`` cards.

``ts_rank`` and ``ts_rank_cd`` are not BM25 (no IDF, no length normalisation against
the average), and scores of another scale would change how the legs fuse. So a card
keeps its length in tokens (``cards.len``), the index keeps the card count and the
total token count (``meta``), and a query computes FTS5's own formula::

    idf(q)   = ln((N - n(q) + 0.5) / (n(q) + 0.5))      (1e-6 when not positive)
    score(D) = sum over phrases q of  idf(q) * f(q,D) * (k1 + 1)
                                      / (f(q,D) + k1 * (1 - b + b * |D| / avgdl))

with k1 = 1.2, b = 0.75, N the cards of every namespace and n(q) the cards holding
``q`` (counted through the GIN index, as FTS5 counts every namespace's cards too),
and f(q,D) the phrase's occurrences in the card's own words plus ``context_weight``
times those in its context (the tsvector's weights A and B). A multi-word phrase
counts the rarest of its words' occurrences in a card that holds the phrase.

Words: ``words`` splits and folds text the way FTS5's ``unicode61 remove_diacritics
2`` does (letters and digits, lower case, accents dropped); :class:`PorterStems` then
stems each word with FTS5's own tokenizer (``porter unicode61 remove_diacritics 2``,
through ``index.lexical.Vocabulary``), and the card's ``tsvector`` is built from those
lexemes here (:func:`tsvector`), so both backends index and query the same terms. An
index built before (``meta`` has no ``lexemes = porter``) keeps PostgreSQL's Snowball
English stemmer (:class:`Stems`; it stems a few words otherwise, e.g. ``generously``)
until ``kredenc rebuild``. A prefix phrase matches every lexeme that starts with the
stem of its text.

The namespace and the filters are bound in SQL (a join with ``records``). Which cards
are ranked follows the SQLite leg's plan (``storage/index/lexical.plan``: past
``max_scored`` matching cards, those holding the rarest phrases; its rowid windows are
not used). Past a deadline, ``statement_timeout`` stops the query and
``DeadlineExceeded`` is raised.
"""

from __future__ import annotations

import math
import re
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg

from kredenc.errors import DeadlineExceeded
from kredenc.storage.index import spelling
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import MAX_SCORED, Phrase, Plan, Vocabulary, plan
from kredenc.storage.postgres.filters import record_conditions

K1 = 1.2
B = 0.75
_WORD = re.compile(r"[^\W_]+")
_STEMS_KEPT = 50_000
#: tsvector limits: the largest position, and positions kept per lexeme.
_MAX_POS = 16383
_MAX_POSITIONS = 255


def fold(text: str) -> str:
    """Lower case without diacritics (NFKD, combining marks dropped)."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words(text: str) -> list[str]:
    """The tokens FTS5's unicode61 tokenizer makes of ``text`` (before stemming)."""
    return _WORD.findall(fold(text))


def idf(cards: int, hits: int) -> float:
    """FTS5's BM25 IDF, floored at 1e-6 as FTS5 does."""
    value = math.log((cards - hits + 0.5) / (hits + 0.5))
    return value if value > 0 else 1e-6


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


class Stems:
    """Lexemes of query words, as the ``kredenc`` configuration (Snowball) makes them
    (kept): an index built before :class:`PorterStems`."""

    porter = False

    def __init__(self) -> None:
        self._kept: dict[str, str] = {}
        self._lock = threading.Lock()

    def of(self, conn: psycopg.Connection, tokens: Sequence[str]) -> dict[str, tuple[str, ...]]:
        wanted = [t for t in dict.fromkeys(tokens) if t not in self._kept]
        if wanted:
            rows = conn.execute(
                "SELECT t, coalesce((SELECT min(lexeme) FROM"
                " unnest(to_tsvector('kredenc', t))), t) FROM unnest(%s::text[]) AS t",
                [wanted],
            ).fetchall()
            with self._lock:
                if len(self._kept) > _STEMS_KEPT:
                    self._kept.clear()
                self._kept.update({str(t): str(s) for t, s in rows})
        return {t: (self._kept.get(t, t),) for t in tokens}

    def word_terms(self, conn: psycopg.Connection, words_: Sequence[str]) -> list[str]:
        """Each word's lexeme (one word of letters each), "" for none."""
        lexemes = self.of(conn, words_)
        return [next(iter(lexemes[w]), "") for w in words_]


class PorterStems(Stems):
    """Lexemes as FTS5 makes them: each word through the SQLite cards' own tokenizer
    (``Vocabulary.stems``, kept per word). A word gives one term, rarely none or more."""

    porter = True

    def __init__(self) -> None:
        super().__init__()
        self._vocabulary = Vocabulary()

    def terms(self, tokens: Sequence[str]) -> list[str]:
        """The lexemes of ``tokens`` (from :func:`words`), in order."""
        stems = self._vocabulary.stems
        return [term for t in tokens for term in stems(t)]

    def of(self, conn: psycopg.Connection, tokens: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return {t: self._vocabulary.stems(t) for t in tokens}

    def word_terms(self, conn: psycopg.Connection, words_: Sequence[str]) -> list[str]:
        return self._vocabulary.word_stems(words_)


def tsvector(own: Sequence[str], context: Sequence[str]) -> str:
    """A ``tsvector`` (its text form) of a card's lexemes: its own words at positions
    1.. with weight A, its context's after them with weight B (what
    ``setweight(to_tsvector(own), 'A') || setweight(to_tsvector(context), 'B')`` makes
    of words that each give one lexeme)."""
    positions: dict[str, list[str]] = {}
    for pos, lexeme in enumerate(own, start=1):
        positions.setdefault(lexeme, []).append(f"{min(pos, _MAX_POS)}A")
    for pos, lexeme in enumerate(context, start=len(own) + 1):
        positions.setdefault(lexeme, []).append(f"{min(pos, _MAX_POS)}B")
    return " ".join(
        f"{_quote(lexeme)}:{','.join(list(dict.fromkeys(at))[:_MAX_POSITIONS])}"
        for lexeme, at in positions.items()
    )


def tsquery(lexemes: Sequence[str], prefix: bool) -> str:
    """A tsquery (text) matching the phrase ``lexemes`` (adjacent, in order)."""
    parts = [_quote(lex) for lex in lexemes]
    if prefix:
        parts[-1] += ":*"
    return " <-> ".join(parts)


def search(
    conn: psycopg.Connection,
    stems: Stems,
    ns: str,
    phrases: Sequence[Phrase],
    k: int,
    filters: Filters,
    *,
    context_weight: float = 0.5,
    max_scored: int = MAX_SCORED,
    deadline: float | None = None,
) -> list[tuple[int, float]]:
    """Top ``k`` (rowid, BM25) of the cards of ``ns`` that pass ``filters``, best first
    (ties by rowid). ``conn`` is in a transaction with ``kredenc.ns`` set."""
    if not phrases or k <= 0:
        return []
    tokens = [words(p.text) for p in phrases]
    lexemes = stems.of(conn, [t for ts in tokens for t in ts])
    queries: list[str] = []
    parts: list[tuple[int, str, bool]] = []  # (phrase, lexeme, prefix) per word
    for phrase, ts in zip(phrases, tokens, strict=True):
        lex = [x for t in ts for x in lexemes[t]]
        if not lex:
            continue
        queries.append(tsquery(lex, phrase.prefix))
        i = len(queries)
        parts += [(i, x, phrase.prefix and n == len(lex) - 1) for n, x in enumerate(lex)]
    if not queries:
        return []
    if deadline is not None:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise DeadlineExceeded(
                "the lexical search was stopped at its deadline", "allow it more time"
            )
        conn.execute(f"SET LOCAL statement_timeout = {max(1, int(left * 1000))}")
    try:
        return _search(conn, ns, queries, parts, k, filters, context_weight, max_scored)
    except psycopg.errors.QueryCanceled:
        raise DeadlineExceeded(
            "the lexical search was stopped at its deadline", "allow it more time"
        ) from None


def corrections(
    conn: psycopg.Connection,
    stems: Stems,
    ns: str,
    words_: Sequence[str],
    filters: Filters,
) -> dict[str, str]:
    """Each of ``words_`` that no card holds, mapped to the word one edit away that a
    card of ``ns`` passing ``filters`` holds, the most held first: the SQLite leg's
    rule (:func:`~kredenc.storage.index.spelling.nearest`) over the GIN index. ``conn``
    is in a transaction with ``kredenc.ns`` set."""
    wanted = [w for w in dict.fromkeys(words_) if spelling.correctable(w)]
    if not wanted:
        return {}
    own = stems.word_terms(conn, wanted)
    present = counts(conn, [t for t in own if t])
    absent = [w for w, t in zip(wanted, own, strict=True) if t and t not in present]
    where, args = record_conditions(filters)

    def in_scope(word: str) -> bool:
        lex = [x for t in words(word) for x in stems.of(conn, [t])[t]]
        row = conn.execute(
            "SELECT 1 FROM cards c JOIN records r ON r.rowid = c.rowid"
            " WHERE c.ns = %s AND r.ns = %s AND c.tsv @@ %s::tsquery" + where + " LIMIT 1",
            [ns, ns, tsquery(lex, False), *args],
        ).fetchone()
        return row is not None

    return spelling.nearest(
        absent, lambda ws: stems.word_terms(conn, ws), lambda ts: counts(conn, ts), in_scope
    )


def counts(conn: psycopg.Connection, lexemes: Sequence[str]) -> dict[str, int]:
    """Of ``lexemes``, those some card of any namespace holds, with how many cards do
    (as FTS5's vocabulary counts them): read from ``terms``, which every apply keeps
    (``project.count_terms``). Counting them through the GIN index instead took 20-50 ms
    for a misspelt word's few hundred candidates at 2,000 cards (each probe a pass over
    the index's pending list, then every matching card's lexemes unnested)."""
    wanted = list(dict.fromkeys(lexemes))
    if not wanted:
        return {}
    rows = conn.execute(
        "SELECT lexeme, cards FROM terms WHERE lexeme = ANY(%s::text[]) AND cards > 0",
        [wanted],
    ).fetchall()
    return {str(lex): int(n) for lex, n in rows}


def _search(
    conn: psycopg.Connection,
    ns: str,
    queries: list[str],
    parts: list[tuple[int, str, bool]],
    k: int,
    filters: Filters,
    context_weight: float,
    max_scored: int,
) -> list[tuple[int, float]]:
    any_query = " | ".join(f"({q})" for q in queries)
    counts = ", ".join("count(*) FILTER (WHERE tsv @@ %s::tsquery)" for _ in queries)
    # One round trip: every phrase's card count, and the card and token totals.
    row = conn.execute(
        f"SELECT {counts},"
        " (SELECT value FROM meta WHERE key = 'cards'),"
        " (SELECT value FROM meta WHERE key = 'tokens'),"
        " (SELECT value FROM meta WHERE key = %s)"
        " FROM cards WHERE tsv @@ %s::tsquery",
        [*queries, f"vectors\x1f{ns}", any_query],
    ).fetchone()
    assert row is not None
    hits = [int(n) for n in row[: len(queries)]]
    cards, tokens, inside = (int(v or 0) for v in row[len(queries) :])
    live = [i for i, n in enumerate(hits, start=1) if n > 0]
    if not live or cards <= 0:
        return []
    avgdl = max(tokens / cards, 1e-9)
    weights = [idf(cards, hits[i - 1]) if i in live else 0.0 for i in range(1, len(hits) + 1)]
    kept = [p for p in parts if p[0] in live]
    where, args = record_conditions(filters)
    # Per card, each query word's occurrences (weight A: its own words; B: context) from
    # the card's tsvector: exact words by a hash join, prefixes by starts_with; a word of
    # a multi-word phrase counts only in a card that holds the whole phrase.
    tf = (
        " SELECT cand.rowid, q.i, q.lex, sum(cardinality(u.positions)"
        " - cardinality(array_positions(u.weights, 'B'))"
        " + %s * cardinality(array_positions(u.weights, 'B'))) AS f"
        " FROM cand CROSS JOIN LATERAL unnest(cand.tsv) AS u JOIN q ON {join}"
        " WHERE NOT q.multi OR cand.tsv @@ (%s::tsquery[])[q.i]"
        " GROUP BY cand.rowid, q.i, q.lex"
    )
    sql = (
        "WITH q AS (SELECT * FROM unnest(%s::int[], %s::text[], %s::bool[], %s::bool[])"
        " AS q(i, lex, pre, multi)),"
        " cand AS (SELECT c.rowid, c.len, c.tsv FROM cards c JOIN records r"
        " ON r.rowid = c.rowid WHERE c.ns = %s AND r.ns = %s AND c.tsv @@ %s::tsquery"
        + where
        + "),"
        " tf AS ("
        + tf.format(join="u.lexeme = q.lex AND NOT q.pre")
        + " UNION ALL"
        + tf.format(join="q.pre AND starts_with(u.lexeme, q.lex)")
        + "),"
        " phrase AS (SELECT rowid, i, min(f) AS f FROM tf GROUP BY rowid, i)"
        " SELECT p.rowid, sum((%s::float8[])[p.i] * p.f * %s"
        " / (p.f + %s * (1 - %s + %s * c.len / %s))) AS score"
        " FROM phrase p JOIN cand c USING (rowid) GROUP BY p.rowid"
        " ORDER BY score DESC, p.rowid LIMIT %s"
    )
    words_of = Counter(p[0] for p in kept)
    params: list[Any] = [
        [p[0] for p in kept],
        [p[1] for p in kept],
        [p[2] for p in kept],
        [words_of[p[0]] > 1 for p in kept],
        ns,
        ns,
        " | ".join(f"({queries[i - 1]})" for i in live),
        *args,
        float(context_weight),
        queries,
        float(context_weight),
        queries,
        weights,
        K1 + 1,
        K1,
        B,
        B,
        avgdl,
        k,
    ]
    # The SQLite leg's plan (``index.lexical.plan``): past ``max_scored`` matching cards,
    # only cards holding the rarest phrases are ranked (scored with every phrase),
    # relaxed until ``k`` are found. A namespace of at most ``max_scored`` cards is
    # ranked exactly. Phrases stand in as their numbers.
    if 0 < inside <= max_scored:
        max_scored = 0
    current: Plan | None = plan(
        [Phrase(str(i)) for i in live], [hits[i - 1] for i in live], max_scored
    )
    held = 6  # the position of the candidate tsquery in ``params``
    assert params[held] == " | ".join(f"({queries[i - 1]})" for i in live)
    ranked: list[tuple[int, float]] = []
    while current is not None and current.required:
        # A plan that holds fewer than k cards at most cannot fill k: skip its query.
        relaxed = current.relaxed()
        if current.held_estimate() < k and relaxed is not None and relaxed.required:
            current = relaxed
            continue
        joiner = " & " if current.all_of else " | "
        params[held] = joiner.join(f"({queries[int(p.text) - 1]})" for p in current.required)
        rows = conn.execute(sql, params).fetchall()
        ranked = [(int(r), float(s)) for r, s in rows if s is not None and float(s) > 0]
        if len(ranked) >= k:
            return ranked
        current = current.relaxed()
    return ranked
