"""Ingest: loaders turn sources into documents, the chunker cuts them into chunks.

>>> from kredenc.ingest import chunk, iter_sources, loader_for
>>> for source in iter_sources(["./notes"]):  # doctest: +SKIP
...     for doc in loader_for(source).load(source):
...         chunks = chunk(doc)
"""

from __future__ import annotations

from kredenc.ingest.chunker import chunk
from kredenc.ingest.document import Chunk, LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader
from kredenc.ingest.loaders.registry import loader_for, loaders
from kredenc.ingest.sources import iter_sources

__all__ = [
    "Chunk",
    "LoadedDocument",
    "Loader",
    "Section",
    "chunk",
    "iter_sources",
    "loader_for",
    "loaders",
]
