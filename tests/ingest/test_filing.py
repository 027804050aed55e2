"""Filing under another name (``Kredenc.ingest(names=...)``): a file saved under a
generated name (a server's upload) is filed, reported and replaced as its own name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc


@pytest.fixture
def kb(open_store: Callable[..., Kredenc]) -> Iterator[Kredenc]:
    with open_store() as store:
        yield store


def _saved(folder: Path, text: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "3f9a0c1d.md"
    path.write_text(text)
    return str(path.resolve())


def test_a_named_source_is_filed_and_reported_as_its_name(kb: Kredenc, tmp_path: Path) -> None:
    saved = _saved(tmp_path, "Oolong is half oxidised.\n")  # no heading: the title is the stem
    seen: list[str] = []
    report = kb.ingest(
        saved, names={saved: "my notes.md"}, on_progress=lambda s, _r: seen.append(s)
    )
    assert seen == ["my notes.md"]
    assert [(f.source, f.status) for f in report.files] == [("my notes.md", "filed")]
    (doc,) = kb.list_documents()
    assert (doc.origin, doc.title) == ("my notes.md", "my notes")
    hit = kb.search("Oolong oxidised", k=1)[0]
    assert hit.origin == "my notes.md"
    # The same name again with new content replaces it, wherever the bytes were saved.
    again = _saved(tmp_path / "elsewhere", "Changed.\n")
    assert kb.ingest(again, names={again: "my notes.md"}).replaced == 1
    assert [d.origin for d in kb.list_documents()] == ["my notes.md"]


def test_a_named_source_that_fails_never_shows_the_saved_path(kb: Kredenc, tmp_path: Path) -> None:
    saved = str((tmp_path / "3f9a0c1d.pdf").resolve())
    Path(saved).write_bytes(b"not a pdf at all" * 20)
    report = kb.ingest(saved, names={saved: "paper.pdf"})
    (outcome,) = report.files
    assert (outcome.source, outcome.status) == ("paper.pdf", "failed")
    assert saved not in outcome.error and "paper.pdf" in outcome.error
    assert report.failed == [("paper.pdf", outcome.error)]


def test_a_file_with_no_text_is_skipped_not_filed(kb: Kredenc, tmp_path: Path) -> None:
    # A day-one audit found empty files filed as documents of 0 chunks.
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "empty.md").write_text("")
    (folder / "heading.md").write_text("# Only a heading\n")
    (folder / "blank.txt").write_text("  \n\n\t\n")
    (folder / "ok.md").write_text("# Fine\n\nA short note about kestrels.\n")
    report = kb.ingest(folder)
    assert (report.documents, report.chunks) == (1, 1)
    assert sorted((Path(s).name, why) for s, why in report.skipped) == [
        ("blank.txt", "empty file"),
        ("empty.md", "empty file"),
        ("heading.md", "empty file"),
    ]
    assert [Path(f.source).name for f in report.files] == ["ok.md"]
    assert [Path(d.origin).name for d in kb.list_documents()] == ["ok.md"]
    assert report.to_json()["skipped"][0]["reason"] == "empty file"


def test_a_file_emptied_since_it_was_filed_says_its_earlier_version_stays(
    kb: Kredenc, tmp_path: Path
) -> None:
    """A file filed, then emptied, was "skipped: empty file" while its earlier version
    stayed searchable without a word. It stays (an empty file may be a sync half done),
    and the reason says so and names the command that forgets it."""
    note = tmp_path / "kestrel.md"
    note.write_text("# Kestrels\n\nThe kestrel nests on the old water tower.\n")
    kb.ingest(note)
    (doc,) = kb.list_documents()
    note.write_text("")
    report = kb.ingest(note)
    ((source, why),) = report.skipped
    assert source == str(note.resolve())
    assert why.startswith("empty file") and doc.id in why
    assert f"kredenc --store {kb.home} forget {doc.id}" in why
    assert [d.id for d in kb.list_documents()] == [doc.id]
    kb.forget(doc.id)  # the command the reason names does it
    assert kb.list_documents() == []
