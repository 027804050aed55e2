"""PDF loader: text per page with pypdf (BSD), pages numbered from 1.

Reading order. pypdf's default ("plain") extraction follows the order in which the
page's content stream draws its text. Typesetting programs (LaTeX, the Federal
Register's, word processors) draw a column to its end before the next, so this reads
two- and three-column pages column by column. pypdf's "layout" mode instead renders a
fixed-width grid of the page, which puts the lines of neighbouring columns side by
side; we use it only for pages whose plain text came out as a *column dump* (a table
drawn column by column: mostly one-word lines), where the grid gives the table back
its rows. Runs of three or more spaces between cells become `` | ``.

Clean-up: Unicode NFKC (ligatures such as "ﬁ" become "fi", "ϵ" becomes "ε"), soft
hyphens and control characters dropped, spaces collapsed, and words hyphenated at a
line break joined again ("transfor-/mation" -> "transformation") unless the document
writes the hyphenated compound elsewhere ("source-/target" stays "source-target").

Failures are per file: an encrypted, truncated or garbage file raises
:class:`~kredenc.errors.IngestError` naming the file; a single page pypdf cannot read
is skipped with a warning.
"""

from __future__ import annotations

import logging
import re
import unicodedata
import zlib
from collections import Counter
from pathlib import Path
from typing import ClassVar

from pypdf import PageObject, PdfReader
from pypdf.errors import DependencyError, PyPdfError

from kredenc.errors import IngestError
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, resolve_source

logger = logging.getLogger(__name__)

# pypdf logs a WARNING for every recoverable quirk of a file (a font it reads without
# fontTools, rotated text, a damaged cross-reference table); one ingest of a 15-page
# report can print hundreds of lines that nobody can act on. What matters (a page or
# a file that cannot be read) we log ourselves, so unless the application has set a
# level for pypdf's logger, keep it to errors.
_PYPDF_LOGGER = logging.getLogger("pypdf")
if _PYPDF_LOGGER.level == logging.NOTSET:
    _PYPDF_LOGGER.setLevel(logging.ERROR)

# What pypdf raises on a damaged file besides its own errors: it walks untrusted
# object trees, and a malformed one surfaces as a lookup or type error, a broken
# stream as a zlib error, a cyclic or absurdly deep one as a RecursionError.
_PAGE_ERRORS = (
    PyPdfError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    RecursionError,
    zlib.error,
)

_DAMAGED_HINT = "the file looks damaged or truncated; download or export it again"

# A page whose plain text is at least this share of one-word lines (and has at least
# _DUMP_MIN_LINES lines) is re-read in layout mode.
_DUMP_RATIO = 0.3
_DUMP_MIN_LINES = 10
# Layout text replaces plain text only if it kept this share of the characters.
_LAYOUT_MIN_KEPT = 0.95

# A line-break hyphen after a word this long that the text also uses alone is kept.
_LONG_HEAD = 6
_LINE_BREAK_HYPHEN = re.compile(r"([^\W\d_]+)[-\u2010]\n([^\W\d_]+)")
_INLINE_COMPOUND = re.compile(r"([^\W\d_]+)[-\u2010]([^\W\d_]+)")
_WORD = re.compile(r"[^\W\d_]+")
_SPACES = re.compile(r"[ \t\u00a0]+")
_CELL_GAP = re.compile(r" {3,}")
_DROP = dict.fromkeys(
    [c for c in range(32) if c not in (9, 10)] + [0x7F, 0xAD, 0x200B, 0x200C, 0x200D, 0xFEFF]
)
_FILE_LIKE_TITLE = re.compile(
    r"\.(exe|docx?|pdf|tex|dvi|indd|ps|rtf|xlsx?|pptx?)$|^Microsoft ", re.I
)


class PdfLoader(Loader):
    """Reads a PDF file into one document with a section per page."""

    name: ClassVar[str] = "pdf"
    suffixes: ClassVar[tuple[str, ...]] = (".pdf",)

    def load(self, source: str) -> list[LoadedDocument]:
        path = Path(source)
        reader = _open(path)
        raw_pages, layout_pages = _extract(reader, path)
        texts = clean_pages(raw_pages)
        sections = [Section(text, page=i + 1) for i, text in enumerate(texts) if text]
        if not sections:
            raise IngestError(
                f"{path}: no extractable text in {len(raw_pages)} page(s)",
                "the PDF may hold scanned images only; run OCR on it first (e.g. ocrmypdf)",
            )
        meta: dict[str, object] = {"pages": len(raw_pages)}
        if layout_pages:
            meta["layout_pages"] = layout_pages
        meta.update(_metadata(reader))
        title = str(meta.pop("title", "")) or path.stem
        return [LoadedDocument(resolve_source(source), title, self.name, sections, meta=meta)]


def _open(path: Path) -> PdfReader:
    """Open ``path`` and decrypt it if it has an empty user password."""
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(
                f"{path}: the PDF is encrypted with a password",
                "decrypt it first, e.g. qpdf --decrypt --password=PASSWORD in.pdf out.pdf",
            )
        len(reader.pages)  # reads the page tree: a broken one fails here, not later
    except DependencyError as exc:
        raise IngestError(
            f"{path}: the PDF is encrypted with AES, which needs the 'cryptography' package",
            "pip install cryptography",
        ) from exc
    except OSError as exc:
        raise IngestError(
            f"{path}: cannot read file: {exc.strerror or exc}",
            "check that the file exists and is readable",
        ) from exc
    except _PAGE_ERRORS as exc:
        raise IngestError(f"{path}: not a readable PDF ({exc})", _DAMAGED_HINT) from exc
    return reader


def _extract(reader: PdfReader, path: Path) -> tuple[list[str], list[int]]:
    """The raw text of every page ("" for a page that failed) and the layout-mode pages."""
    texts: list[str] = []
    layout_pages: list[int] = []
    failed = 0
    for number, page in enumerate(reader.pages, start=1):
        try:
            text, used_layout = page_text(page)
        except _PAGE_ERRORS as exc:
            logger.warning("%s: page %d skipped, pypdf cannot read it: %r", path, number, exc)
            failed += 1
            text, used_layout = "", False
        texts.append(text)
        if used_layout:
            layout_pages.append(number)
    if texts and failed == len(texts):
        raise IngestError(f"{path}: pypdf could read none of its {failed} page(s)", _DAMAGED_HINT)
    return texts, layout_pages


def page_text(page: PageObject) -> tuple[str, bool]:
    """The text of one page and whether it came from layout mode (see the module doc)."""
    plain = page.extract_text()
    if _one_word_ratio(plain) < _DUMP_RATIO:
        return plain, False
    layout = page.extract_text(extraction_mode="layout", layout_mode_space_vertically=False)
    kept = _ink(layout) >= _LAYOUT_MIN_KEPT * _ink(plain)
    if kept and _one_word_ratio(layout, min_lines=1) <= _one_word_ratio(plain) / 2:
        return _format_layout(layout), True
    return plain, False


def _one_word_ratio(text: str, min_lines: int = _DUMP_MIN_LINES) -> float:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < min_lines:
        return 0.0
    return sum(1 for line in lines if len(line.split()) <= 1) / len(lines)


def _ink(text: str) -> int:
    return sum(1 for c in text if not c.isspace())


def _format_layout(text: str) -> str:
    """A layout-mode grid as rows: cells split by wide gaps become ``a | b``."""
    rows = [_CELL_GAP.sub(" | ", line.strip()) for line in text.splitlines()]
    return "\n".join(rows)


def clean_pages(pages: list[str]) -> list[str]:
    """Normalise the raw text of a document's pages (see the module doc)."""
    pages = [_normalise(text) for text in pages]
    joined = "\n\n".join(pages)
    counts = Counter(w.lower() for w in _WORD.findall(_LINE_BREAK_HYPHEN.sub(" ", joined)))
    compounds = {f"{a}-{b}".lower() for a, b in _INLINE_COMPOUND.findall(joined)}

    def rejoin(match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        hyphenated = f"{head}-{tail}"
        if not tail[0].islower():
            return hyphenated  # "Anglo-/Saxon", "COVID-/19": not a broken word
        if (head + tail).lower() in counts:
            return head + tail
        if hyphenated.lower() in compounds:
            return hyphenated  # a compound the text writes elsewhere
        head_is_word = counts[head.lower()] > 0
        if head_is_word and (counts[tail.lower()] > 0 or len(head) >= _LONG_HEAD):
            return hyphenated  # "sequence-/aligned": two words in their own right
        return head + tail

    return [_LINE_BREAK_HYPHEN.sub(rejoin, text) for text in pages]


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFKC", text).translate(_DROP)
    lines = (_SPACES.sub(" ", line).strip() for line in text.splitlines())
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):  # at most one blank line in a row
            out.append(line)
    return "\n".join(out).strip()


def _metadata(reader: PdfReader) -> dict[str, object]:
    """Title, author and creation date from the document information, where usable."""
    try:
        info = reader.metadata
        if info is None:
            return {}
        title, author, created = info.title, info.author, info.creation_date
    except _PAGE_ERRORS as exc:
        logger.debug("unreadable PDF metadata: %r", exc)
        return {}
    meta: dict[str, object] = {}
    if title and len(title.split()) >= 2 and not _FILE_LIKE_TITLE.search(title.strip()):
        meta["title"] = unicodedata.normalize("NFKC", title).strip()
    if author and author.strip():
        meta["author"] = author.strip()
    if created is not None:
        meta["created"] = created.isoformat()
    return meta


__all__ = ["PdfLoader", "clean_pages", "page_text"]
