"""What ``POST /ingest`` may read: paths inside the server's roots, public URLs, uploads.

Every source a client names is hostile until checked here, before a job is queued:

* a path must resolve (symlinks followed, ``..`` collapsed) inside one of the
  configured roots (``server_roots``, ``kredenc serve --root``); anything else is
  refused the same way whether or not it exists, so a client learns nothing about the
  files outside. Folders inside a root are walked without following symlinks that
  leave them (those files land in the report's ``skipped``).
* a URL must be http(s) and not name a private, loopback or link-local address
  (:func:`kredenc.ingest.fetch.check_url`); a name is checked again when fetched, on
  the address connected to and on every redirect (the fetcher's guard).
* an upload is saved under the store's ``uploads/`` folder with a generated name that
  keeps only its extension (the client's filename never reaches the file system),
  and is filed under its uploaded file name; the file is removed once the job is over.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kredenc.config import Settings
from kredenc.errors import InvalidInput
from kredenc.ingest.fetch import check_url
from kredenc.ingest.loaders.base import is_url
from kredenc.ingest.loaders.registry import supported_suffixes
from kredenc.interfaces.guard import valid_text
from kredenc.interfaces.server.jobs import UPLOADS, Refused

#: Sources one request may name (paths, URLs or files).
MAX_SOURCES = 100
#: Longest file name kept for an upload (characters).
MAX_NAME = 200

_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
_SUFFIX = re.compile(r"\.[a-z0-9]{1,12}")


@dataclass
class Intake:
    """What a job reads: ``inputs`` for the ingest, ``sources`` as the client sees them,
    ``names`` (saved upload → its name) and ``cleanup`` (files to remove after)."""

    inputs: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    cleanup: list[Path] = field(default_factory=list)


def _count(what: str, items: Sequence[object]) -> None:
    if len(items) > MAX_SOURCES:
        raise InvalidInput(
            f"{len(items)} {what} in one request, more than {MAX_SOURCES}",
            "send them in several requests, or name a folder",
        )


def inside_roots(roots: Sequence[Path], paths: Sequence[str]) -> Intake:
    """The resolved ``paths``, each inside one of ``roots`` (resolved); a relative path is
    taken inside the first root."""
    if not roots:
        raise Refused(
            403,
            "no_roots",
            "this server ingests no paths: it has no folders to ingest from",
            "upload the files instead, or have the server started with --root DIR "
            "(or the server_roots setting in kredenc.toml)",
        )
    _count("paths", paths)
    out = Intake()
    for raw in paths:
        if not raw.strip() or _UNSAFE.search(raw) or is_url(raw) or not valid_text(raw):
            raise InvalidInput(
                f"path {raw[:100]!r} is not a file path",
                "give a path inside the server's folders; URLs go in 'urls'",
            )
        given = Path(raw)
        try:
            resolved = (given if given.is_absolute() else roots[0] / given).resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
            raise InvalidInput(f"path {raw[:100]!r} cannot be resolved ({exc})") from None
        if not any(resolved.is_relative_to(root) for root in roots):
            raise Refused(
                403,
                "path_not_allowed",
                f"path {raw[:100]!r} is outside the folders this server ingests from",
                "give a path inside one of the server's folders (symlinks out of them "
                "are refused), or upload the file (REST: POST /ingest as multipart)",
            )
        if not resolved.exists():
            raise InvalidInput(f"path {raw[:100]!r}: no such file or folder", "check the path")
        out.inputs.append(str(resolved))
        out.sources.append(raw)
    return out


def public_urls(urls: Sequence[str], settings: Settings) -> Intake:
    """The URLs, each refused here already when the fetch would refuse it by its form."""
    _count("URLs", urls)
    out = Intake()
    for url in urls:
        if _UNSAFE.search(url) or not valid_text(url):
            raise InvalidInput(
                f"URL {url[:100]!r} holds control characters or invalid text",
                "give an http:// or https:// URL",
            )
        check_url(
            url,
            allow_private=settings.fetch_allow_private,
            allow_hosts=settings.fetch_allow_hosts,
        )
        out.inputs.append(url)
        out.sources.append(url)
    return out


def upload_name(filename: str | None) -> tuple[str, str]:
    """(the name an upload is filed under, its extension): the last part of the client's
    file name without control characters, and its suffix, which a loader must read."""
    name = _UNSAFE.sub("", (filename or "").replace("\\", "/").rsplit("/", 1)[-1]).strip()
    name = name[-MAX_NAME:]
    suffix = Path(name).suffix.lower()
    if not name or not _SUFFIX.fullmatch(suffix) or suffix not in supported_suffixes():
        raise InvalidInput(
            f"upload {name[:100]!r}: no loader reads this kind of file",
            f"upload files ending in one of {', '.join(supported_suffixes())}",
        )
    return name, suffix


def save_uploads(home: Path, files: Sequence[tuple[str | None, BinaryIO]]) -> Intake:
    """Save ``(filename, data)`` uploads under ``home/uploads`` with generated names."""
    _count("files", files)
    checked = [(upload_name(filename), data) for filename, data in files]
    seen: set[str] = set()
    for (name, _suffix), _data in checked:
        if name in seen:
            raise InvalidInput(f"two uploads are named {name!r}", "send each file once")
        seen.add(name)
    folder = home / UPLOADS
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)  # private to its owner, as the store's folders (whatever the umask)
    out = Intake()
    try:
        for (name, suffix), data in checked:
            path = (folder / f"{secrets.token_hex(16)}{suffix}").resolve()
            out.cleanup.append(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as saved:
                shutil.copyfileobj(data, saved, 1024 * 1024)
            out.inputs.append(str(path))
            out.sources.append(name)
            out.names[str(path)] = name
    except BaseException:
        for path in out.cleanup:
            path.unlink(missing_ok=True)
        raise
    return out
