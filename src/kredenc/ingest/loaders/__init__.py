"""Loaders: one per kind of source, discovered through the ``kredenc.loaders`` entry points.

The loader modules themselves (and their dependencies, such as pypdfium2) are imported
only when :func:`loaders` is first called.
"""

from __future__ import annotations

from kredenc.ingest.loaders.base import Loader
from kredenc.ingest.loaders.registry import loader_for, loaders, supported_suffixes

__all__ = ["Loader", "loader_for", "loaders", "supported_suffixes"]
