"""The loader seam: one small interface every loader implements.

A loader declares a ``name`` (stored on every chunk as its ``loader``) and the file
``suffixes`` it reads, and implements :meth:`Loader.load`. Loaders are discovered
through the ``kredenc.loaders`` entry point group; the built-ins register through the
same door (see :mod:`kredenc.ingest.loaders.registry`).

A loader that cannot read one source raises :class:`~kredenc.errors.IngestError`
with a message that starts with the source (``"<file>: <what is wrong>"``) and a hint;
the rest of an ingest goes on.
"""

from __future__ import annotations

import codecs
import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kredenc.config import Settings
from kredenc.errors import IngestError
from kredenc.ingest.document import LoadedDocument

logger = logging.getLogger(__name__)


class Loader(ABC):
    """Reads one kind of source into documents."""

    #: Stable name, stored on chunks as ``loader`` (e.g. ``"pdf"``).
    name: ClassVar[str] = ""
    #: Lower-case file suffixes with the dot (e.g. ``(".md", ".markdown")``).
    suffixes: ClassVar[tuple[str, ...]] = ()
    #: Loaders are asked in order of descending priority (then name); a loader that
    #: claims a narrower kind of source than another (a Notion export is also a
    #: folder of markdown files) sets a higher one.
    priority: ClassVar[int] = 0

    def can_load(self, source: str) -> bool:
        """Whether this loader reads ``source``; by default, a local file by suffix."""
        return not is_url(source) and Path(source).suffix.lower() in self.suffixes

    @abstractmethod
    def load(self, source: str) -> list[LoadedDocument]:
        """Read ``source`` into one or more documents.

        Raises :class:`~kredenc.errors.IngestError` when the source cannot be read.
        """


def is_url(source: str) -> bool:
    """Whether ``source`` is a URL (``scheme://...``) rather than a local path."""
    return "://" in source


def resolve_source(source: str) -> str:
    """The canonical form of a file source: its absolute, resolved path."""
    return str(Path(source).expanduser().resolve())


def read_text_file(path: Path) -> str:
    """Read a text file: UTF-8 (BOM stripped) or UTF-16 with a BOM; newlines as ``\\n``.

    Text that is not UTF-8 is read as Windows-1252 with a warning; a file with NUL
    bytes and no UTF-16 BOM is taken for binary and refused.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(
            f"{path}: cannot read file: {exc.strerror or exc}",
            "check that the file exists and is readable",
        ) from exc
    return decode_text(data, str(path)).replace("\r\n", "\n").replace("\r", "\n")


#: The reason reported for an entry skipped because its resolved path leaves the folder.
LEAVES_FOLDER = "symlink leaves the folder"
#: The reason a walk skips a symlink whose target does not exist (followed or not).
DANGLING = "symlink to nothing (its target does not exist)"
#: The reason a source with no text to file (an empty file, a lone heading) is skipped.
EMPTY = "empty file"

#: ``on_skip(source, reason)``: told of each entry a walk leaves out for a reason.
OnSkip = Callable[[str, str], None]


def _log_skip(source: str, reason: str) -> None:
    logger.warning("%s: skipped: %s", source, reason)


@dataclass(frozen=True)
class SymlinkPolicy:
    """Whether a walk follows symlinks out of its folder, and whom it tells of skips."""

    follow: bool = False
    on_skip: OnSkip = _log_skip


_SAFE = SymlinkPolicy()  # frozen: safe to share as the default
_POLICY: ContextVar[SymlinkPolicy] = ContextVar("kredenc_symlink_policy", default=_SAFE)


@contextmanager
def symlink_policy(*, follow: bool = False, on_skip: OnSkip | None = None) -> Iterator[None]:
    """Set the symlink policy of the walks (and folder loaders) run inside the block."""
    token = _POLICY.set(SymlinkPolicy(follow, on_skip or _log_skip))
    try:
        yield
    finally:
        _POLICY.reset(token)


#: ``on_page(source, page, pages)``: a loader has read page ``page`` of ``pages``.
OnPage = Callable[[str, int, int], None]
_ON_PAGE: ContextVar[OnPage | None] = ContextVar("kredenc_on_page", default=None)


@contextmanager
def page_progress(on_page: OnPage) -> Iterator[None]:
    """Have the loaders run inside the block report each page they read (a progress
    bar that moves inside a long PDF rather than once per file)."""
    token = _ON_PAGE.set(on_page)
    try:
        yield
    finally:
        _ON_PAGE.reset(token)


def report_page(source: str, page: int, pages: int) -> None:
    """Called by a loader after reading page ``page`` (from 1) of ``pages``."""
    on_page = _ON_PAGE.get()
    if on_page is not None:
        on_page(source, page, pages)


def follows_symlinks() -> bool:
    """Whether the current symlink policy follows symlinks out of a folder."""
    return _POLICY.get().follow


def admit(root: Path, path: Path) -> bool:
    """Whether ``path`` (found under the resolved folder ``root``) may be read.

    An entry whose resolved path leaves ``root`` is admitted only when the current
    policy follows symlinks; otherwise it is reported as skipped.
    """
    policy = _POLICY.get()
    if not path.is_symlink():
        return True
    if not path.exists():  # dangling: nothing to read, wherever it would lead
        policy.on_skip(str(path), DANGLING)
        return False
    if policy.follow:
        return True
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        target = None
    if target is not None and target.is_relative_to(root):
        return True
    policy.on_skip(str(path), LEAVES_FOLDER)
    return False


_DEFAULTS = Settings.model_fields


@dataclass(frozen=True)
class LoadLimits:
    """How much of one local file a loader reads (settings ``ingest_*``).

    ``max_bytes``: the file's size; ``max_pages``: pages of a paged document;
    ``max_page_chars``: characters kept of one page, and of one line of any document
    (the rest is cut, with a warning);
    ``max_chars``: characters of one document; ``timeout_s``: time to parse one file.
    Past any but ``max_page_chars`` the file fails and nothing of it is filed. The
    defaults are the settings' defaults.
    """

    max_bytes: int = _DEFAULTS["ingest_max_bytes"].default
    max_pages: int = _DEFAULTS["ingest_max_pages"].default
    max_page_chars: int = _DEFAULTS["ingest_max_page_chars"].default
    max_chars: int = _DEFAULTS["ingest_max_chars"].default
    timeout_s: float = _DEFAULTS["ingest_timeout_s"].default

    @classmethod
    def from_settings(cls, settings: Settings) -> LoadLimits:
        return cls(
            max_bytes=settings.ingest_max_bytes,
            max_pages=settings.ingest_max_pages,
            max_page_chars=settings.ingest_max_page_chars,
            max_chars=settings.ingest_max_chars,
            timeout_s=settings.ingest_timeout_s,
        )

    def check_file(self, source: str) -> None:
        """Fail a local file larger than ``max_bytes`` before it is read."""
        if is_url(source):
            return  # a URL's size is bounded by the fetch (setting fetch_max_bytes)
        try:
            size = Path(source).stat().st_size
        except OSError:
            return  # the loader says what is wrong with it
        if Path(source).is_file() and size > self.max_bytes:
            raise IngestError(
                f"{source}: {size} bytes is larger than the limit of {self.max_bytes} bytes "
                "(setting ingest_max_bytes)",
                "raise ingest_max_bytes in kredenc.toml if the file is genuine",
            )

    def cut_lines(self, docs: list[LoadedDocument]) -> None:
        """Cut each line longer than ``max_page_chars`` at that many characters, with
        one warning a document (``meta["cut_lines"]``: how many were cut).

        A file without pages (Markdown, text, HTML, Notion) is bounded as a PDF's pages
        are: a 10 MB file on one line is 100,000 characters (about 125 chunks), not
        12,500 chunks to embed. A PDF's pages are cut already, so none of its lines is
        longer.
        """
        limit = self.max_page_chars
        for doc in docs:
            cut = 0
            for section in doc.sections:
                if len(section.text) <= limit:
                    continue
                lines = section.text.split("\n")
                cut += sum(len(line) > limit for line in lines)
                section.text = "\n".join(line[:limit] for line in lines)
            if cut:
                doc.meta["cut_lines"] = cut
                logger.warning(
                    "%s: %d line(s) longer than %d characters were cut at the limit "
                    "(setting ingest_max_page_chars)",
                    doc.source,
                    cut,
                    limit,
                )

    def check_documents(self, docs: list[LoadedDocument]) -> None:
        """Fail a load with a document of more than ``max_chars`` characters."""
        for doc in docs:
            chars = sum(len(section.text) for section in doc.sections)
            if chars > self.max_chars:
                raise IngestError(
                    f"{doc.source}: more than {self.max_chars} characters "
                    f"(setting ingest_max_chars; it has {chars})",
                    "raise ingest_max_chars in kredenc.toml if the file is genuine, or split it",
                )


class _Collapse(logging.Filter):
    """Lets the first ``keep`` records of each message template through, counts the rest."""

    def __init__(self, keep: int) -> None:
        super().__init__()
        self.keep = keep
        self.seen: Counter[tuple[str, int, str]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        self.seen[key] += 1
        return self.seen[key] <= self.keep


@contextmanager
def collapsed_warnings(*names: str, keep: int = 3) -> Iterator[None]:
    """Collapse repeated log records of the loggers ``names`` inside the block.

    Of each message template (``"page %d skipped"``), the first ``keep`` records are
    logged; the rest are counted, and one line per template says how many were left
    out when the block ends. A parser that warns once per broken object of a hostile
    file writes a few lines, not a million.
    """
    loggers = [logging.getLogger(name) for name in names]
    collapse = _Collapse(keep)
    for each in loggers:
        each.addFilter(collapse)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(collapse)
        for (name, level, template), count in collapse.seen.items():
            if count > keep:
                logging.getLogger(name).log(
                    level, "%d more warnings like %r (collapsed)", count - keep, template
                )


def decode_text(data: bytes, name: str) -> str:
    """Decode the bytes of a text file named ``name`` (see :func:`read_text_file`)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise IngestError(
                f"{name}: broken UTF-16 text (byte {exc.start})", "convert the file to UTF-8"
            ) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if b"\x00" in data:
            raise IngestError(
                f"{name}: looks like a binary file, not text",
                "pass a text file, or a file type with its own loader",
            ) from exc
    logger.warning("%s: not valid UTF-8; reading it as Windows-1252", name)
    return data.decode("cp1252", errors="replace")


__all__ = [
    "DANGLING",
    "EMPTY",
    "LEAVES_FOLDER",
    "LoadLimits",
    "Loader",
    "OnPage",
    "SymlinkPolicy",
    "admit",
    "collapsed_warnings",
    "decode_text",
    "follows_symlinks",
    "is_url",
    "page_progress",
    "read_text_file",
    "report_page",
    "resolve_source",
    "symlink_policy",
]
