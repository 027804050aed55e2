"""The markdown loader: heading sections, front matter, local links."""

from __future__ import annotations

from pathlib import Path

from kredenc.ingest.chunker import chunk
from kredenc.ingest.loaders.markdown import MarkdownLoader, parse_front_matter, parse_markdown

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ingest" / "markdown"
GUIDE = FIXTURES / "release-guide.md"
CHANGELOG = FIXTURES / "changelog.md"


def test_sections_follow_headings_with_their_path() -> None:
    (doc,) = MarkdownLoader().load(str(GUIDE))
    assert doc.loader == "markdown"
    assert doc.source == str(GUIDE.resolve())
    assert [s.heading_path for s in doc.sections] == [
        (),
        ("Releasing kredenc",),
        ("Releasing kredenc", "Preparing"),
        ("Releasing kredenc", "Preparing", "Version numbers"),
        ("Releasing kredenc", "Hotfixes"),  # a setext heading
        ("Releasing kredenc", "Publishing"),
    ]
    assert doc.sections[0].text == "This guide is for whoever cuts the monthly release."
    assert doc.sections[2].text.startswith("## Preparing\n\nFreeze the main branch")


def test_a_hash_line_in_a_code_block_is_not_a_heading() -> None:
    (doc,) = MarkdownLoader().load(str(GUIDE))
    preparing = doc.sections[2].text
    assert "# a comment in code, not a heading" in preparing
    assert not any("comment" in part for s in doc.sections for part in s.heading_path)


def test_front_matter_goes_into_meta_and_gives_the_title() -> None:
    (doc,) = MarkdownLoader().load(str(GUIDE))
    assert doc.title == "Release Guide"  # front matter beats the first H1
    assert doc.meta == {
        "owner": "release-team",
        "version": 3,
        "draft": False,
        "tags": ["releases", "process"],
        "reviewers": ["ana", "bo"],
    }
    assert "release-team" not in doc.text


def test_title_is_the_first_h1_then_the_file_name(tmp_path: Path) -> None:
    (doc,) = MarkdownLoader().load(str(CHANGELOG))
    assert doc.title == "Changelog rules"  # a setext H1
    plain = tmp_path / "meeting-notes.md"
    plain.write_text("Just a note.\n\n## Later\n\nMore.\n", encoding="utf-8")
    (doc,) = MarkdownLoader().load(str(plain))
    assert doc.title == "meeting-notes"


def test_local_links_become_edges_and_their_label_stays_in_the_text() -> None:
    (guide,) = MarkdownLoader().load(str(GUIDE))
    (changelog,) = MarkdownLoader().load(str(CHANGELOG))
    assert guide.links == [changelog.source]  # "changelog.md#format", fragment dropped
    assert changelog.links == [guide.source]
    text = guide.text
    assert "See the changelog rules\nand the" in text
    assert "changelog.md" not in text
    assert "[style guide](https://example.com/style)" in text  # web links stay
    assert "release dashboard" in text and "dashboard.png" not in text  # image: alt text


def test_links_to_missing_files_are_not_edges() -> None:
    parsed = parse_markdown("See [gone](missing.md) and [here](#top).", lambda target: None)
    assert parsed.links == []
    assert parsed.sections[0].text == "See gone and here."


def test_front_matter_parser_handles_the_small_subset() -> None:
    meta = parse_front_matter(
        [
            "title: 'Quoted: with colon'",
            "count: 12",
            "ratio: 0.5",
            "empty:",
            "nested:",
            "  child: ignored",
            "tags: [a, 'b c']",
            "flag: true  # a comment",
            "# a comment line",
        ]
    )
    assert meta == {
        "title": "Quoted: with colon",
        "count": 12,
        "ratio": 0.5,
        "tags": ["a", "b c"],
        "flag": True,
    }


def test_unclosed_front_matter_is_text() -> None:
    parsed = parse_markdown("---\ntitle: x\nno closing line")
    assert parsed.front_matter == {}
    assert "title: x" in parsed.sections[0].text


def test_markdown_chunks_carry_their_heading_path() -> None:
    (doc,) = MarkdownLoader().load(str(GUIDE))
    chunks = chunk(doc, size=200, overlap=40)
    hotfix = next(c for c in chunks if "hotfix branches" in c.text)
    assert hotfix.heading_path == ("Releasing kredenc", "Hotfixes")
    assert all(c.page is None for c in chunks)
