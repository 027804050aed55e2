"""Title-mention links: whole words, case-insensitive, disambiguators dropped, bounded."""

from __future__ import annotations

from pathlib import Path

from kredenc.engine import Kredenc
from kredenc.ingest.mentions import Titled, mention_pairs, title_key
from kredenc.testing.embedders import HashEmbedder


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


def test_titles_can_come_from_separate_targets() -> None:
    chunks = [
        Titled("a0", "Kestrel", "Kestrel\nThe kestrel hunts over the Water Tower."),
        Titled("a1", "Kestrel", "It nests near the water tower too."),
        Titled("w0", "Water Tower", "Water Tower\nBuilt in 1911; a kestrel nests on it."),
        Titled("w1", "Water Tower", "Restored in 1990."),
    ]
    leads = [Titled("a0", "Kestrel", ""), Titled("w0", "Water Tower", "")]
    # every chunk links to the other document's lead, never to its own document
    assert mention_pairs(chunks, targets=leads) == [("a0", "w0"), ("a1", "w0"), ("w0", "a0")]


def test_ingest_links_chunks_to_the_documents_they_name(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "tower.md").write_text(
        "# Old Water Tower\n\nBuilt in 1911 of red brick; restored in 1990.\n"
    )
    (notes / "birds.md").write_text(
        "# Kestrel sightings\n\nA kestrel nests on the old water tower every spring.\n"
    )
    (notes / "other.md").write_text("# Budget\n\nNothing about towers here.\n")
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        report = kb.ingest(notes)
        assert report.documents == 3 and report.mentions == 1
        bird = kb.search("kestrel sightings", k=1, mode="lexical")[0]
        rows = kb.index.reader().execute("SELECT src, dst FROM edges WHERE rel='mentions'")
        [(src, dst)] = [(str(a), str(b)) for a, b in rows]
        assert src == bird.id and "Built in 1911" in kb.get(dst).text
        plain = kb.search("where do kestrel birds nest", k=3, mode="lexical")
        assert dst not in [h.id for h in plain]
        walked = kb.search("where do kestrel birds nest", k=3, mode="lexical", hops=1)
        assert [h.id for h in walked[:2]] == [bird.id, dst]
        assert walked[1].graph == f"mentions of {bird.id}"
    with Kredenc.open(
        tmp_path / "off", embedder=HashEmbedder(), durability="none", mention_links=0
    ) as kb:
        assert kb.ingest(notes).mentions == 0
