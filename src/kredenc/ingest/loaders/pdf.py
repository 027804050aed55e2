"""PDF loader: text per page with PDFium (pypdfium2, Apache-2.0/BSD), pages numbered from 1.

Reading order. PDFium's text ("text page") follows the order in which the page's
content stream draws its text, with a line break wherever the baseline changes.
Typesetting programs (LaTeX, the Federal Register's, word processors) draw a column to
its end before the next, so this reads two- and three-column pages column by column.
A table drawn column by column comes out as a *column dump* (mostly one-word lines);
for such a page we rebuild the rows from the positions of PDFium's text runs: runs
whose vertical extents overlap form a row, read left to right, and a gap wider than
the text's height between two runs becomes `` | ``. The rows replace the plain text
only if they hold the same characters (within 2 %: rotated or overlapping text, as in
figures, is picked up twice by position and stays plain) and halve the share of
one-word lines.

PDFium (C++) extracts the Attention paper's 15 pages in about 0.1 s of CPU, against
0.75 s for pypdf's plain mode, the parser used before; see docs/benchmarks.md,
"Knowledge base ingestion".

Clean-up: Unicode NFKC (ligatures such as "ﬁ" become "fi", "ϵ" becomes "ε"), soft
hyphens and control characters dropped, spaces collapsed, and words hyphenated at a
line break joined again ("transfor-/mation" -> "transformation") unless the document
writes the hyphenated compound elsewhere ("source-/target" stays "source-target").
PDFium marks a hyphen at a line end as U+FFFE and joins the two lines; we turn it back
into "-" and a line break so that this rule decides. Two more PDFium habits are
undone: a line that starts with closing punctuation (PDFium breaks the line where the
baseline moves back after a superscript: "10⁻⁹/. We") goes on the line before, and a
footnote mark glued to its first word at a line start is split off ("1Preliminary").

Failures are per file: an encrypted, truncated (no ``%%EOF`` marker in its last
1,024 bytes, where readers look for it; PDFium would otherwise quietly rebuild what it
can) or garbage file raises :class:`~kredenc.errors.IngestError` naming the file; a
page PDFium cannot read is skipped, and all such pages are named in one warning.
PDFium is not thread-safe, so one lock serialises every call into it.

Limits (:class:`~kredenc.ingest.loaders.base.LoadLimits`, settings ``ingest_*``): more
pages than ``ingest_max_pages`` fails the file before any page is read; a page's
characters are counted inside PDFium and a page longer than ``ingest_max_page_chars``
is cut there, before its text is copied out or normalised (one warning names the pages
cut; the document's meta lists them as ``cut_pages``); past ``ingest_max_chars`` in all,
or ``ingest_timeout_s`` (checked between pages), the file fails.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import unicodedata
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path
from typing import ClassVar

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from kredenc.config import Settings
from kredenc.errors import IngestError
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, LoadLimits, report_page, resolve_source

logger = logging.getLogger(__name__)

# PDFium keeps global state and must not be entered from two threads at once, even for
# different documents.
_PDFIUM_LOCK = threading.Lock()

_DAMAGED_HINT = "the file looks damaged or truncated; download or export it again"
# Readers look for the end-of-file marker in the last 1,024 bytes.
_EOF_WINDOW = 1024

# A page whose plain text is at least this share of one-word lines (and has at least
# _DUMP_MIN_LINES lines) is re-read as rows.
_DUMP_RATIO = 0.3
_DUMP_MIN_LINES = 10
# Rows replace plain text only if their characters are this close to the plain text's.
_ROWS_INK_TOLERANCE = 0.02
_CELL = " | "

# A line-break hyphen after a word this long that the text also uses alone is kept.
_LONG_HEAD = 6
_LINE_BREAK_HYPHEN = re.compile(r"([^\W\d_]+)[-\u2010]\n([^\W\d_]+)")
_INLINE_COMPOUND = re.compile(r"([^\W\d_]+)[-\u2010]([^\W\d_]+)")
_WORD = re.compile(r"[^\W\d_]+")
_SPACES = re.compile(r"[ \t\u00a0]+")
# A line break before closing punctuation: PDFium breaks the line where the baseline
# moves back after a superscript ("ε = 10−9" / ". We varied").
_PUNCT_LINE = re.compile(r"\n(?=[.,;:!?)\]](?:\s|$))")
# A footnote mark at the start of a line, which PDFium glues to the footnote's first
# word ("1Preliminary report").
_FOOTNOTE_MARK = re.compile(r"^(\d{1,2})(?=[A-Z][a-z]{2})", re.M)
_DROP = dict.fromkeys(
    [c for c in range(32) if c not in (9, 10)] + [0x7F, 0xAD, 0x200B, 0x200C, 0x200D, 0xFEFF]
)
_FILE_LIKE_TITLE = re.compile(
    r"\.(exe|docx?|pdf|tex|dvi|indd|ps|rtf|xlsx?|pptx?)$|^Microsoft ", re.I
)
_PDF_DATE = re.compile(
    r"D:(\d{4})(\d\d)?(\d\d)?(\d\d)?(\d\d)?(\d\d)?(?:([Zz])|([+-])(\d\d)'?(\d\d)?'?)?"
)

# A text run: left, bottom, right, top (PDF points, y upwards) and its text.
Run = tuple[float, float, float, float, str]


class PdfLoader(Loader):
    """Reads a PDF file into one document with a section per page."""

    name: ClassVar[str] = "pdf"
    suffixes: ClassVar[tuple[str, ...]] = (".pdf",)

    def __init__(self, limits: LoadLimits | None = None) -> None:
        self.limits = limits or LoadLimits()

    @classmethod
    def from_settings(cls, settings: Settings) -> PdfLoader:
        """A loader with the ``ingest_*`` limits of ``settings``."""
        return cls(LoadLimits.from_settings(settings))

    def load(self, source: str) -> list[LoadedDocument]:
        path = Path(source)
        with _PDFIUM_LOCK:
            pdf = _open(path)
            try:
                raw_pages, row_pages, cut_pages = _extract(pdf, path, self.limits)
                info = _metadata(pdf)
            finally:
                pdf.close()
        texts = clean_pages(raw_pages)
        sections = [Section(text, page=i + 1) for i, text in enumerate(texts) if text]
        if not sections:
            raise IngestError(
                f"{path}: no extractable text in {len(raw_pages)} page(s)",
                "the PDF may hold scanned images only; run OCR on it first (e.g. ocrmypdf)",
            )
        meta: dict[str, object] = {"pages": len(raw_pages)}
        if row_pages:
            meta["layout_pages"] = row_pages
        if cut_pages:
            meta["cut_pages"] = cut_pages
        meta.update(info)
        title = str(meta.pop("title", "")) or path.stem
        return [LoadedDocument(resolve_source(source), title, self.name, sections, meta=meta)]


def _open(path: Path) -> pdfium.PdfDocument:
    """Open ``path`` (decrypted if it has an empty user password)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(
            f"{path}: cannot read file: {exc.strerror or exc}",
            "check that the file exists and is readable",
        ) from exc
    if b"%%EOF" not in data[-_EOF_WINDOW:]:
        what = "empty file" if not data else "no %%EOF marker at its end"
        raise IngestError(f"{path}: not a readable PDF ({what})", _DAMAGED_HINT)
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code == pdfium_c.FPDF_ERR_PASSWORD:
            raise IngestError(
                f"{path}: the PDF is encrypted with a password",
                "decrypt it first, e.g. qpdf --decrypt --password=PASSWORD in.pdf out.pdf",
            ) from exc
        if code == pdfium_c.FPDF_ERR_SECURITY:
            raise IngestError(
                f"{path}: the PDF uses an encryption scheme PDFium does not support",
                "decrypt it first, e.g. qpdf --decrypt in.pdf out.pdf",
            ) from exc
        raise IngestError(f"{path}: not a readable PDF ({exc})", _DAMAGED_HINT) from exc


def _extract(
    pdf: pdfium.PdfDocument, path: Path, limits: LoadLimits
) -> tuple[list[str], list[int], list[int]]:
    """The raw text of every page ("" for a page that failed), the pages read as rows
    and the pages cut at ``limits.max_page_chars``.

    Fails the file past ``limits.max_pages``, ``limits.max_chars`` or
    ``limits.timeout_s`` (checked between pages). Pages PDFium cannot read and pages
    cut are each reported in one warning line, however many there are.
    """
    count = len(pdf)
    if count > limits.max_pages:
        raise IngestError(
            f"{path}: {count} pages, more than the limit of {limits.max_pages} "
            "(setting ingest_max_pages)",
            "raise ingest_max_pages in kredenc.toml if the file is genuine, or split it",
        )
    deadline = time.monotonic() + limits.timeout_s
    texts: list[str] = []
    row_pages: list[int] = []
    cut_pages: list[int] = []
    failed: list[int] = []
    first_error = ""
    total = 0
    for number in range(1, count + 1):
        if time.monotonic() > deadline:
            raise IngestError(
                f"{path}: parsing took longer than {limits.timeout_s:g} s "
                f"(setting ingest_timeout_s); stopped at page {number} of {count}",
                "raise ingest_timeout_s in kredenc.toml if the file is genuine",
            )
        try:
            text, as_rows, cut = _read_page(pdf, number - 1, limits.max_page_chars)
        except pdfium.PdfiumError as exc:
            failed.append(number)
            first_error = first_error or str(exc)
            text, as_rows, cut = "", False, False
        total += len(text)
        if total > limits.max_chars:
            raise IngestError(
                f"{path}: more than {limits.max_chars} characters of text by page {number} "
                "(setting ingest_max_chars)",
                "raise ingest_max_chars in kredenc.toml if the file is genuine, or split it",
            )
        texts.append(text)
        if as_rows:
            row_pages.append(number)
        if cut:
            cut_pages.append(number)
        report_page(str(path), number, count)
    if texts and len(failed) == len(texts):
        raise IngestError(
            f"{path}: PDFium could read none of its {len(failed)} page(s)", _DAMAGED_HINT
        )
    if failed:
        logger.warning(
            "%s: %d page(s) skipped, PDFium cannot read them (%s): pages %s",
            path,
            len(failed),
            first_error,
            _page_list(failed),
        )
    if cut_pages:
        logger.warning(
            "%s: %d page(s) longer than %d characters were cut at the limit "
            "(setting ingest_max_page_chars): pages %s",
            path,
            len(cut_pages),
            limits.max_page_chars,
            _page_list(cut_pages),
        )
    return texts, row_pages, cut_pages


def _page_list(pages: list[int], shown: int = 10) -> str:
    listed = ", ".join(str(p) for p in pages[:shown])
    return listed + (f" and {len(pages) - shown} more" if len(pages) > shown else "")


def _read_page(pdf: pdfium.PdfDocument, index: int, max_chars: int) -> tuple[str, bool, bool]:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            return page_text(textpage, max_chars)
        finally:
            textpage.close()
    finally:
        page.close()


def page_text(textpage: pdfium.PdfTextPage, max_chars: int | None = None) -> tuple[str, bool, bool]:
    """The text of one page, whether it was rebuilt as rows (see the module doc) and
    whether it was cut at ``max_chars``.

    The characters are counted before any text is copied out of PDFium, so a page of
    millions of characters costs ``max_chars`` of Python memory, not millions.
    """
    count = textpage.count_chars()
    if max_chars is not None and count > max_chars:
        cut = textpage.get_text_range(0, max_chars)
        return cut.replace("\r\n", "\n").replace("\ufffe", "-\n"), False, True
    plain = textpage.get_text_range().replace("\r\n", "\n").replace("\ufffe", "-\n")
    ratio = _one_word_ratio(plain)
    if ratio < _DUMP_RATIO:
        return plain, False, False
    runs = _runs(textpage)
    rows = rows_from_runs(runs)
    ink = _ink(plain)
    same_text = abs(sum(_ink(run[4]) for run in runs) - ink) <= _ROWS_INK_TOLERANCE * ink
    if same_text and _one_word_ratio(rows, min_lines=1) <= ratio / 2:
        return rows, True, False
    return plain, False, False


def _runs(textpage: pdfium.PdfTextPage) -> list[Run]:
    """PDFium's text runs (a stretch of characters on one line) with their boxes."""
    runs: list[Run] = []
    for i in range(textpage.count_rects()):
        left, bottom, right, top = textpage.get_rect(i)
        text = " ".join(textpage.get_text_bounded(left, bottom, right, top).split())
        if text:
            runs.append((left, bottom, right, top, text))
    return runs


def rows_from_runs(runs: list[Run]) -> str:
    """Text runs as lines of a table: one line per row, wide gaps as `` | ``.

    A run joins the row above it when their vertical extents overlap by at least half
    the smaller height (so a superscript stays on its line); within a row, runs are
    read left to right.
    """
    rows: list[tuple[float, float, list[Run]]] = []  # bottom, top, runs
    for run in sorted(runs, key=lambda r: (-(r[1] + r[3]), r[0])):
        _, bottom, _, top, _ = run
        if rows:
            row_bottom, row_top, members = rows[-1]
            overlap = min(top, row_top) - max(bottom, row_bottom)
            if overlap >= 0.5 * min(top - bottom, row_top - row_bottom):
                members.append(run)
                rows[-1] = (min(bottom, row_bottom), max(top, row_top), members)
                continue
        rows.append((bottom, top, [run]))
    lines: list[str] = []
    for _, _, members in rows:
        members.sort(key=lambda r: r[0])
        parts = [members[0][4]]
        for before, after in pairwise(members):
            height = min(before[3] - before[1], after[3] - after[1])
            parts.append(_CELL if after[0] - before[2] > height else " ")
            parts.append(after[4])
        lines.append("".join(parts))
    return "\n".join(lines)


def _one_word_ratio(text: str, min_lines: int = _DUMP_MIN_LINES) -> float:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < min_lines:
        return 0.0
    return sum(1 for line in lines if len(line.split()) <= 1) / len(lines)


def _ink(text: str) -> int:
    return sum(1 for c in text if not c.isspace())


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
    text = _PUNCT_LINE.sub("", "\n".join(out))
    return _FOOTNOTE_MARK.sub(r"\1 ", text).strip()


def _metadata(pdf: pdfium.PdfDocument) -> dict[str, object]:
    """Title, author and creation date from the document information, where usable."""
    try:
        info = pdf.get_metadata_dict(skip_empty=True)
    except pdfium.PdfiumError as exc:
        logger.debug("unreadable PDF metadata: %s", exc)
        return {}
    title, author = info.get("Title", "").strip(), info.get("Author", "").strip()
    meta: dict[str, object] = {}
    if title and len(title.split()) >= 2 and not _FILE_LIKE_TITLE.search(title):
        meta["title"] = unicodedata.normalize("NFKC", title)
    if author:
        meta["author"] = author
    created = pdf_date(info.get("CreationDate", ""))
    if created is not None:
        meta["created"] = created.isoformat()
    return meta


def pdf_date(text: str) -> datetime | None:
    """A PDF date (``D:YYYYMMDDHHmmSS+HH'mm'``, any tail left out) or None if it is not one."""
    match = _PDF_DATE.match(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, utc, sign, tz_hour, tz_minute = match.groups()
    tz: timezone | None = None
    if utc:
        tz = UTC
    elif sign:
        offset = timedelta(hours=int(tz_hour), minutes=int(tz_minute or 0))
        tz = timezone(-offset if sign == "-" else offset)
    try:
        return datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            tzinfo=tz,
        )
    except ValueError:
        return None


__all__ = ["PdfLoader", "clean_pages", "page_text", "pdf_date", "rows_from_runs"]
