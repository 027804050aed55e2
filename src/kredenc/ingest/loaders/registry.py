"""Finding loaders: entry points and the loader for a source.

The sources under a folder are found by :mod:`kredenc.ingest.sources`.

Loaders are classes registered in the ``kredenc.loaders`` entry point group of the
plugin registry (:mod:`kredenc.plugins`); the built-ins are registered there too, in
kredenc's own ``pyproject.toml``. A third-party package adds a loader by declaring, in
its own metadata::

    [project.entry-points."kredenc.loaders"]
    epub = "kredenc_epub:EpubLoader"

A plugin that fails to import is logged and skipped, never fatal; an entry point with
a built-in's name replaces the built-in.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

from kredenc import plugins
from kredenc.config import Settings
from kredenc.errors import IngestError
from kredenc.ingest.loaders.base import Loader, is_url

logger = logging.getLogger(__name__)


def loaders() -> tuple[Loader, ...]:
    """Every available loader, in the order :func:`loader_for` asks them."""
    return _loaders(plugins.generation())


@lru_cache(maxsize=1)
def _loaders(generation: int) -> tuple[Loader, ...]:
    """The loaders of one reading of the registry (``generation``: its refresh count)."""
    found: list[Loader] = []
    for plugin, obj in plugins.load_all(plugins.LOADERS):
        if not (isinstance(obj, type) and issubclass(obj, Loader)):
            logger.warning(
                "%s (%s) skipped: not a kredenc Loader subclass", plugin.what, plugin.value
            )
            continue
        found.append(obj())
    return tuple(sorted(found, key=lambda ldr: (-ldr.priority, ldr.name)))


def supported_suffixes() -> list[str]:
    """The file suffixes some loader reads, sorted."""
    return sorted({suffix for loader in loaders() for suffix in loader.suffixes})


def loader_for(source: str, settings: Settings | None = None) -> Loader:
    """The loader that reads ``source`` (a file, a folder or a URL).

    A loader class with a ``from_settings`` constructor is built from ``settings``
    (fetch limits, languages, providers) when they are given.
    Raises :class:`~kredenc.errors.IngestError` when there is none.
    """
    for loader in loaders():
        if loader.can_load(source):
            factory = getattr(type(loader), "from_settings", None)
            if settings is not None and callable(factory):
                configured: Loader = factory(settings)
                return configured
            return loader
    if not is_url(source):
        path = Path(source)
        if not path.exists():
            raise IngestError(f"{source}: no such file or folder", "check the path")
        if path.is_dir():
            raise IngestError(
                f"{source}: is a folder, not a file",
                "walk it with kredenc.ingest.iter_sources() to ingest the files in it",
            )
    kinds = ", ".join(supported_suffixes())
    raise IngestError(
        f"{source}: no loader for this kind of source",
        f"supported: {kinds}, Notion export folders" + (", and URLs" if _url_loader() else ""),
    )


def _url_loader() -> bool:
    return any(loader.can_load("https://example.com/") for loader in loaders())


__all__ = ["loader_for", "loaders", "supported_suffixes"]
