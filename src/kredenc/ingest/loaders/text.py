"""Plain-text loader: ``.txt``, ``.text`` and ``.log`` files, one section each.

The title is the file name without its suffix; the text is kept as written (newlines
normalised), so the chunker can split it at its paragraph and line breaks.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, read_text_file, resolve_source


class TextLoader(Loader):
    """Reads a plain-text file into one document."""

    name: ClassVar[str] = "text"
    suffixes: ClassVar[tuple[str, ...]] = (".txt", ".text", ".log")

    def load(self, source: str) -> list[LoadedDocument]:
        path = Path(source)
        text = read_text_file(path).strip()
        sections = [Section(text)] if text else []
        return [LoadedDocument(resolve_source(source), path.stem, self.name, sections)]


__all__ = ["TextLoader"]
