"""Finding loaders: entry points and the loader for a source.

The sources under a folder are found by :mod:`kredenc.ingest.sources`.

Loaders are classes registered in the ``kredenc.loaders`` entry point group; the
built-ins are registered there too, in kredenc's own ``pyproject.toml``. A third-party
package adds a loader by declaring, in its own metadata::

    [project.entry-points."kredenc.loaders"]
    epub = "kredenc_epub:EpubLoader"

A plugin that fails to import is logged and skipped, never fatal; an entry point with
a built-in's name replaces the built-in. Where the package metadata is missing (a
source checkout run without installing), the built-ins are used from a list here.
"""

from __future__ import annotations

import logging
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

from kredenc.config import Settings
from kredenc.errors import IngestError
from kredenc.ingest.loaders.base import Loader, is_url

logger = logging.getLogger(__name__)

GROUP = "kredenc.loaders"

#: The built-in loaders, as ``module:Class`` (the same values as the entry points).
BUILTINS: dict[str, str] = {
    "pdf": "kredenc.ingest.loaders.pdf:PdfLoader",
    "markdown": "kredenc.ingest.loaders.markdown:MarkdownLoader",
    "notion": "kredenc.ingest.loaders.notion:NotionLoader",
    "text": "kredenc.ingest.loaders.text:TextLoader",
    "jsonl": "kredenc.ingest.loaders.jsonl:JsonLoader",
    "html": "kredenc.ingest.loaders.html:HtmlLoader",
    "youtube": "kredenc.ingest.loaders.youtube:YoutubeLoader",
}


@cache
def loaders() -> tuple[Loader, ...]:
    """Every available loader, in the order :func:`loader_for` asks them."""
    specs: dict[str, str] = dict(BUILTINS)
    for ep in entry_points(group=GROUP):
        specs[ep.name] = ep.value
    found: list[Loader] = []
    for name, spec in specs.items():
        loader = _instantiate(name, spec)
        if loader is not None:
            found.append(loader)
    return tuple(sorted(found, key=lambda ldr: (-ldr.priority, ldr.name)))


def _instantiate(name: str, spec: str) -> Loader | None:
    module_name, _, attr = spec.partition(":")
    try:
        obj = getattr(import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        logger.warning("loader %r (%s) skipped: cannot import it: %s", name, spec, exc)
        return None
    if not (isinstance(obj, type) and issubclass(obj, Loader)):
        logger.warning("loader %r (%s) skipped: not a kredenc Loader subclass", name, spec)
        return None
    return obj()


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


__all__ = ["BUILTINS", "GROUP", "loader_for", "loaders", "supported_suffixes"]
