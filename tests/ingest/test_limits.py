"""Resource limits on local input (issue 13, finding 8).

The attacks: a 53 KB PDF of 200 pages of 5.46 M characters each was still loading
after 90 s at 1.15 GB; a 625-byte PDF with a self-referencing page tree wrote 999,999
WARNING lines and reported success. The hostile PDFs are built here, small, from raw
bytes (a compressed content stream makes a page of many characters from a few bytes).
"""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import pytest

from conftest import OpenStore
from kredenc.config import load_settings
from kredenc.errors import IngestError
from kredenc.ingest.loaders.base import collapsed_warnings
from kredenc.ingest.loaders.pdf import PdfLoader

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (numbered from 1; object 1 is the catalog), xref and all."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _stream(data: bytes) -> bytes:
    packed = zlib.compress(data, 9)
    return (
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + (b"\nendstream")
    )


def _text_page(parent: int, contents: int, font: int) -> bytes:
    return (
        b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 600 800] /Contents %d 0 R "
        b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (parent, contents, font)
    )


def huge_pages_pdf(pages: int, chars_per_page: int) -> bytes:
    """``pages`` pages, each drawing ``chars_per_page`` characters (lines of 100 words)."""
    line = b"(" + b"lorem " * 100 + b") Tj T* "
    lines = max(1, chars_per_page // 600)
    content = b"BT /F1 1 Tf 1 TL 10 790 Td " + line * lines + b"ET"
    kids = b" ".join(b"%d 0 R" % (4 + i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        _stream(content),
        *[_text_page(2, 3, 4 + pages) for _ in range(pages)],
        FONT,
    ]
    return _pdf(objects)


def looping_tree_pdf(count: int) -> bytes:
    """A page tree whose root lists itself among its kids and claims ``count`` pages."""
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count %d >>" % count,
            _text_page(2, 4, 5),
            _stream(b"BT /F1 12 Tf 20 700 Td (A real page of text.) Tj ET"),
            FONT,
        ]
    )


def _loader(tmp_path: Path, **limits: object) -> PdfLoader:
    return PdfLoader.from_settings(load_settings(tmp_path / "store", **limits))


def test_hostile_pdfs_are_small(tmp_path: Path) -> None:
    assert len(huge_pages_pdf(200, 1_000_000)) < 60_000
    assert len(looping_tree_pdf(999_999)) < 1_000


def test_a_page_over_the_character_limit_is_cut_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "wide.pdf"
    path.write_bytes(huge_pages_pdf(3, 60_000))
    with caplog.at_level(logging.WARNING):
        [doc] = _loader(tmp_path, ingest_max_page_chars=2_000).load(str(path))
    assert [len(s.text) <= 2_000 for s in doc.sections] == [True, True, True]
    assert doc.sections[0].text.startswith("lorem lorem")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "3 page(s) longer than 2000 characters were cut" in warnings[0]
    assert doc.meta["cut_pages"] == [1, 2, 3]


def test_a_document_over_the_character_limit_fails(tmp_path: Path) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(huge_pages_pdf(5, 60_000))
    with pytest.raises(IngestError, match=r"long\.pdf: more than 100000 characters"):
        _loader(tmp_path, ingest_max_chars=100_000).load(str(path))


def test_too_many_pages_fails_before_reading_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "loop.pdf"
    path.write_bytes(looping_tree_pdf(999_999))
    with caplog.at_level(logging.WARNING), pytest.raises(IngestError) as failed:
        _loader(tmp_path).load(str(path))
    assert "more than the limit of 5000 (setting ingest_max_pages)" in failed.value.message
    assert len(caplog.records) <= 1


def test_unreadable_pages_are_one_warning_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "loop.pdf"
    path.write_bytes(looping_tree_pdf(400))
    with caplog.at_level(logging.WARNING):
        try:
            docs = _loader(tmp_path).load(str(path))
        except IngestError as exc:  # PDFium may read no page at all: also fine
            docs = []
            assert "loop.pdf" in exc.message
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 1, warnings[:3]
    if docs:
        assert len(docs[0].sections) < 400


def test_the_parse_time_limit_fails_the_file(tmp_path: Path) -> None:
    path = tmp_path / "slow.pdf"
    path.write_bytes(huge_pages_pdf(20, 6_000))
    with pytest.raises(IngestError, match=r"slow\.pdf: parsing took longer than 1e-06 s"):
        _loader(tmp_path, ingest_timeout_s=1e-6).load(str(path))


def test_ingest_fails_only_the_file_over_a_limit_and_files_nothing_of_it(
    tmp_path: Path, open_store: OpenStore
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ok.md").write_text("# Fine\n\nA short note about kestrels.\n", encoding="utf-8")
    (folder / "big.txt").write_text("word " * 2_000, encoding="utf-8")
    (folder / "long.md").write_text("# Long\n\n" + "kestrel " * 1_000, encoding="utf-8")
    (folder / "loop.pdf").write_bytes(looping_tree_pdf(999_999))
    with open_store(ingest_max_bytes=9_000, ingest_max_chars=5_000) as kb:
        log = kb.settings.home / "haystack.log"
        report = kb.ingest(folder)
        failed = dict((Path(s).name, e) for s, e in report.failed)
        assert report.documents == 1
        assert sorted(failed) == ["big.txt", "long.md", "loop.pdf"]
        assert "larger than the limit of 9000 bytes (setting ingest_max_bytes)" in failed["big.txt"]
        assert "more than 5000 characters (setting ingest_max_chars" in failed["long.md"]
        assert "setting ingest_max_pages" in failed["loop.pdf"]
        assert all("\n" not in e for e in failed.values())
        size = log.stat().st_size
        assert kb.search("kestrel", mode="lexical")[0].title == "Fine"
        assert kb.ingest(folder / "big.txt").failed and log.stat().st_size == size


def test_repeated_warnings_are_collapsed_into_one_line_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    noisy = logging.getLogger("kredenc.test.noisy")
    with caplog.at_level(logging.WARNING), collapsed_warnings(noisy.name, keep=2):
        for page in range(1000):
            noisy.warning("page %d: broken object", page)
        noisy.warning("something else")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "page 0: broken object",
        "page 1: broken object",
        "something else",
        "998 more warnings like 'page %d: broken object' (collapsed)",
    ]
    noisy.warning("page %d: broken object", 7)  # the filter is gone after the block
    assert caplog.records[-1].getMessage() == "page 7: broken object"


def test_each_page_read_is_reported_for_a_progress_bar(tmp_path: Path) -> None:
    """Issue 16: the bar pulsed "0 sources" through a long PDF; a loader now reports
    every page it reads to whoever asked (the CLI's bar), in order."""
    from kredenc.ingest.loaders.base import page_progress

    path = tmp_path / "three.pdf"
    path.write_bytes(huge_pages_pdf(3, 600))
    seen: list[tuple[str, int, int]] = []
    with page_progress(lambda source, page, pages: seen.append((source, page, pages))):
        docs = PdfLoader().load(str(path))
    assert docs and seen == [(str(path), 1, 3), (str(path), 2, 3), (str(path), 3, 3)]
    PdfLoader().load(str(path))  # outside the block: nobody is told
    assert len(seen) == 3


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("one.md", "# One line\n\n{line}\n"),
        ("one.txt", "{line}\n"),
        ("one.html", "<html><body><h1>One line</h1><p>{line}</p></body></html>"),
    ],
)
def test_a_line_over_the_page_character_limit_is_cut_with_one_warning(
    name: str,
    body: str,
    tmp_path: Path,
    open_store: OpenStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A file without pages has lines: a day-one audit's 10 MB one-line Markdown file
    # was filed whole (12,500 chunks to embed, over 10 minutes); its line is cut at
    # ingest_max_page_chars as a PDF's page is.
    path = tmp_path / name
    path.write_text(body.format(line="kestrel " * 3_000), encoding="utf-8")  # 24,000 chars
    with open_store(ingest_max_page_chars=2_000) as kb, caplog.at_level(logging.WARNING):
        report = kb.ingest(path)
        assert report.documents == 1, report.failed
        assert report.chunks <= 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert (
        f"{path}: 1 line(s) longer than 2000 characters were cut at the limit "
        "(setting ingest_max_page_chars)" in warnings[0]
    )


def test_a_long_file_of_short_lines_is_not_cut(
    tmp_path: Path, open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "long.txt"
    path.write_text("A kestrel hovers over the field.\n" * 300, encoding="utf-8")  # 9,900 chars
    with open_store(ingest_max_page_chars=2_000) as kb, caplog.at_level(logging.WARNING):
        report = kb.ingest(path)
        assert report.documents == 1 and report.chunks >= 9
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
