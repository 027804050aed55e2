"""Plain text and JSON / JSON Lines records."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.errors import IngestError
from kredenc.ingest.loaders.jsonl import JsonLoader
from kredenc.ingest.loaders.text import TextLoader

RECORDS = Path(__file__).parent.parent / "fixtures" / "ingest" / "records.jsonl"


def test_text_file_is_one_document_titled_by_its_name(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"\xef\xbb\xbfboot ok\r\nlistening on :8080\r\n")
    (doc,) = TextLoader().load(str(path))
    assert (doc.title, doc.loader, doc.source) == ("server", "text", str(path.resolve()))
    assert doc.text == "boot ok\nlistening on :8080"


def test_text_that_is_not_utf8_is_read_as_cp1252(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "old.txt"
    path.write_bytes("café déjà vu".encode("cp1252"))
    (doc,) = TextLoader().load(str(path))
    assert doc.text == "café déjà vu"
    assert "not valid UTF-8" in caplog.text


def test_binary_file_with_a_text_suffix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "image.txt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff")
    with pytest.raises(IngestError, match=r"image\.txt: looks like a binary file"):
        TextLoader().load(str(path))


def test_jsonl_records_become_documents_with_meta() -> None:
    docs = JsonLoader().load(str(RECORDS))
    base = str(RECORDS.resolve())
    assert [d.source for d in docs] == [f"{base}#L1", f"{base}#L2", f"{base}#L4"]
    first, second, third = docs
    assert first.title == "Reset a password"
    assert first.text.startswith("Open Settings")
    assert first.meta == {"id": "faq-1", "lang": "en", "views": 1520}  # no list "tags"
    assert second.title == "faq-2" and second.text.startswith("Invoices")  # "content"
    assert second.meta == {"id": "faq-2", "lang": "en", "helpful": True}
    assert third.title == "3" and third.text.startswith("Two-factor")  # "body"
    assert third.meta == {"id": 3, "updated": None}
    assert {d.loader for d in docs} == {"jsonl"}


def test_bad_jsonl_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"text": "fine"}\n\n{"text": "broken",\n', encoding="utf-8")
    with pytest.raises(IngestError, match=r"notes\.jsonl: line 3: not valid JSON"):
        JsonLoader().load(str(path))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('["a", "list"]', "a record must be a JSON object"),
        ('{"title": "no text"}', "no text field"),
        ('{"text": 42}', "no text field"),
    ],
)
def test_record_without_text_names_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"text": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(IngestError, match=rf"line 2: {message}"):
        JsonLoader().load(str(path))


def test_json_file_with_a_list_of_records(tmp_path: Path) -> None:
    path = tmp_path / "faq.json"
    path.write_text(
        '{"items": [{"title": "A", "text": "alpha"}, {"title": "B", "body": "beta"}]}',
        encoding="utf-8",
    )
    docs = JsonLoader().load(str(path))
    assert [(d.title, d.text, d.source.rsplit("#", 1)[1]) for d in docs] == [
        ("A", "alpha", "0"),
        ("B", "beta", "1"),
    ]


def test_json_file_with_one_record_and_bad_json(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text('{"text": "only one"}', encoding="utf-8")
    (doc,) = JsonLoader().load(str(one))
    assert doc.title == "one #0"
    bad = tmp_path / "bad.json"
    bad.write_text('{"text": "x",\n  oops}', encoding="utf-8")
    with pytest.raises(IngestError, match=r"bad\.json: not valid JSON at line 2"):
        JsonLoader().load(str(bad))
