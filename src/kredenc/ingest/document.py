"""What loaders produce and what the chunker cuts it into.

A loader turns one source (a file, a folder, a URL) into :class:`LoadedDocument`
objects made of :class:`Section` s: a page of a PDF, a heading block of a markdown
file, a stretch of a transcript. The chunker never cuts across a section, so a chunk
always belongs to one page or one heading block and can say which.

``source`` is the absolute, resolved path (as a string) for files and the URL for
URLs; ``links`` holds the sources of documents this one links to, in the same form,
so the engine can draw ``links_to`` edges between them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    """A stretch of a document that a chunk must not cross.

    ``page`` counts from 1; ``heading_path`` is the chain of headings above the text
    (outermost first); ``start_s`` is the start time in seconds for timed media.
    """

    text: str
    page: int | None = None
    heading_path: tuple[str, ...] = ()
    start_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadedDocument:
    """One document as a loader read it, before chunking."""

    source: str
    title: str
    loader: str
    sections: list[Section]
    links: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The whole text, sections separated by a blank line."""
        return "\n\n".join(s.text for s in self.sections if s.text)


@dataclass
class Chunk:
    """A piece of a document small enough to embed, with where it came from.

    ``index`` counts the chunks of one document from 0; ``page`` is the page the
    chunk starts on.
    """

    text: str
    source: str
    title: str
    loader: str
    index: int
    page: int | None = None
    heading_path: tuple[str, ...] = ()
    start_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


__all__ = ["Chunk", "LoadedDocument", "Section"]
