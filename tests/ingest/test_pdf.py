"""The PDF loader on real papers, reports and notices, and on broken files.

The PDFs are read from the shared corpus (never copied into the repository); the
tests that need them are skipped with the reason when it is not there.
"""

from __future__ import annotations

import io
import logging
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from pypdf import PdfReader, PdfWriter

from kredenc.errors import IngestError
from kredenc.ingest.chunker import chunk
from kredenc.ingest.document import Chunk, LoadedDocument
from kredenc.ingest.loaders import pdf as pdf_loader
from kredenc.ingest.loaders.pdf import PdfLoader, clean_pages, pdf_date, rows_from_runs

PDF_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "documents" / "pdf"
ATTENTION = PDF_DIR / "attention_is_all_you_need_1706.03762v7.pdf"
TWO_COLUMN = PDF_DIR / "creativity_in_machine_learning_thoma_2col.pdf"
THREE_COLUMN = PDF_DIR / "federal-register-2020-17221.pdf"
TABLES = PDF_DIR / "WARN-Report-for-7-1-2015-to-03-25-2016.pdf"
SMALL = PDF_DIR / "scotus-transcript-p1.pdf"

needs_corpus = pytest.mark.skipif(
    not PDF_DIR.is_dir(), reason=f"the shared PDF corpus is not here ({PDF_DIR})"
)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _load(path: Path) -> LoadedDocument:
    docs = PdfLoader().load(str(path))
    assert len(docs) == 1
    return docs[0]


@pytest.fixture(scope="module")
def attention() -> LoadedDocument:
    if not ATTENTION.is_file():
        pytest.skip(f"the shared PDF corpus is not here ({PDF_DIR})")
    return _load(ATTENTION)


@pytest.fixture(scope="module")
def attention_chunks(attention: LoadedDocument) -> list[Chunk]:
    return chunk(attention)


def _holding(chunks: list[Chunk], *needles: str) -> list[Chunk]:
    return [c for c in chunks if all(n in _flat(c.text) for n in needles)]


@needs_corpus
def test_attention_pages_numbered_from_one(attention: LoadedDocument) -> None:
    assert [s.page for s in attention.sections] == list(range(1, 16))
    assert attention.source == str(ATTENTION.resolve())
    assert attention.loader == "pdf"
    assert attention.meta["pages"] == 15
    assert "Attention Is All You Need" in attention.sections[0].text
    assert attention.meta["created"] == "2024-04-10T21:11:43+00:00"


@needs_corpus
def test_attention_figure_pages_stay_plain_text(attention: LoadedDocument) -> None:
    # Pages 13-15 are attention maps (rotated words, one a line); read by position their
    # overlapping runs pick up letters twice, so they must not be rebuilt as rows.
    assert "layout_pages" not in attention.meta
    assert "The\nLaw\nwill\nnever\nbe\nperfect" in attention.sections[14].text


@needs_corpus
def test_attention_eight_heads_passage(attention_chunks: list[Chunk]) -> None:
    hits = _holding(attention_chunks, "we employ h = 8 parallel attention layers, or heads")
    assert hits and hits[0].page == 5


@needs_corpus
def test_attention_base_model_bleu(attention_chunks: list[Chunk]) -> None:
    hits = _holding(attention_chunks, "Transformer (base model) 27.3")
    assert hits and hits[0].page == 8
    assert "BLEU" in hits[0].text


@needs_corpus
def test_attention_adam_hyperparameters(attention_chunks: list[Chunk]) -> None:
    # "ϵ" (U+03F5) in the PDF comes out as "ε" after NFKC; the exponent's minus is U+2212.
    hits = _holding(attention_chunks, "Adam optimizer [20] with β1 = 0.9, β2 = 0.98 and ε = 10−9.")
    assert hits and hits[0].page == 7


@needs_corpus
def test_attention_ligatures_and_line_break_hyphens_are_repaired(
    attention: LoadedDocument,
) -> None:
    text = attention.text
    assert "ﬁ" not in text and "ﬂ" not in text
    assert "learned linear transformation and softmax" in _flat(text)  # "transfor-/mation"
    assert "shared source-target vocabulary" in _flat(text)  # a compound stays hyphenated


@needs_corpus
def test_two_column_sentence_is_not_interleaved() -> None:
    doc = _load(TWO_COLUMN)
    page4 = _flat(doc.sections[3].text)
    assert doc.sections[3].page == 4
    # Ends the left column and goes on at the top of the right one.
    assert (
        "While the composition might be considered in Section IV, we will now investigate "
        "the work which was done in audio synthesization." in page4
    )


@needs_corpus
def test_three_column_sentences_are_not_interleaved() -> None:
    doc = _load(THREE_COLUMN)
    page2 = _flat(doc.sections[1].text)
    # Left column into the middle one (the "5" is a footnote mark).
    assert (
        "These effects include stall warning activation, airspeed disagree alert, and "
        "altitude disagree alert,5 and may affect the flightcrew’s ability to accomplish "
        "continued safe flight and landing." in page2
    )
    # Middle column into the right one.
    assert (
        "the European Union Aviation Safety Agency (EASA), the manufacturer, the operator, "
        "and the Ethiopian Civil Aviation Authority (ECAA)." in page2
    )


@needs_corpus
def test_table_drawn_column_by_column_is_read_in_rows() -> None:
    doc = _load(TABLES)
    first = doc.sections[0].text
    assert doc.meta["layout_pages"] == list(range(1, 17))
    row = next(line for line in first.splitlines() if "Maxim Integrated" in line)
    assert row == (
        "06/22/2015 | 03/25/2016 | 07/01/2015 | Maxim Integrated Product | San Jose | 150 "
        "| Closure Permanent"
    )
    # The summary table on the last page, drawn cell by cell, in rows too.
    assert "Total | 632 | 53,454 | 295 | 11 | 90 | 212 | 12 | 12" in doc.sections[15].text


def test_rows_from_runs_builds_rows_with_cells_and_keeps_superscripts() -> None:
    # Runs as a table drawer emits them: one column after the other.
    runs = [
        (30.0, 100.0, 80.0, 108.0, "Date"),
        (30.0, 87.0, 80.0, 95.0, "06/22/2015"),
        (30.0, 74.0, 80.0, 82.0, "06/30/2015"),
        (100.0, 100.0, 200.0, 108.0, "Company"),
        (100.0, 87.0, 200.0, 95.0, "Maxim"),
        (100.0, 74.0, 140.0, 82.0, "McGraw-Hill"),
        (142.0, 74.0, 190.0, 82.0, "Education"),  # a 2-point gap: same cell
        # A note with a raised "th" (overlaps its line by more than half its height).
        (30.0, 50.0, 60.0, 58.0, "the 10"),
        (60.5, 54.0, 64.0, 59.0, "th"),
        (65.0, 50.0, 90.0, 58.0, "day"),
    ]
    assert rows_from_runs(runs) == (
        "Date | Company\n06/22/2015 | Maxim\n06/30/2015 | McGraw-Hill Education\nthe 10 th day"
    )
    assert rows_from_runs([]) == ""


# --- broken and protected files ----------------------------------------------------


def _small_pdf_bytes() -> bytes:
    if SMALL.is_file():
        return SMALL.read_bytes()
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _encrypted(user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_small_pdf_bytes())))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_encrypted_pdf_is_a_clear_per_file_error(tmp_path: Path) -> None:
    path = tmp_path / "locked.pdf"
    path.write_bytes(_encrypted("secret"))
    with pytest.raises(IngestError, match=r"locked\.pdf: the PDF is encrypted") as info:
        PdfLoader().load(str(path))
    assert "decrypt" in info.value.hint


@needs_corpus
def test_pdf_with_only_an_owner_password_is_read(tmp_path: Path) -> None:
    path = tmp_path / "owner-only.pdf"
    path.write_bytes(_encrypted(""))
    doc = _load(path)
    assert "SUPREME COURT" in doc.text


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("garbage.pdf", b"this is not a PDF at all\n" * 50),
        ("empty.pdf", b""),
        ("header-only.pdf", b"%PDF-1.7\n"),
    ],
)
def test_garbage_pdf_is_a_clear_per_file_error(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(IngestError, match=re.escape(str(path))) as info:
        PdfLoader().load(str(path))
    assert "not a readable PDF" in info.value.message
    assert info.value.hint


@needs_corpus
@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_pdf_is_a_clear_per_file_error(tmp_path: Path, keep: float) -> None:
    data = ATTENTION.read_bytes()
    path = tmp_path / "truncated.pdf"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(IngestError, match=r"truncated\.pdf: not a readable PDF"):
        PdfLoader().load(str(path))


@needs_corpus  # the blank fallback page has no text, so the repaired file cannot load
def test_pdf_without_end_marker_is_truncated(tmp_path: Path) -> None:
    # PDFium would rebuild such a file silently; a truncated download must say so.
    data = _small_pdf_bytes()
    cut = data.rindex(b"%%EOF")
    path = tmp_path / "cut.pdf"
    path.write_bytes(data[:cut])
    with pytest.raises(IngestError, match=r"cut\.pdf: not a readable PDF \(no %%EOF"):
        PdfLoader().load(str(path))
    path.write_bytes(data[: cut + 5] + b"\n" * 100)  # trailing blank lines are fine
    assert PdfLoader().load(str(path))


@needs_corpus
def test_unreadable_page_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    read_page = pdf_loader._read_page

    def failing(pdf: pdfium.PdfDocument, index: int, max_chars: int) -> tuple[str, bool, bool]:
        if index == 1:
            raise pdfium.PdfiumError("Failed to load page.")
        return read_page(pdf, index, max_chars)

    monkeypatch.setattr(pdf_loader, "_read_page", failing)
    with caplog.at_level(logging.WARNING, logger=pdf_loader.__name__):
        doc = _load(TWO_COLUMN)
    assert [s.page for s in doc.sections] == [1, 3, 4, 5, 6, 7, 8]
    assert doc.meta["pages"] == 8
    assert any("1 page(s) skipped" in r.getMessage() for r in caplog.records)
    assert any(r.getMessage().endswith(": pages 2") for r in caplog.records)


def test_pdf_whose_pages_all_fail_is_a_per_file_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(pdf: pdfium.PdfDocument, index: int, max_chars: int) -> tuple[str, bool, bool]:
        raise pdfium.PdfiumError("Failed to load page.")

    monkeypatch.setattr(pdf_loader, "_read_page", failing)
    path = tmp_path / "pages.pdf"
    path.write_bytes(_small_pdf_bytes())
    with pytest.raises(IngestError, match=r"pages\.pdf: PDFium could read none of its"):
        PdfLoader().load(str(path))


def test_missing_pdf_is_a_per_file_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="cannot read file"):
        PdfLoader().load(str(tmp_path / "nope.pdf"))


def test_pdf_without_text_says_so(tmp_path: Path) -> None:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    path = tmp_path / "scan.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    with pytest.raises(IngestError, match="no extractable text") as info:
        PdfLoader().load(str(path))
    assert "OCR" in info.value.hint


# --- text clean-up --------------------------------------------------------------------


def test_clean_pages_rejoins_broken_words_but_keeps_compounds() -> None:
    pages = [
        "a learned linear transfor-\nmation of a sequence, the source-target\nvocabulary",
        "a shared source-\ntarget vocabulary and sequence-\naligned models; Anglo-\nSaxon",
    ]
    one, two = clean_pages(pages)
    assert "linear transformation of a sequence" in one
    assert "shared source-target vocabulary" in two
    assert "Anglo-Saxon" in two
    assert "sequence-aligned" in two  # "sequence" is a word of its own in the text


def test_clean_pages_repairs_pdfium_line_breaks() -> None:
    (page,) = clean_pages(
        ["with ε = 10−9\n. We varied\n.NET code\n1Preliminary report\n2020 Report, 3D model"]
    )
    assert (
        page == "with ε = 10−9. We varied\n.NET code\n1 Preliminary report\n2020 Report, 3D model"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("D:20240410211143Z00'00'", datetime(2024, 4, 10, 21, 11, 43, tzinfo=UTC)),
        (
            "D:20160325082400-07'00'",
            datetime(2016, 3, 25, 8, 24, tzinfo=timezone(-timedelta(hours=7))),
        ),
        (
            "D:20220426122857+02'30",
            datetime(2022, 4, 26, 12, 28, 57, tzinfo=timezone(timedelta(hours=2, minutes=30))),
        ),
        ("D:2015", datetime(2015, 1, 1)),
        ("D:20151399", None),
        ("yesterday", None),
        ("", None),
    ],
)
def test_pdf_date(text: str, expected: datetime | None) -> None:
    assert pdf_date(text) == expected


def test_clean_pages_normalises_unicode_and_spaces() -> None:
    (page,) = clean_pages(["e\ufb03cient   \u00adﬁne  tuning\x00 with ϵ = 10\u22129  \n\n\n\nend"])
    assert page == "efficient fine tuning with ε = 10\u22129\n\nend"
