"""The chunker: sizes, overlap on word boundaries, sections never crossed."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kredenc.errors import InvalidInput
from kredenc.ingest.chunker import chunk, sentence_spans, split_spans
from kredenc.ingest.document import LoadedDocument, Section

WORDS = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta",
    "eta", "theta", "iota", "kappa", "lambda", "mu",
]  # fmt: skip


def _prose(n_words: int, seed: int = 0) -> str:
    """Sentences of 12 words, a paragraph break every 5 sentences."""
    words = [WORDS[(i * 7 + seed) % len(WORDS)] for i in range(n_words)]
    out: list[str] = []
    for i, word in enumerate(words, start=1):
        out.append(word)
        if i % 60 == 0:
            out.append(".\n\n")
        elif i % 12 == 0:
            out.append(". ")
        else:
            out.append(" ")
    return "".join(out).strip()


def _doc(*sections: Section) -> LoadedDocument:
    return LoadedDocument("/tmp/doc.txt", "Doc", "text", list(sections))


def test_chunks_respect_size_and_overlap_about_the_requested_amount() -> None:
    text = _prose(2000)
    spans = split_spans(text, 1000, 200)
    assert len(spans) > 5
    assert all(end - start <= 1000 for start, end in spans)
    for (_, prev_end), (start, _) in pairwise(spans):
        overlap = prev_end - start
        assert 100 <= overlap <= 200  # "about 200", at a sentence start if one is near
        assert text[start - 1].isspace() and not text[start].isspace()
    assert spans[0][0] == 0 and spans[-1][1] == len(text)


def test_chunks_prefer_paragraph_then_sentence_boundaries() -> None:
    text = _prose(2000)
    for start, end in split_spans(text, 1000, 200)[:-1]:
        piece = text[start:end]
        assert piece.endswith(("\n\n", ". ")), repr(piece[-20:])


def test_hard_wrapped_lines_break_at_sentence_ends_not_line_ends() -> None:
    # Like PDF text: 70-character lines, sentences running across them.
    words = _prose(1500).replace("\n\n", " ").split(" ")
    lines, line = [], ""
    for word in words:
        if len(line) + len(word) > 70:
            lines.append(line.rstrip())
            line = ""
        line += word + " "
    text = "\n".join([*lines, line.rstrip()])
    spans = split_spans(text, 1000, 200)
    for start, end in spans[:-1]:
        assert text[start:end].rstrip().endswith("."), repr(text[end - 30 : end])
        assert end - start >= 500
    for start, _ in spans[1:]:
        assert text[start - 2 : start] in (". ", ".\n")  # overlap starts a sentence


def test_lines_without_sentences_break_at_lines() -> None:
    text = "\n".join(f"- item number {i} of a long list" for i in range(100))
    for start, end in split_spans(text, 300, 60):
        piece = text[start:end]
        assert piece.startswith("- item") and (end == len(text) or piece.endswith("\n"))


def test_zero_overlap_tiles_the_text_exactly() -> None:
    text = _prose(900)
    spans = split_spans(text, 300, 0)
    assert "".join(text[s:e] for s, e in spans) == text
    assert all(b[0] == a[1] for a, b in pairwise(spans))


def test_text_without_spaces_is_cut_hard() -> None:
    text = "x" * 2500
    spans = split_spans(text, 1000, 200)
    assert all(e - s <= 1000 for s, e in spans)
    assert spans[-1][1] == 2500


@settings(max_examples=60, deadline=None, database=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab .\n")), max_size=3000),
    size=st.integers(min_value=20, max_value=400),
    data=st.data(),
)
def test_spans_cover_the_text_within_bounds(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(min_value=0, max_value=size - 1))
    spans = split_spans(text, size, overlap)
    covered = 0
    for start, end in spans:
        assert 0 <= start <= covered < end <= len(text)  # no gap, progress every step
        assert end - start <= size
        assert covered - start <= overlap
        covered = end
    assert covered == len(text)


def test_chunk_never_crosses_a_page_and_keeps_its_provenance() -> None:
    doc = _doc(
        Section(_prose(400, 1), page=1),
        Section(_prose(50, 2), page=2),
        Section(_prose(400, 3), page=3),
    )
    chunks = chunk(doc, size=500, overlap=100)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    by_page = {c.page for c in chunks}
    assert by_page == {1, 2, 3}
    for c in chunks:
        section_text = doc.sections[c.page - 1].text  # type: ignore[operator]
        assert c.text in section_text  # from one page only
        assert (c.source, c.title, c.loader) == ("/tmp/doc.txt", "Doc", "text")


def test_tiny_sections_of_the_same_heading_are_merged_and_keep_the_first_start() -> None:
    segments = [
        Section(f"segment {i} says something short.", start_s=float(i * 5), meta={"n": i})
        for i in range(40)
    ]
    chunks = chunk(_doc(*segments), size=300, overlap=50)
    assert 1 < len(chunks) < 40
    assert chunks[0].start_s == 0.0 and chunks[0].meta == {"n": 0}
    for c in chunks:
        # The start time is the one of the segment the chunk's first word belongs to.
        number = c.start_s / 5.0  # type: ignore[operator]
        if c.text.startswith("segment"):
            assert c.text.startswith(f"segment {number:.0f} ")
        else:
            assert c.text.startswith(("says", "something", "short."))
            assert f"segment {number + 1:.0f} " in c.text


def test_heading_blocks_are_not_merged_across_headings() -> None:
    doc = _doc(
        Section("## A\n\nshort a", heading_path=("A",)),
        Section("## B\n\nshort b", heading_path=("B",)),
        Section("more b", heading_path=("B",)),
    )
    chunks = chunk(doc)
    assert [(c.heading_path, c.text) for c in chunks] == [
        (("A",), "## A\n\nshort a"),
        (("B",), "## B\n\nshort b\n\nmore b"),
    ]


def test_empty_sections_make_no_chunks() -> None:
    assert chunk(_doc(Section("   \n"), Section(""))) == []


@pytest.mark.parametrize(("size", "overlap"), [(200, 200), (100, 300), (0, 0), (100, -1)])
def test_size_must_exceed_overlap(size: int, overlap: int) -> None:
    with pytest.raises(InvalidInput, match="greater than overlap"):
        chunk(_doc(Section("text")), size=size, overlap=overlap)


def test_size_and_overlap_must_be_integers() -> None:
    with pytest.raises(InvalidInput):
        chunk(_doc(Section("text")), size=1000.0, overlap=200)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        split_spans("text", True, 0)


def test_sentence_spans_pack_whole_sentences_and_lines() -> None:
    text = "A title\nFirst claim holds. Second claim holds too! Does a third? Yes."
    spans = [text[a:b] for a, b in sentence_spans(text, 40)]
    assert spans == ["A title\nFirst claim holds.", "Second claim holds too! Does a third?", "Yes."]


def test_a_sentence_longer_than_the_size_is_cut_at_words() -> None:
    text = "Short one. " + "word " * 30 + "end."
    spans = [text[a:b] for a, b in sentence_spans(text, 50)]
    assert spans[0] == "Short one."
    assert all(len(s) <= 50 for s in spans)
    assert " ".join(spans[1:]).split() == ("word " * 30 + "end.").split()


@settings(max_examples=150, deadline=None, database=None)
@given(st.text(alphabet="ab .?!\n", max_size=400), st.integers(5, 120))
def test_sentence_spans_cover_every_word_once_in_order(text: str, size: int) -> None:
    spans = sentence_spans(text, size)
    assert all(0 <= a < b <= len(text) and b - a <= size for a, b in spans)
    assert all(prev[1] <= nxt[0] for prev, nxt in pairwise(spans))
    assert all(not text[a].isspace() and not text[b - 1].isspace() for a, b in spans)
    covered = "".join(text[a:b] for a, b in spans)
    assert "".join(covered.split()) == "".join(text.split())


def test_sentence_spans_check_the_size() -> None:
    with pytest.raises(InvalidInput):
        sentence_spans("text.", 0)
