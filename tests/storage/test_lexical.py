"""The lexical leg's query planning: FTS5's own stems and counts, which phrases are
required, and that a bounded query ranks exactly the cards that hold a required
phrase, by every phrase, in any namespace layout."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kredenc.engine import Kredenc
from kredenc.storage.index import lexical
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import Phrase, Plan, Vocabulary, any_of, plan
from kredenc.testing.embedders import HashEmbedder

# A vocabulary with a skewed (Zipf-like) frequency: a few words are in most cards.
WORDS = [f"w{i:03d}" for i in range(60)] + ["running", "runs", "houses", "budapest"]


def card(rng: random.Random) -> str:
    n = rng.randint(3, 12)
    return " ".join(WORDS[min(int(rng.paretovariate(0.9)) - 1, len(WORDS) - 1)] for _ in range(n))


@pytest.fixture(scope="module")
def corpus_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    """600 cards in namespace "main" and 200 in "other" (same words)."""
    home = tmp_path_factory.mktemp("lexical") / "store"
    rng = random.Random(7)
    with Kredenc.open(home, "other", embedder=HashEmbedder(), durability="none") as kb:
        kb.remember_many([{"text": card(rng)} for _ in range(200)])
    kb = Kredenc.open(home, "main", embedder=HashEmbedder(), durability="none")
    kb.remember_many([{"text": card(rng), "kind": "fact" if i % 2 else "note"} for i in range(600)])
    try:
        yield kb
    finally:
        kb.close()


def brute_force(
    kb: Kredenc, ns: str, phrases: list[Phrase], k: int, held: Plan, low: int = 0
) -> list[tuple[int, float]]:
    """Every match of the namespace ranked by FTS5 (no bound), cut to the cards that
    hold a required phrase and have a rowid above ``low``."""
    everything = kb.index.lexical(ns, phrases, 100_000, Filters(), max_scored=0)
    conn = kb.index.reader()
    holding = {
        int(r[0])
        for r in conn.execute(
            "SELECT rowid FROM cards WHERE cards MATCH ? AND rowid > ?",
            (held.held(), low),
        )
    }
    return [(r, s) for r, s in everything if r in holding][:k]


def expected(
    kb: Kredenc, ns: str, phrases: list[Phrase], k: int, bound: int
) -> list[tuple[int, float]]:
    """What a bounded search must return, by brute force: each plan (relaxed while
    fewer than ``k`` are held) over each of its windows, newest first."""
    conn = kb.index.reader()
    used: Plan | None = plan(phrases, Vocabulary().doc_freqs(conn, phrases), bound)
    total = conn.execute("SELECT max(rowid) FROM records").fetchone()[0]
    want: list[tuple[int, float]] = []
    while used is not None and used.required:
        scored = [*used.required, *used.scoring]  # what the plan scores with
        for low in lexical.windows(total, used.held_estimate(), bound, k):
            want = brute_force(kb, ns, scored, k, used, low)
            if len(want) >= k:
                return want
        used = used.relaxed()
    return want


# -- phrases and their counts ----------------------------------------------------------


def test_phrase_is_always_a_quoted_fts5_string() -> None:
    terms = [Phrase('say "hi"'), Phrase("ház", prefix=True), Phrase("NEAR"), Phrase("x*y")]
    expr = any_of(terms)
    assert expr == '"say ""hi""" OR "ház"* OR "NEAR" OR "x*y"'
    assert [str(t) for t in terms] == ['say "hi"', "ház*", "NEAR", "x*y"]
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(card, tokenize='{lexical.TOKENIZE}')")
    conn.execute("INSERT INTO t(card) VALUES ('a házban near x y'), ('say hi')")
    rows = conn.execute("SELECT card FROM t WHERE t MATCH ?", (expr,)).fetchall()
    assert sorted(r[0] for r in rows) == ["a házban near x y", "say hi"]


def test_stems_are_fts5_porter_stems() -> None:
    vocab = Vocabulary()
    assert vocab.stems("running") == ("run",)
    assert vocab.stems("Houses") == ("hous",)
    assert vocab.stems("naïve café") == ("naiv", "cafe")
    assert vocab.stems("* : ( )") == ()


def test_doc_freqs_are_fts5_counts(corpus_kb: Kredenc) -> None:
    conn = corpus_kb.index.reader()
    vocab = Vocabulary()
    phrases = [Phrase(w) for w in ("w000", "w005", "run", "running", "houses", "house", "absent")]
    phrases += [Phrase("w00", prefix=True), Phrase("budapest running")]
    freqs = vocab.doc_freqs(conn, phrases)
    for phrase, freq in zip(phrases, freqs, strict=True):
        exact = conn.execute(
            "SELECT count(*) FROM cards WHERE cards MATCH ?", (phrase.fts(),)
        ).fetchone()[0]
        if phrase.prefix or " " in phrase.text:
            assert freq >= exact  # an upper bound
        else:
            assert freq == exact
    assert freqs[6] == 0  # "absent"
    assert freqs[2] > 0 and freqs[2] == freqs[3]  # "run" is "running" is "runs"
    assert freqs[4] > 0 and freqs[4] == freqs[5]


def test_plan_drops_what_matches_nothing_and_requires_the_rarest() -> None:
    a, b, c, d = (Phrase(x) for x in "abcd")
    assert plan([a, b, c], [10, 0, 20], 100) == Plan((a, c))
    assert plan([a, b, c], [10, 0, 20], 0) == Plan((a, c))  # unbounded
    assert plan([a, b, c, d], [500, 40, 900, 40], 100) == Plan((b, d), (a, c))
    assert plan([a, b, c], [500, 40, 900], 100) == Plan((b,), (a, c))  # at least one
    assert plan([a], [0], 100) == Plan(())
    # Every word common: cards must hold the two rarest together; relaxed step by step.
    every = plan([a, b, c], [5000, 4000, 9000], 100)
    assert every == Plan((b, a), (c,), all_of=True)
    assert every.held() == '{card context} : ("b" AND "a")'
    assert every.relaxed() == Plan((b,), (a, c))
    assert Plan((b,), (a, c)).relaxed() == Plan((b, a), (c,))
    assert Plan((b, a, c)).relaxed() is None
    assert plan([a], [5000], 100) == Plan((a,))  # one word: nothing to pair it with
    assert plan([a, b, c], [5, 600, 150], 100) == Plan((a,), (c, b))  # common words score


# -- bounded queries -------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6, unique=True),
    bound=st.sampled_from([0, 20, 40, 150, 400, 100_000]),
    k=st.sampled_from([1, 5, 20]),
)
def test_bounded_search_is_exact_over_cards_holding_a_required_phrase(
    corpus_kb: Kredenc, words: list[str], bound: int, k: int
) -> None:
    phrases = [Phrase(w) for w in words]
    got = corpus_kb.index.lexical("main", phrases, k, Filters(), max_scored=bound)
    want = expected(corpus_kb, "main", phrases, k, bound)
    assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in want]
    # Equal scores may come in either order; the sets above the last score must agree.
    cut = want[-1][1] if want else 0.0
    assert {r for r, s in got if s > cut + 1e-9} == {r for r, s in want if s > cut + 1e-9}
    conn = corpus_kb.index.reader()
    used = plan(phrases, Vocabulary().doc_freqs(conn, phrases), bound)
    if bound == 0 or (not used.scoring and used.held_estimate() <= bound):
        # One query over every match, no window: the unbounded ranking itself.
        assert got == corpus_kb.index.lexical("main", phrases, k, Filters(), max_scored=0)


def test_windows_go_from_the_newest_cards_to_all_of_them() -> None:
    assert list(lexical.windows(1000, 50, 100, 10)) == [0]  # within the bound
    assert list(lexical.windows(1000, 200, 100, 10)) == [0]  # within twice the bound
    assert list(lexical.windows(1000, 50, 0, 10)) == [0]  # no bound
    # 500 of 1,000 cards held, 100 may be scored: the newest 200 rowids, then 800, all.
    assert list(lexical.windows(1000, 500, 100, 10)) == [800, 200, 0]
    assert list(lexical.windows(1000, 100_000, 100, 10)) == [990, 960, 840, 360, 0]  # >= k


def test_a_word_in_most_cards_is_ranked_over_the_newest_first(corpus_kb: Kredenc) -> None:
    conn = corpus_kb.index.reader()
    (freq,) = Vocabulary().doc_freqs(conn, [Phrase("w000")])
    assert freq > 300  # the most common word: far past the bound below
    got = corpus_kb.index.lexical("main", [Phrase("w000")], 10, Filters(), max_scored=40)
    total = conn.execute("SELECT max(rowid) FROM records").fetchone()[0]
    low = next(lexical.windows(total, freq, 40, 10))
    assert low > 0 and len(got) == 10 and all(r > low for r, _ in got)
    assert got == brute_force(corpus_kb, "main", [Phrase("w000")], 10, Plan((Phrase("w000"),)), low)


def test_bounded_search_keeps_the_namespace_and_filters(corpus_kb: Kredenc) -> None:
    phrases = [Phrase(w) for w in ("w000", "w001", "w002", "w010", "w030")]
    index = corpus_kb.index
    other = index.lexical("other", phrases, 30, Filters(), max_scored=50)
    main = index.lexical("main", phrases, 30, Filters(), max_scored=50)
    conn = index.reader()
    ids_of = {
        ns: {int(r[0]) for r in conn.execute("SELECT rowid FROM records WHERE ns = ?", (ns,))}
        for ns in ("main", "other")
    }
    assert len(other) == 30 and {r for r, _ in other} <= ids_of["other"]
    assert len(main) == 30 and {r for r, _ in main} <= ids_of["main"]
    notes = index.lexical("main", phrases, 30, Filters(kinds=("note",)), max_scored=50)
    kinds = index.node_info("main", [r for r, _ in notes])
    assert len(notes) == 30 and {v["kind"] for v in kinds.values()} == {"note"}
    assert index.lexical("nobody", phrases, 30, Filters(), max_scored=50) == []


def test_a_small_namespace_beside_a_large_one_still_gets_k(open_store: Any) -> None:
    with open_store(namespace="big") as kb:
        kb.remember_many(
            [{"text": f"kestrel sighting number {i} near the tower"} for i in range(400)]
        )
    with open_store(namespace="small") as kb:
        kb.remember_many([{"text": f"a kestrel note {i}"} for i in range(12)])
        found = kb.index.lexical(
            "small", [Phrase("kestrel"), Phrase("tower")], 10, Filters(), max_scored=5
        )
        assert len(found) == 10
        info = kb.index.node_info("small", [r for r, _ in found])
        assert len(info) == 10  # every one of them is in "small"


def test_a_namespace_of_few_cards_is_ranked_exactly_in_one_query(
    open_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(namespace="big") as kb:
        kb.remember_many(
            [{"text": f"kestrel sighting number {i} near the tower"} for i in range(400)]
        )
    with open_store(namespace="small") as kb:
        rng = random.Random(5)
        kb.remember_many(
            [
                {"text": " ".join(rng.choices(["kestrel", "tower", "note", "moss"], k=4))}
                for _ in range(30)
            ]
        )
        terms = [Phrase("kestrel"), Phrase("tower"), Phrase("moss")]
        statements: list[str] = []
        real = lexical._ranked

        def counted(conn: sqlite3.Connection, ns: str, match: str, *rest: Any) -> Any:
            statements.append(match)
            return real(conn, ns, match, *rest)

        monkeypatch.setattr(lexical, "_ranked", counted)
        # "kestrel" is in 430 cards, far past a bound of 40; the namespace holds 30.
        got = kb.index.lexical("small", terms, 10, Filters(), max_scored=40)
        assert len(statements) == 1  # one OR query, no plan, no window
        assert got == kb.index.lexical("small", terms, 10, Filters(), max_scored=0)


def test_the_term_counts_catch_up_with_new_cards_or_are_read_again(tmp_path: Any) -> None:
    kb = Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none")
    try:
        kb.remember_many([{"text": f"note {i} about the harbour"} for i in range(100)])
        index = kb.index
        vocabulary: Vocabulary = index._vocabulary
        conn = index.reader()
        assert vocabulary.known(conn, ["harbour", "kestrel"]) == {"harbour": 100}
        # One card more (under 1/32 of them): its text is stemmed and counted.
        kb.remember("A kestrel hovers over the harbour")
        assert vocabulary.known(conn, ["kestrel", "hover", "harbour"]) == {
            "kestrel": 1,
            "hover": 1,
            "harbour": 101,
        }
        # Many more (a bulk ingest): the counts are read again from the index.
        kb.remember_many([{"text": f"quarry report {i}"} for i in range(50)])
        assert vocabulary.known(conn, ["quarri", "report", "harbour", "zzz"]) == {
            "quarri": 50,
            "report": 50,
            "harbour": 101,
        }
        # A forgotten card's terms keep their counts until the next read, and are not
        # offered as a correction: the caller's cards are checked for the word.
        kestrel = kb.search("kestrel", mode="lexical")[0].id
        kb.forget(kestrel)
        assert vocabulary.known(conn, ["kestrel"]) == {"kestrel": 1}
        assert index.corrections(kb.namespace, ["kestral", "harbuor"], Filters()) == {
            "harbuor": "harbour"
        }
    finally:
        kb.close()


def test_word_stems_are_kept_so_a_repeated_word_is_not_stemmed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A misspelt word's ~400 candidates come back with the word, turn after turn: the
    stemmer runs once for them (it took ~0.7 ms a time), with the same terms."""
    vocabulary = Vocabulary()
    words = ["running", "jumped", "harbours", "qzx", "running"]
    first = vocabulary.word_stems(words)
    assert first == ["run", "jump", "harbour", "qzx", "run"]
    passes: list[int] = []
    stemmer = vocabulary._stemmer

    def counted() -> sqlite3.Connection:
        passes.append(1)
        return stemmer()

    monkeypatch.setattr(vocabulary, "_stemmer", counted)
    assert vocabulary.word_stems(words) == first  # all kept: no pass
    assert vocabulary.word_stems(["jumped", "beaches"]) == ["jump", "beach"]
    assert len(passes) == 1  # only "beaches" was stemmed
    assert vocabulary.word_stems([]) == []
