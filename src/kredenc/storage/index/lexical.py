"""The lexical leg: BM25 over the FTS5 cards, bounded in how many cards it scores.

FTS5 scores every card that its expression matches before it can sort them, and a
question of a few common words matches thousands of cards in a large store (about
5,000 of 100,000 at the median of the benchmark's questions): scoring them is what a
lexical search costs. So each query is planned from its phrases' document frequencies,
read from an ``fts5vocab`` table after stemming each phrase with the cards' own
tokenizer (see :class:`Vocabulary`):

* A phrase that matches no card is dropped: it adds nothing to any score.
* When the phrases match at most ``max_scored`` cards together, one ``OR`` query ranks
  them all: the exact BM25 top ``k``.
* Otherwise the rarest phrases whose cards stay within the bound together are
  *required* and the others only *score* (the common-terms query of Lucene): a card
  must hold a required phrase to be ranked, and is scored with every phrase. Two
  queries split those cards, ``R AND C`` and ``R NOT C`` (one query cannot do it:
  FTS5 reports no phrase instances from a branch of an expression that did not
  match); both carry every phrase, so their BM25 scores share one scale and the
  merge is the exact top ``k`` of the cards that hold a required phrase. Cards that
  hold only common phrases are not ranked: that is the approximation, measured in
  docs/benchmarks.md. When every phrase is common (even the rarest is past the
  bound), a card must hold the two rarest together. When fewer than ``k`` cards are
  held, the plan is relaxed (:meth:`Plan.relaxed`) until ``k`` are or none is left.
* A plan that still holds more than twice ``max_scored`` cards (one common word
  alone, or the two rarest of common words together) is ranked over the newest cards
  first: a rowid window where about ``max_scored`` of its cards are, widened fourfold
  until ``k`` come back (:func:`windows`). FTS5 seeks its doclists to the window, so
  the cost stays bounded (a one-word query whose word is in half of 100,000 cards
  took ~150 ms unbounded). Up to twice the bound a plan is ranked whole: a relaxed
  plan that fills a deep ``k`` lands just past the bound, and SciFact's Recall@100
  fell 0.003 when those were windowed. The ranking inside a window is exact; an
  older card that would outrank the window's is the approximation, and recency the
  tie-breaker.

The namespace and the other filters are bound in SQL (a join with ``records``). The
namespace's and drawer's scope tokens go into the FTS5 expression only when they
narrow the cards a lot: FTS5 computes every phrase's IDF with a pass over its whole
doclist, in every query, and a scope token that covers most of the index would cost a
pass over most of it. A scope that narrows to at most ``max_scored`` cards is ranked
exactly: the query can score no card outside it. Ranking happens inside FTS5
(``ORDER BY rank LIMIT``); the filters are applied to what it returns, deeper until
``k`` cards pass or none are left.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from kredenc.errors import DeadlineExceeded
from kredenc.storage.index import spelling
from kredenc.storage.index.filters import Filters, record_conditions

TOKENIZE = "porter unicode61 remove_diacritics 2"
#: Default bound on the cards a lexical query scores (see the module doc); 0: no bound.
MAX_SCORED = 2000
# A scope token goes into the expression when it keeps at most this share of the cards.
_SCOPE_SHARE = 0.5
_STEM_CACHE = 50_000
# Walking a doclist costs about a tenth of scoring a card (measured at 100k cards).
_WALK_RATIO = 10
# A plan holding more than this many times max_scored cards is ranked in windows.
_WINDOW_PAST = 2
_TOP = "\U0010ffff"
# The term set is caught up with the cards added since it was read while they are at
# most 1/_TERMS_CATCH_UP of all: stemming a card's text costs ~30x reading its postings
# from fts5vocab (1-3 us a token against 0.05 us a posting), so past that share it is
# read whole again.
_TERMS_CATCH_UP = 32
# SQLite virtual-machine steps between checks of a search's deadline.
_PROGRESS_STEPS = 2000


@dataclass(frozen=True)
class Phrase:
    """One query phrase: a word (quoted, so never FTS5 syntax); ``prefix`` phrases
    match every word that starts with it."""

    text: str
    prefix: bool = False

    def __str__(self) -> str:
        return self.text + ("*" if self.prefix else "")

    def fts(self) -> str:
        return '"' + self.text.replace('"', '""') + '"' + ("*" if self.prefix else "")


def any_of(phrases: Sequence[Phrase]) -> str:
    """An FTS5 expression matching any of ``phrases``."""
    return " OR ".join(p.fts() for p in phrases)


class Vocabulary:
    """How many cards hold a phrase, as FTS5 counts them (after its porter stemming).

    Stems come from a private in-memory FTS5 table with the cards' tokenizer (so they
    are FTS5's own). Counts come from an ``fts5vocab`` table over the cards; FTS5 counts
    by walking the word's doclist, so a count is kept until the cards have grown by a
    tenth since it was taken (it only steers the plan). A word that was in no card is
    looked up again every time: dropping a phrase needs a current zero.

    Spelling corrections look up hundreds of candidate terms at a time, which
    ``fts5vocab`` answers by walking each term's doclist; they are answered from
    the index's term counts, kept in memory (:meth:`known`).
    """

    def __init__(self) -> None:
        self._local = threading.local()
        self._stems: dict[str, tuple[str, ...]] = {}
        self._word_stems: dict[str, str] = {}  # one word -> its term (word_stems)
        self._counts: dict[tuple[str, bool], tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._terms: dict[str, int] | None = None
        self._terms_through = 0
        self._terms_lock = threading.Lock()

    def known(self, conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
        """Those of ``terms`` in the index's term set, with how many cards hold each:
        every term a card held when the set was read (whole from ``fts5vocab`` the
        first time, about 0.05-0.1 s at 100,000 cards, as it walks every doclist),
        caught up on each call by stemming the cards added since (read whole again when
        they are more than 1/:data:`_TERMS_CATCH_UP` of all: after a bulk ingest,
        re-reading is the cheaper). Removals are not subtracted: until the set is read
        again a count may exceed the cards holding the term now (one whose last card
        was removed keeps its count; a correction checks the caller's cards for the
        word it offers anyway), and a card that reuses a purged record's rowid is
        missed."""
        top = card_count(conn)
        with self._terms_lock:
            if self._terms is None or (top - self._terms_through) * _TERMS_CATCH_UP > top:
                self._vocab_table(conn)
                rows = conn.execute("SELECT term, doc FROM temp.kredenc_cards_vocab")
                self._terms = {str(t): int(d) for t, d in rows if d}
            elif top > self._terms_through:
                rows = conn.execute(
                    "SELECT card, context FROM cards WHERE rowid > ? AND rowid <= ?",
                    (self._terms_through, top),
                )
                for term, cards in self._text_terms([f"{a or ''} {b or ''}" for a, b in rows]):
                    self._terms[term] = self._terms.get(term, 0) + cards
            self._terms_through = top
            held = self._terms
            return {t: held[t] for t in terms if t in held}

    def load(self, conn: sqlite3.Connection) -> int:
        """Read (or catch up) the term set now, as :meth:`known` would; its size."""
        self.known(conn, ())
        return len(self._terms or {})

    def _text_terms(self, texts: Sequence[str]) -> list[tuple[str, int]]:
        """The distinct index terms of ``texts``, each with how many of them hold it."""
        if not texts:
            return []
        conn = self._stemmer()
        conn.executemany("INSERT INTO q(t) VALUES (?)", [(t,) for t in texts])
        try:
            return [(str(t), int(d)) for t, d in conn.execute("SELECT term, doc FROM qr")]
        finally:
            conn.execute("DELETE FROM q")

    def doc_freqs(
        self, conn: sqlite3.Connection, phrases: Sequence[Phrase], cards: int | None = None
    ) -> list[int]:
        """An upper bound on the cards each phrase matches, up to the growth of the
        index since a count was kept; 0 means it matches none now. ``cards``: the
        caller's :func:`card_count`, if it has one."""
        self._vocab_table(conn)
        if cards is None:
            cards = card_count(conn)
        out: list[int] = []
        for phrase in phrases:
            stems = self.stems(phrase.text)
            if not stems:
                out.append(0)
                continue
            counts = [self._count(conn, stem, False, cards) for stem in stems[:-1]]
            counts.append(self._count(conn, stems[-1], phrase.prefix, cards))
            out.append(min(counts))
        return out

    def _count(self, conn: sqlite3.Connection, stem: str, prefix: bool, cards: int) -> int:
        kept = self._counts.get((stem, prefix))
        if kept is not None and cards <= kept[1] + kept[1] // 10:
            return kept[0]
        if prefix:
            row = conn.execute(
                "SELECT coalesce(sum(doc), 0) FROM temp.kredenc_cards_vocab"
                " WHERE term >= ? AND term < ?",
                (stem, stem + _TOP),
            ).fetchone()
        else:
            row = conn.execute(
                "SELECT doc FROM temp.kredenc_cards_vocab WHERE term = ?", (stem,)
            ).fetchone()
        count = int(row[0]) if row else 0
        if count > 0:
            with self._lock:
                if len(self._counts) >= _STEM_CACHE:
                    self._counts.clear()
                self._counts[(stem, prefix)] = (count, cards)
        return count

    def forget(self, conn: sqlite3.Connection) -> None:
        """Before closing ``conn`` (on this thread): a later connection that gets its
        id must not pass for one that has the vocabulary table."""
        getattr(self._local, "vocab", set()).discard(id(conn))

    def _vocab_table(self, conn: sqlite3.Connection) -> None:
        done: set[int] = getattr(self._local, "vocab", set())
        if id(conn) in done:
            return
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kredenc_cards_vocab"
            " USING fts5vocab(main, cards, 'row')"
        )
        done.add(id(conn))
        self._local.vocab = done

    def word_stems(self, words: Sequence[str]) -> list[str]:
        """The index term of each of ``words`` (each one word of ASCII letters, which
        FTS5 makes one term of): those not kept yet in one pass of the stemmer, then
        kept (a misspelt word's ~400 candidates come back with the word, turn after
        turn of a chat, and stemming them took ~0.7 ms)."""
        got = {w: self._word_stems.get(w) for w in words}
        missing = [w for w, term in got.items() if term is None]
        if missing:
            conn = self._stemmer()
            conn.execute("INSERT INTO q(rowid, t) VALUES (1, ?)", (" ".join(missing),))
            try:
                rows = conn.execute("SELECT offset, term FROM qv").fetchall()
            finally:
                conn.execute("DELETE FROM q")
            at = {int(o): str(t) for o, t in rows}
            fresh = {w: at.get(i, "") for i, w in enumerate(missing)}
            with self._lock:
                if len(self._word_stems) + len(fresh) > _STEM_CACHE:
                    self._word_stems.clear()
                self._word_stems.update(fresh)
            got.update(fresh)
        return [got[w] or "" for w in words]

    def _stemmer(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "stemmer", None)
        if conn is None:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.execute(f"CREATE VIRTUAL TABLE q USING fts5(t, tokenize = '{TOKENIZE}')")
            conn.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, 'instance')")
            conn.execute("CREATE VIRTUAL TABLE qr USING fts5vocab(q, 'row')")
            self._local.stemmer = conn
        return conn

    def stems(self, text: str) -> tuple[str, ...]:
        """The index terms FTS5 makes of ``text``, in order."""
        found = self._stems.get(text)
        if found is not None:
            return found
        conn = self._stemmer()
        conn.execute("INSERT INTO q(rowid, t) VALUES (1, ?)", (text,))
        try:
            rows = conn.execute("SELECT term FROM qv ORDER BY offset").fetchall()
        finally:
            conn.execute("DELETE FROM q")
        found = tuple(str(r[0]) for r in rows)
        with self._lock:
            if len(self._stems) >= _STEM_CACHE:
                self._stems.clear()
            self._stems[text] = found
        return found


_COLS = "{card context}"


@dataclass(frozen=True)
class Plan:
    """Which cards a query ranks: those holding any of ``required`` (all of them when
    ``all_of``); each is scored with ``required`` and ``scoring`` (rarest first)."""

    required: tuple[Phrase, ...]
    scoring: tuple[Phrase, ...] = ()
    all_of: bool = False
    freqs: Mapping[Phrase, int] = field(default_factory=dict, compare=False, repr=False)

    def held(self) -> str:
        """The FTS5 expression for the cards this plan ranks."""
        joined = (" AND " if self.all_of else " OR ").join(p.fts() for p in self.required)
        return f"{_COLS} : ({joined})"

    def held_estimate(self) -> int:
        """At most how many cards this plan holds."""
        counts = [self.freqs.get(p, 0) for p in self.required]
        return min(counts) if self.all_of else sum(counts)

    def cards(self, phrases: Sequence[Phrase]) -> int:
        """How many cards ``phrases`` match together, at most (their counts added)."""
        return sum(self.freqs.get(p, 0) for p in phrases)

    def relaxed(self) -> Plan | None:
        """The next plan when fewer than ``k`` cards are held: any of the two rarest
        instead of both, else the next rarest phrase required too; None at the end."""
        if self.all_of:
            return Plan(self.required[:1], (*self.required[1:], *self.scoring), freqs=self.freqs)
        if not self.scoring:
            return None
        return Plan((*self.required, self.scoring[0]), self.scoring[1:], freqs=self.freqs)


def plan(phrases: Sequence[Phrase], freqs: Sequence[int], max_scored: int) -> Plan:
    """The plan for ``phrases`` with document frequencies ``freqs``; phrases that
    match nothing are dropped.

    Every phrase is required when they match at most ``max_scored`` cards together (or
    ``max_scored`` is 0); otherwise the rarest are, as many as fit in the bound. When
    even the rarest is past the bound (every word is common), the cards must hold both
    of the two rarest. Every live phrase scores.
    """
    live = [(p, f) for p, f in zip(phrases, freqs, strict=True) if f > 0]
    counts = dict(live)
    if max_scored <= 0 or sum(f for _, f in live) <= max_scored:
        return Plan(tuple(p for p, _ in live), freqs=counts)
    live.sort(key=lambda t: t[1])  # stable: equally rare phrases keep the query's order
    ordered = tuple(p for p, _ in live)
    if live[0][1] > max_scored and len(live) >= 2:
        count, all_of = 2, True
    else:
        total = count = 0
        for _, freq in live:
            if count and total + freq > max_scored:
                break
            total += freq
            count += 1
        all_of = False
    return Plan(ordered[:count], ordered[count:], all_of, counts)


def search(
    conn: sqlite3.Connection,
    vocabulary: Vocabulary,
    ns: str,
    phrases: Sequence[Phrase],
    k: int,
    filters: Filters,
    *,
    scopes: dict[str, str],
    context_weight: float = 0.5,
    max_scored: int = MAX_SCORED,
    deadline: float | None = None,
) -> list[tuple[int, float]]:
    """Top ``k`` (rowid, BM25) of the cards of ``ns`` that pass ``filters``.

    ``scopes`` maps the namespace (key ``"ns"``) and the drawer filter, if any
    (``"drawer"``), to their scope tokens in the cards' ``scope`` column.
    ``deadline`` (a ``time.perf_counter()`` value): SQLite interrupts the search once
    it has passed, and :class:`~kredenc.errors.DeadlineExceeded` is raised. ``conn``
    must be this thread's own connection (its progress handler is set meanwhile).
    """
    if not phrases or k <= 0:
        return []
    if deadline is None:
        return _search(
            conn, vocabulary, ns, phrases, k, filters, scopes, context_weight, max_scored
        )
    conn.set_progress_handler(lambda: time.perf_counter() > deadline, _PROGRESS_STEPS)
    try:
        return _search(
            conn, vocabulary, ns, phrases, k, filters, scopes, context_weight, max_scored
        )
    except sqlite3.OperationalError as exc:
        if "interrupt" in str(exc) and time.perf_counter() > deadline:
            raise DeadlineExceeded(
                "the lexical search was stopped at its deadline", "allow it more time"
            ) from None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def _search(
    conn: sqlite3.Connection,
    vocabulary: Vocabulary,
    ns: str,
    phrases: Sequence[Phrase],
    k: int,
    filters: Filters,
    scopes: dict[str, str],
    context_weight: float,
    max_scored: int,
) -> list[tuple[int, float]]:
    scope_phrases = [Phrase(token) for token in scopes.values()]
    total = card_count(conn)
    freqs = vocabulary.doc_freqs(conn, [*scope_phrases, *phrases], total)
    scope_freqs, freqs = freqs[: len(scope_phrases)], freqs[len(scope_phrases) :]
    if any(f == 0 for f in scope_freqs):
        return []  # no card in this namespace (or drawer)
    narrowing = [
        (p.fts(), f)
        for p, f in zip(scope_phrases, scope_freqs, strict=True)
        if f <= total * _SCOPE_SHARE
    ]
    prefix = f"scope : ({' AND '.join(t for t, _ in narrowing)}) AND " if narrowing else ""
    # A query narrowed to a scope scores only the scope's cards: at most ``inside``.
    inside = min((f for _, f in narrowing), default=total)
    if 0 < inside <= max_scored:
        max_scored = 0  # few enough to rank every match exactly
    rank = f"bm25(1.0, {float(context_weight)!r}, 0.0)"
    current: Plan | None = plan(phrases, freqs, max_scored)
    ranked: list[tuple[int, float]] = []
    while current is not None and current.required:
        for low in windows(total, min(current.held_estimate(), inside), max_scored, k):
            ranked = _bounded(conn, ns, prefix, current, rank, k, filters, low)
            if len(ranked) >= k:
                return ranked
        current = current.relaxed()  # fewer than k cards are held: hold more
    return ranked


def corrections(
    conn: sqlite3.Connection,
    vocabulary: Vocabulary,
    ns: str,
    words: Sequence[str],
    filters: Filters,
    *,
    scopes: dict[str, str],
) -> dict[str, str]:
    """Each of ``words`` that no card holds, mapped to the word one edit away that a
    card of ``ns`` passing ``filters`` holds, the most held first
    (:func:`~kredenc.storage.index.spelling.nearest`); words that are held, short, or
    have no such neighbour are left out. ``scopes`` as for :func:`search`."""
    wanted = [w for w in dict.fromkeys(words) if spelling.correctable(w)]
    if not wanted:
        return {}
    freqs = vocabulary.doc_freqs(conn, [Phrase(w) for w in wanted])
    where, args = record_conditions(filters)
    scope = " AND ".join(Phrase(token).fts() for token in scopes.values())

    def counts(terms: Sequence[str]) -> dict[str, int]:
        return vocabulary.known(conn, terms)

    def in_scope(word: str) -> bool:
        match = f"scope : ({scope}) AND {_COLS} : ({Phrase(word).fts()})"
        row = conn.execute(
            "SELECT 1 FROM cards JOIN records r ON r.rowid = cards.rowid"
            " WHERE cards MATCH ? AND +r.ns = ?" + where + " LIMIT 1",
            (match, ns, *args),
        ).fetchone()
        return row is not None

    absent = [w for w, freq in zip(wanted, freqs, strict=True) if freq == 0]
    return spelling.nearest(absent, vocabulary.word_stems, counts, in_scope)


def windows(total: int, held: int, max_scored: int, k: int) -> Iterator[int]:
    """The rowids a plan holding about ``held`` of ``total`` cards is ranked above,
    newest window first: all of them (0) when ``held`` is within twice ``max_scored``;
    else the newest cards where about ``max_scored`` are held, then four times as
    many, and so on to all of them, until one has ``k`` results."""
    span = total
    if max_scored > 0 and held > _WINDOW_PAST * max_scored:
        span = max(k, total * max_scored // held)
    while span < total:
        yield total - span
        span *= 4
    yield 0


def _bounded(
    conn: sqlite3.Connection,
    ns: str,
    prefix: str,
    plan: Plan,
    rank: str,
    k: int,
    filters: Filters,
    low: int = 0,
) -> list[tuple[int, float]]:
    """The top ``k`` of the cards ``plan`` holds, scored with every phrase."""
    held = prefix + plan.held()
    if not plan.scoring:
        return _ranked(conn, ns, held, rank, k, filters, low)
    scoring = f"{_COLS} : ({any_of(plan.scoring)})"
    ranked = _ranked(conn, ns, f"{held} AND {scoring}", rank, k, filters, low)
    if plan.cards(plan.scoring) <= _WALK_RATIO * plan.cards(plan.required):
        # The held cards without a scoring phrase, scored with every phrase: with the
        # first query, they split the held cards, and the scores share one scale.
        ranked += _ranked(conn, ns, f"{held} NOT {scoring}", rank, k, filters, low)
    else:
        # Scoring phrases whose doclists are long to walk: rank every held card by the
        # held phrases alone instead, and keep each card's better score. A card without
        # a scoring phrase scores the same both ways; one with a scoring phrase that the
        # first query ranks below its top k is below k cards that score more anyway.
        best = dict(ranked)
        for rowid, score in _ranked(conn, ns, held, rank, k, filters, low):
            best[rowid] = max(score, best.get(rowid, score))
        ranked = list(best.items())
    ranked.sort(key=lambda t: (-t[1], t[0]))
    return ranked[:k]


def card_count(conn: sqlite3.Connection) -> int:
    """About how many cards there are (the largest rowid: O(1), never too small)."""
    row = conn.execute("SELECT max(rowid) FROM records").fetchone()
    return int(row[0] or 0)


def _ranked(
    conn: sqlite3.Connection,
    ns: str,
    match: str,
    rank: str,
    k: int,
    filters: Filters,
    low: int = 0,
) -> list[tuple[int, float]]:
    """The best ``k`` cards for ``match`` that pass the namespace and ``filters``:
    ranked inside FTS5, checked against ``records``, deeper until ``k`` pass."""
    where, args = record_conditions(filters)
    limit = 2 * k
    while True:
        rows = conn.execute(
            "SELECT rowid, rank FROM cards WHERE cards MATCH ? AND rowid > ? AND rank MATCH ?"
            " ORDER BY rank LIMIT ?",
            (match, low, rank, limit),
        ).fetchall()
        if not rows:
            return []
        marks = ",".join("?" * len(rows))
        ok = {
            int(r[0])
            for r in conn.execute(
                f"SELECT r.rowid FROM records r WHERE r.rowid IN ({marks}) AND +r.ns = ?" + where,
                (*(r for r, _ in rows), ns, *args),
            )
        }
        kept = [(int(r), -float(s)) for r, s in rows if r in ok]
        if len(kept) >= k or len(rows) < limit:
            return kept[:k]
        limit *= 4
