"""Ingest: loaders turn sources into documents, the chunker cuts them into chunks."""

from __future__ import annotations

from kredenc.ingest.document import Chunk, LoadedDocument, Section

__all__ = ["Chunk", "LoadedDocument", "Section"]
