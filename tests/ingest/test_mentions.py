"""Title-mention links: whole words, case-insensitive, disambiguators dropped, bounded."""

from __future__ import annotations

from kredenc.ingest.mentions import Titled, mention_pairs, title_key


def test_title_key_drops_disambiguator_and_rejects_unlinkable_titles() -> None:
    assert title_key("Lilu (mythology)") == ("lilu",)
    assert title_key("Al-Hilal") == ("al", "hilal")
    assert title_key("Paris, Texas") == ("paris", "texas")
    assert title_key("A") is None  # shorter than two characters
    assert title_key("The") is None  # a lone stopword
    assert title_key("1998") is None  # no letter
    assert title_key("(film)") == ("film",)  # nothing but a disambiguator: kept whole
    assert title_key(" ".join(["word"] * 13)) is None  # too long to be a name


def test_mentions_are_whole_word_case_insensitive_and_never_self() -> None:
    passages = [
        Titled("a", "Gallu", "Gallu\nThe gallu is a demon, like LILU in Akkadian lore."),
        Titled("b", "Lilu (mythology)", "Lilu (mythology)\nLilu is a wind spirit."),
        Titled("c", "Lil", "Lil\nA lilting name."),  # "lilting" is not "Lil"
        Titled("d", "", "An untitled note about Gallu and Lil."),
    ]
    assert mention_pairs(passages) == [("a", "b"), ("d", "a"), ("d", "c")]


def test_shared_titles_link_to_every_holder_but_not_each_other() -> None:
    passages = [
        Titled("p1", "Paris", "Paris\nCapital of France."),
        Titled("p2", "Paris", "Paris\nA city in Lamar County, Texas."),
        Titled("t", "Texas", "Texas\nPeople in Paris, Texas, ..."),
    ]
    assert mention_pairs(passages) == [("p2", "t"), ("t", "p1"), ("t", "p2")]


def test_longer_titles_match_and_the_bound_keeps_first_mentions() -> None:
    passages = [
        Titled("src", "Source", "New York City lies north of Philadelphia and Boston."),
        Titled("nyc", "New York City", "x"),
        Titled("ny", "New York", "y"),
        Titled("phl", "Philadelphia", "z"),
        Titled("bos", "Boston", "w"),
    ]
    assert mention_pairs(passages, max_per_doc=10)[:4] == [
        ("src", "nyc"),
        ("src", "ny"),
        ("src", "phl"),
        ("src", "bos"),
    ]
    assert mention_pairs(passages, max_per_doc=2) == [("src", "nyc"), ("src", "ny")]
    assert mention_pairs(passages, max_per_doc=0) == []
