"""User text never becomes FTS5 syntax: it is cut into words and each word is quoted.

The property test throws 1,000 query strings full of FTS5 syntax at a real store and
checks two things: no error, and the same hits as searching the query's words, each
one double-quoted, in lexical and hybrid modes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kredenc.engine import Kredenc
from kredenc.retrieve.terms import MAX_TERMS, fts_match, query_terms, tokens, words
from kredenc.testing.embedders import HashEmbedder

# Words the store holds: plain English, FTS5 keywords and column names, accented and
# non-Latin words, a decomposed accent, digits.
WORDS = (
    *("budget", "kestrel", "river", "meeting", "invoice", "garden", "python", "sqlite"),
    *("vector", "memory", "agent", "deadline", "coffee", "berlin", "tokyo", "quarterly"),
    *("review", "project", "alpha", "beta", "gamma", "delta"),
    *("NOT", "AND", "OR", "NEAR", "not", "and", "or", "near"),
    *("card", "scope", "cards", "bm25", "rank", "rowid", "match"),
    *("café", "naïve", "résumé", "Straße", "İstanbul", "Москва", "東京", "数据库", "ελληνικά"),
    *("हिन्दी", "العربية", "nai\u0308ve"),
    *("2024", "42", "3.14", "v2", "x86_64", "e-mail", "O'Brien", "C++", "user@example.com"),
)
SYNTAX = ('"', "*", ":", "(", ")", "-", "^", "+", "NOT", "AND", "OR", "NEAR", "NEAR(", "{", "}")
SYNTAX += ("card:", "scope:", "card :", '""', "'", ",", "NEAR/2", "^card", "col*", "\\", "\x00")
SEPARATORS = ("", " ", "  ", "\t", "\n", "\u00a0", "\u3000")


def quoted_words(query: str) -> str:
    return " ".join(f'"{w}"' for w in words(query))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kredenc]:
    """One store for the module: 300 memories in two drawers, words drawn at random."""
    rng = random.Random(20261130)
    items = []
    for i in range(300):
        words = rng.choices(WORDS, k=rng.randint(3, 12))
        items.append({"text": " ".join(words), "drawer": "memories" if i % 3 else "notes"})
    home: Path = tmp_path_factory.mktemp("terms") / "store"
    kb = Kredenc.open(home, embedder=HashEmbedder(), durability="none")
    kb.remember_many(items)
    yield kb
    kb.close()


piece = st.one_of(
    st.sampled_from(SYNTAX),
    st.sampled_from(WORDS),
    st.sampled_from(WORDS).map(str.upper),
    st.text(max_size=8),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
)
fts_queries = st.lists(st.tuples(piece, st.sampled_from(SEPARATORS)), max_size=12).map(
    lambda parts: "".join(p + sep for p, sep in parts)
)


@settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(query=fts_queries)
@example(query="")
@example(query="   \t\n")
@example(query='"')
@example(query="* ( ) : - ^ NOT AND OR NEAR")
@example(query='card : budget OR scope : x NOT "kestrel')
@example(query='NEAR(budget kestrel, 2) AND "unterminated')
@example(query="İstanbul")
@example(query="nai\u0308ve rèsumé")
@example(query="budget* ^river -coffee")
def test_fts5_syntax_is_searched_as_quoted_words(store: Kredenc, query: str) -> None:
    quoted = quoted_words(query)
    for mode in ("lexical", "hybrid"):
        if mode == "hybrid" and "_" in query:
            # The test embedder counts "_" as part of a word; FTS5 (and tokens()) do
            # not: the dense legs would see different words, not different syntax.
            continue
        if mode == "hybrid" and words(query) != tokens(query):
            # A clitic ("kestrel's") is dropped from the words only: the dense leg
            # embeds the query as typed, so it sees one word more than the quoted one.
            continue
        got = [(h.id, h.score, h.legs) for h in store.search(query, k=10, mode=mode)]
        want = [(h.id, h.score, h.legs) for h in store.search(quoted, k=10, mode=mode)]
        assert got == want, f"{mode}: {query!r} vs {quoted!r}"


def test_syntax_cannot_widen_or_narrow_a_search(store: Kredenc) -> None:
    """Operators are words or separators: NOT excludes nothing, a column filter is a word."""
    plain = [h.id for h in store.search("kestrel", k=50, mode="lexical")]
    assert plain, "the fixture holds kestrel"
    for query in ("kestrel NOT", "kestrel -", "(kestrel)", "kestrel*", "^kestrel", '"kestrel'):
        assert [h.id for h in store.search(query, k=50, mode="lexical")] == plain
    # "NOT budget" searches for "not" and "budget": both kinds of records come back.
    hits = store.search("kestrel NOT budget", k=50, mode="lexical")
    assert any("budget" in h.text.lower() for h in hits)
    # A column filter would hide every card; here "scope" is just a word.
    scoped = store.search("scope : kestrel", k=50, mode="lexical")
    assert {h.id for h in scoped} >= set(plain[:5])


def test_word_less_queries_find_nothing_in_any_mode(store: Kredenc) -> None:
    for query in ("", "   ", "* ( ) : ^ -", '""', "\x00"):
        for mode in ("lexical", "dense", "hybrid"):
            assert store.search(query, mode=mode) == [], (query, mode)


# -- tokens ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("snake_case x86_64", ["snake", "case", "x86", "64"]),
        ('NEAR(a b) "c" d* ^e f:g', ["near", "a", "b", "c", "d", "e", "f", "g"]),
        ("3.14 v2", ["3", "14", "v2"]),
        ("café Straße", ["café", "straße"]),
        ("東京 数据库", ["東京", "数据库"]),
        ("", []),
        (" \t\n", []),
    ],
)
def test_tokens(text: str, expected: list[str]) -> None:
    assert tokens(text) == expected


def test_tokens_keep_combining_marks_inside_words() -> None:
    # Decomposed accents (macOS file names, some keyboards) stay in their word.
    assert tokens("nai\u0308ve") == ["nai\u0308ve"]
    # Lower-casing "İ" adds a combining dot: it must not cut the word in two.
    assert tokens("İstanbul") == ["i\u0307stanbul"]
    assert tokens(quoted_words("İstanbul")) == tokens("İstanbul")
    # Private-use characters are part of a token for FTS5 too.
    assert tokens("a\ue000b c") == ["a\ue000b", "c"]


@given(st.text())
@settings(max_examples=300, derandomize=True)
def test_tokens_are_idempotent(text: str) -> None:
    cut = tokens(text)
    assert tokens(" ".join(f'"{w}"' for w in cut)) == cut
    # The query's words (clitics dropped: "0'S" is "0") survive quoting the same way.
    assert tokens(quoted_words(text)) == words(text)
    assert all(w and w == w.lower() for w in cut)
    assert all('"' not in w and not any(c.isspace() for c in w) for w in cut)


def test_query_terms_drop_stopwords_and_repeats() -> None:
    assert query_terms("The budget and THE budget of Kestrel") == ["budget", "kestrel"]
    # A query of stopwords only still searches for them.
    assert query_terms("not and or") == ["not", "and", "or"]
    assert query_terms("") == []
    many = " ".join(f"w{i}" for i in range(MAX_TERMS + 10))
    assert query_terms(many) == [f"w{i}" for i in range(MAX_TERMS)]


def test_fts_match_quotes_every_term() -> None:
    assert fts_match(["near", "not"]) == '"near" OR "not"'
    assert fts_match(['say"what']) == '"say""what"'
    assert fts_match([]) == ""


# -- what the fixes mean for search ----------------------------------------------


def test_decomposed_accents_and_dotted_i_find_their_words(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        naive = kb.remember("a naïve plan")
        city = kb.remember("flights to İstanbul")
        kb.remember("nothing to see here")
        for query, target in (
            ("nai\u0308ve", naive.id),  # decomposed ï
            ("naive", naive.id),
            ("İstanbul", city.id),
            (quoted_words("İstanbul"), city.id),
            ("istanbul", city.id),
        ):
            assert [h.id for h in kb.search(query, mode="lexical")] == [target], query


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("the user's mother", ["user", "mother"]),
        ("Caroline\u2019s identity", ["caroline", "identity"]),
        ("we'll see what I'd done", ["see", "done"]),
        ("O'Brien l'amour", ["o", "brien", "l", "amour"]),  # not clitics: kept
        ("vitamin s", ["vitamin", "s"]),  # a lone "s" the user typed is a word
    ],
)
def test_clitics_are_not_query_terms(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


def test_a_possessive_query_does_not_match_every_possessive(tmp_path: Path) -> None:
    """Issue 16: "the user's mother" returned facts that merely held a possessive "'s"."""
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        mother = kb.remember("The user's mother is called Eva.")
        kb.remember_many(
            [
                {"text": "Anna's brother plays chess."},
                {"text": "Tom's car is red."},
                {"text": "It's raining in Berlin."},
            ]
        )
        hits = kb.search("the user's mother", k=10, mode="lexical")
        assert [h.id for h in hits] == [mother.id]
        # The card side keeps FTS5's cut: "user's" is found by "user".
        assert [h.id for h in kb.search("user", k=10, mode="lexical")] == [mother.id]


def test_pair_phrases_are_neighbouring_content_words_cut_as_fts5_cuts_them() -> None:
    from kredenc.retrieve.terms import pair_phrases

    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    got = pair_phrases(question)
    # The clitic stays in the phrase: the card "Arthur's Magazine" is "arthur s magazine".
    assert "arthur s magazine" in got and "first for women" in got
    assert "started first" in got
    # Never more than two stopwords between, never a stopword alone, never repeated.
    assert pair_phrases("tea and the of a coffee") == []
    assert pair_phrases("red apple red apple") == ["red apple", "apple red"]
    assert len(pair_phrases(" ".join(f"w{i}x" for i in range(40)))) == 16
