"""The sources under the paths given to an ingest: folders walked, files kept inside them.

A folder is walked recursively (hidden entries skipped, names sorted) and yields the
files some loader reads; a Notion export inside it is yielded as one source. A file
or folder named on the command line is taken as given: the user chose it, so a
symlink named there is read wherever it points.

Inside a walked folder, an entry whose *resolved* path leaves the folder (a symlink
to ``/etc/passwd``, to a folder elsewhere) is not read: it is skipped and reported
(:data:`LEAVES_FOLDER`) through the run's :func:`symlink_policy` (both live in
:mod:`kredenc.ingest.loaders.base`, where every loader can reach them), unless that policy
follows symlinks (``kredenc ingest --follow-symlinks``,
``Kredenc.ingest(follow_symlinks=True)``). Symlinks that resolve inside the folder
are read. Loaders that walk a folder of their own (the Notion export) apply the same
rule through :func:`~kredenc.ingest.loaders.base.admit`. Hard links cannot be told
from ordinary files and are read.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from kredenc.ingest.loaders.base import (
    DANGLING,
    LEAVES_FOLDER,
    SymlinkPolicy,
    admit,
    follows_symlinks,
    is_url,
    symlink_policy,
)
from kredenc.ingest.loaders.registry import loaders, supported_suffixes

logger = logging.getLogger(__name__)


def iter_sources(
    paths: Iterable[str | os.PathLike[str]],
    include: list[str] | None = None,
    exclude: list[str] | None = None,
) -> Iterator[str]:
    """The sources to ingest under ``paths``, each once, in a stable order.

    A URL or a file named in ``paths`` is yielded as given (files as absolute paths,
    their folder resolved and their own name kept, so a symlink's loader is chosen by
    its name as in a walk), whatever its type, so that a source nobody can read fails
    loudly later rather than vanishing. Two paths to one file (a symlink and its
    target) are one source: the first met is yielded. A folder is walked (see the
    module doc). ``include`` and ``exclude`` are glob patterns matched against a
    file's path relative to the folder walked and against its name (``*.pdf``,
    ``notes/*``); ``exclude`` also prunes folders.
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
                candidates = [str(path.absolute().parent.resolve() / path.name)]
        for source in candidates:
            key = source if is_url(source) else _real(source)
            if key not in seen:
                seen.add(key)
                yield source


def _real(source: str) -> str:
    """The resolved path of a local source (itself, for a symlink loop)."""
    try:
        return str(Path(source).resolve())
    except (OSError, RuntimeError):
        return source


def _walk(root: Path, include: list[str], exclude: list[str]) -> Iterator[str]:
    suffixes = set(supported_suffixes())
    follow = follows_symlinks()
    visited: set[Path] = {root}  # folders entered, resolved: a followed link loop ends
    for dirpath, dirnames, filenames in os.walk(root, followlinks=follow):
        here = Path(dirpath)
        kept: list[str] = []
        for name in sorted(dirnames):
            folder = here / name
            rel = folder.relative_to(root).as_posix()
            if name.startswith(".") or _matches(rel, name, exclude):
                continue
            if not admit(root, folder):
                continue
            if _is_export(folder):
                if not include or _matches(rel, name, include):
                    yield str(folder)
                continue
            if follow:
                real = folder.resolve()
                if real in visited:
                    continue
                visited.add(real)
            kept.append(name)
        dirnames[:] = kept  # os.walk descends into these only, in this order
        for name in sorted(filenames):
            file = here / name
            rel = file.relative_to(root).as_posix()
            if name.startswith(".") or _matches(rel, name, exclude):
                continue
            if include and not _matches(rel, name, include):
                continue
            if file.suffix.lower() not in suffixes:
                logger.debug("%s: skipped, no loader reads %r files", file, file.suffix)
            elif admit(root, file):
                yield str(file)


def _matches(rel: str, name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)


def _is_export(path: Path) -> bool:
    """Whether a folder is read whole by a loader (a Notion export) rather than walked."""
    source = str(path)
    return any(loader.can_load(source) for loader in loaders() if not loader.suffixes)


__all__ = [
    "DANGLING",
    "LEAVES_FOLDER",
    "SymlinkPolicy",
    "admit",
    "iter_sources",
    "symlink_policy",
]
