"""Finding loaders: entry points, the loader for a source, the sources under a folder.

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

import fnmatch
import logging
import os
from collections.abc import Iterable, Iterator
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
                "walk it with iter_sources() to ingest the files in it",
            )
    kinds = ", ".join(supported_suffixes())
    raise IngestError(
        f"{source}: no loader for this kind of source",
        f"supported: {kinds}, Notion export folders" + (", and URLs" if _url_loader() else ""),
    )


def _url_loader() -> bool:
    return any(loader.can_load("https://example.com/") for loader in loaders())


def iter_sources(
    paths: Iterable[str | os.PathLike[str]],
    include: list[str] | None = None,
    exclude: list[str] | None = None,
) -> Iterator[str]:
    """The sources to ingest under ``paths``, each once, in a stable order.

    A URL or a file named in ``paths`` is yielded as given (files resolved to absolute
    paths), whatever its type, so that a source nobody can read fails loudly later
    rather than vanishing. A folder is walked recursively (hidden entries skipped,
    names sorted) and yields the files some loader reads; a Notion export inside it is
    yielded as one source. ``include`` and ``exclude`` are glob patterns matched
    against a file's path relative to the folder walked and against its name
    (``*.pdf``, ``notes/*``); ``exclude`` also prunes folders.
    """
    seen: set[str] = set()
    for item in paths:
        raw = os.fspath(item)
        if is_url(raw):
            candidates: Iterable[str] = [raw]
        else:
            path = Path(raw).expanduser()
            if path.is_dir() and not _is_export(path):
                candidates = _walk(path.resolve(), include or [], exclude or [])
            else:
                candidates = [str(path.resolve())]
        for source in candidates:
            if source not in seen:
                seen.add(source)
                yield source


def _walk(root: Path, include: list[str], exclude: list[str]) -> Iterator[str]:
    suffixes = set(supported_suffixes())
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        kept: list[str] = []
        for name in sorted(dirnames):
            folder = here / name
            rel = folder.relative_to(root).as_posix()
            if name.startswith(".") or _matches(rel, name, exclude):
                continue
            if _is_export(folder):
                if not include or _matches(rel, name, include):
                    yield str(folder)
                continue
            kept.append(name)
        dirnames[:] = kept  # os.walk descends into these only, in this order
        for name in sorted(filenames):
            file = here / name
            rel = file.relative_to(root).as_posix()
            if name.startswith(".") or _matches(rel, name, exclude):
                continue
            if include and not _matches(rel, name, include):
                continue
            if file.suffix.lower() in suffixes:
                yield str(file)
            else:
                logger.debug("%s: skipped, no loader reads %r files", file, file.suffix)


def _matches(rel: str, name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)


def _is_export(path: Path) -> bool:
    """Whether a folder is read whole by a loader (a Notion export) rather than walked."""
    source = str(path)
    return any(loader.can_load(source) for loader in loaders() if not loader.suffixes)


__all__ = ["iter_sources", "loader_for", "loaders", "supported_suffixes"]
