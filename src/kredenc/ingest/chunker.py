"""Cut a loaded document into chunks small enough to embed.

Boundaries are ranked, as in recursive splitting: a paragraph break (``\n\n``) first,
then a sentence end (``. ``, ``? ``, ``! ``, also at a line end), then a line break,
then a space, and, as a last resort, anywhere. A chunk ends at the best-ranked
boundary in the second half of its ``size`` window (the furthest one of that rank),
so chunks are between half and all of ``size`` long and end where the text does.
Sentence ends rank above bare line breaks because PDF and plain-text lines are
hard-wrapped in mid-sentence; text with short lines and no sentences (lists, code,
tables) still breaks at its lines.

Each chunk after the first in a block starts up to ``overlap`` characters before the
previous one ended: at a paragraph, sentence or line start if one lies in the first
half of that window, else at the first word start in it, so a sentence cut at a chunk
edge is whole in one of the two.

A chunk never crosses a *block*: consecutive sections with the same page and heading
path (a page of a PDF, a heading block of a markdown file, the segments of a
transcript) form one block; a new page or heading starts a new block. A chunk
carries the page, start time and meta of the section it starts in.

:func:`sentence_spans` cuts a text into units of whole sentences instead (sentence-window
filing, measured by ``kredenc eval … --units sentences`` and not adopted for ingestion).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from kredenc.errors import InvalidInput
from kredenc.ingest.document import Chunk, LoadedDocument, Section

DEFAULT_SIZE = 1000
DEFAULT_OVERLAP = 200
DEFAULT_SENTENCE_SIZE = 300
# A sentence end: ., ? or ! (closing quotes or brackets may follow), then whitespace.
_SENTENCE_END = re.compile(r"[.?!][\"'”’)\]]*\s")
_SECTION_JOIN = "\n\n"


@dataclass
class _Block:
    """Consecutive sections that share page and heading path, joined into one text."""

    text: str
    sections: list[Section]
    starts: list[int]  # offset of each section's text in ``text``

    def section_at(self, offset: int) -> Section:
        return self.sections[max(0, bisect_right(self.starts, offset) - 1)]


def chunk(
    doc: LoadedDocument, size: int = DEFAULT_SIZE, overlap: int = DEFAULT_OVERLAP
) -> list[Chunk]:
    """Cut ``doc`` into chunks of at most ``size`` characters, ``index`` counting from 0.

    Raises :class:`~kredenc.errors.InvalidInput` unless ``size > overlap >= 0``.
    """
    _check(size, overlap)
    chunks: list[Chunk] = []
    for block in _blocks(doc.sections):
        for start, end in split_spans(block.text, size, overlap):
            raw = block.text[start:end]
            text = raw.strip()
            if not text:
                continue
            section = block.section_at(start + len(raw) - len(raw.lstrip()))
            chunks.append(
                Chunk(
                    text=text,
                    source=doc.source,
                    title=doc.title,
                    loader=doc.loader,
                    index=len(chunks),
                    page=section.page,
                    heading_path=section.heading_path,
                    start_s=section.start_s,
                    meta=dict(section.meta),
                )
            )
    return chunks


def split_spans(
    text: str, size: int = DEFAULT_SIZE, overlap: int = DEFAULT_OVERLAP
) -> list[tuple[int, int]]:
    """The ``(start, end)`` offsets of the chunks of ``text``.

    Every span is at most ``size`` long; each span after the first starts at most
    ``overlap`` characters before the previous one ended, at the start of a word
    where there is one in reach.
    """
    _check(size, overlap)
    spans: list[tuple[int, int]] = []
    start = prev_end = 0
    while prev_end < len(text):
        if len(text) - start <= size:
            spans.append((start, len(text)))
            break
        end = _best_end(text, max(prev_end + 1, start + size // 2), start + size)
        spans.append((start, end))
        prev_end = end
        start = _overlap_start(text, end, overlap)
    return spans


def sentence_spans(text: str, size: int = DEFAULT_SENTENCE_SIZE) -> list[tuple[int, int]]:
    """The ``(start, end)`` offsets of ``text``'s sentences, packed into spans of at most
    ``size`` characters (the units of sentence-window filing).

    A span takes whole sentences (and lines: a title line, a list item) while they fit;
    a sentence longer than ``size`` is cut by :func:`split_spans` without overlap.
    Spans do not overlap, cover every non-blank character once and hold no leading or
    trailing whitespace.
    """
    _check(size, 0)
    cuts = {m.end() for m in _SENTENCE_END.finditer(text)}
    cuts.update(m.end() for m in re.finditer(r"\n", text))
    cuts.add(len(text))
    pieces: list[tuple[int, int]] = []
    prev = 0
    for cut in sorted(cuts):
        start, end = _trim(text, prev, cut)
        prev = cut
        if start >= end:
            continue
        if end - start > size:
            parts = split_spans(text[start:end], size, 0)
            pieces += [_trim(text, start + a, start + b) for a, b in parts]
        else:
            pieces.append((start, end))
    spans: list[tuple[int, int]] = []
    for start, end in pieces:
        if start >= end:
            continue
        if spans and end - spans[-1][0] <= size:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` without the whitespace at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _best_end(text: str, lo: int, hi: int) -> int:
    """The best-ranked boundary in ``[lo, hi]``, the furthest of its rank; else ``hi``."""
    found = text.rfind("\n\n", max(0, lo - 2), hi)
    if found >= 0:
        return found + 2
    ends = [m.end() for m in _SENTENCE_END.finditer(text, max(0, lo - 4), hi) if m.end() >= lo]
    if ends:
        return ends[-1]
    for sep in ("\n", " "):
        found = text.rfind(sep, max(0, lo - 1), hi)
        if found >= 0:
            return found + 1
    return hi


def _after_paragraph(text: str, lo: int, hi: int) -> int:
    """The first position in ``[lo, hi]`` right after a paragraph break, or -1."""
    found = text.find("\n\n", max(0, lo - 2), hi)
    return found + 2 if found >= 0 else -1


def _after_sentence(text: str, lo: int, hi: int) -> int:
    for match in _SENTENCE_END.finditer(text, max(0, lo - 4), hi):
        if match.end() >= lo:
            return match.end()
    return -1


def _after_line(text: str, lo: int, hi: int) -> int:
    found = text.find("\n", max(0, lo - 1), hi)
    return found + 1 if found >= 0 else -1


def _check(size: int, overlap: int) -> None:
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (size, overlap)):
        raise InvalidInput("chunk size and overlap must be integers", "e.g. size=1000, overlap=200")
    if overlap < 0 or size <= overlap:
        raise InvalidInput(
            f"chunk size must be greater than overlap, and overlap at least 0 "
            f"(got size={size}, overlap={overlap})",
            "e.g. size=1000, overlap=200",
        )


def _overlap_start(text: str, end: int, overlap: int) -> int:
    """Where the chunk after one ending at ``end`` starts.

    At most ``overlap`` characters back: at the first paragraph, sentence or line
    start in the first half of that window if there is one, else at the first word
    start; with no word start in reach, at ``end`` (no overlap rather than half a word).
    """
    if overlap == 0 or end >= len(text):
        return end
    lo = max(0, end - overlap)
    if lo == 0:
        return 0
    latest = lo + overlap // 2
    for after in (_after_paragraph, _after_sentence, _after_line):
        pos = after(text, lo, latest)
        while 0 <= pos < end and text[pos].isspace():
            pos += 1
        if lo <= pos < end:
            return pos
    for pos in range(lo, end):
        if text[pos - 1].isspace() and not text[pos].isspace():
            return pos
    return end


def _blocks(sections: list[Section]) -> Iterator[_Block]:
    """Group consecutive sections with the same page and heading path."""
    group: list[Section] = []
    for section in sections:
        if not section.text.strip():
            continue
        if group and (section.page, section.heading_path) != (group[0].page, group[0].heading_path):
            yield _join(group)
            group = []
        group.append(section)
    if group:
        yield _join(group)


def _join(sections: list[Section]) -> _Block:
    starts: list[int] = []
    parts: list[str] = []
    offset = 0
    for section in sections:
        starts.append(offset)
        parts.append(section.text)
        offset += len(section.text) + len(_SECTION_JOIN)
    return _Block(_SECTION_JOIN.join(parts), sections, starts)


__all__ = ["DEFAULT_OVERLAP", "DEFAULT_SIZE", "chunk", "split_spans"]
