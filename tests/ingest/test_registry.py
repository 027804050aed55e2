"""Loader discovery through entry points, routing sources, walking folders."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoints
from pathlib import Path

import pytest

from conftest import OpenStore
from kredenc import plugins
from kredenc.errors import IngestError
from kredenc.ingest.loaders import registry
from kredenc.ingest.sources import iter_sources
from kredenc.testing.distributions import write_distribution

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ingest"

EPUB = '''
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, read_text_file


class EpubLoader(Loader):
    """A third-party loader, as a plugin package ships it (reads the file as text)."""

    name = "epub"
    suffixes = (".epub",)

    def load(self, source):
        from pathlib import Path

        text = read_text_file(Path(source))
        return [LoadedDocument(source, "book", self.name, [Section(text)])]


NotALoader = dict
'''

Install = Callable[[dict[str, str]], None]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """``install(loaders)``: a package declaring ``loaders`` (name to ``module:attr``),
    with the module ``kredenc_epub``, on sys.path for this test only."""

    def _install(loaders: dict[str, str]) -> None:
        site = write_distribution(
            tmp_path / "site", "kredenc-epub", {plugins.LOADERS: loaders}, {"kredenc_epub": EPUB}
        )
        monkeypatch.syspath_prepend(str(site))
        plugins.refresh()

    yield _install
    sys.modules.pop("kredenc_epub", None)
    plugins.refresh()


def test_builtins_are_asked_in_priority_order() -> None:
    names = [loader.name for loader in registry.loaders()]
    assert set(plugins.BUILTINS[plugins.LOADERS]) <= set(names)
    assert names[0] == "notion"  # highest priority: asked before the markdown loader


def test_builtins_are_found_without_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda: EntryPoints(()))
    plugins.refresh()
    try:
        assert {"pdf", "markdown", "notion", "text", "jsonl"} <= {
            loader.name for loader in registry.loaders()
        }
    finally:
        monkeypatch.undo()
        plugins.refresh()


def test_a_package_adds_a_loader(install: Install, open_store: OpenStore, tmp_path: Path) -> None:
    assert ".epub" not in registry.supported_suffixes()
    install({"epub": "kredenc_epub:EpubLoader"})
    assert registry.loader_for("/books/dune.EPUB").name == "epub"
    assert ".epub" in registry.supported_suffixes()
    book = tmp_path / "books" / "dune.epub"
    book.parent.mkdir()
    book.write_text("The spice must flow across the desert planet Arrakis.")
    assert list(iter_sources([book.parent])) == [str(book.resolve())]
    with open_store() as kb:
        report = kb.ingest(book.parent)
        assert (report.documents, report.failed) == (1, [])
        [hit] = kb.search("spice desert planet", k=1, loaders=["epub"])  # stored as its loader
        assert "Arrakis" in hit.text and hit.title == "book"
        assert kb.search("spice desert planet", loaders=["pdf"]) == []


def test_a_broken_plugin_is_skipped_with_a_warning(
    install: Install, caplog: pytest.LogCaptureFixture
) -> None:
    install({"gone": "kredenc_no_such_module:Loader", "odd": "kredenc_epub:NotALoader"})
    names = {loader.name for loader in registry.loaders()}
    assert "pdf" in names and "gone" not in names and "odd" not in names
    assert "loader 'gone' skipped" in caplog.text and "cannot be imported" in caplog.text
    assert "kredenc-epub" in caplog.text
    assert "loader 'odd'" in caplog.text and "not a kredenc Loader" in caplog.text


@pytest.mark.parametrize(
    ("source", "loader"),
    [
        ("/docs/paper.PDF", "pdf"),
        ("/docs/notes.md", "markdown"),
        ("/docs/notes.markdown", "markdown"),
        ("/docs/app.log", "text"),
        ("/docs/readme.txt", "text"),
        ("/docs/rows.jsonl", "jsonl"),
        ("/docs/rows.json", "jsonl"),
    ],
)
def test_loader_for_picks_by_suffix(source: str, loader: str) -> None:
    assert registry.loader_for(source).name == loader


def test_unknown_suffix_names_the_supported_ones(tmp_path: Path) -> None:
    path = tmp_path / "slides.pptx"
    path.write_bytes(b"PK")
    with pytest.raises(IngestError, match=r"slides\.pptx: no loader") as info:
        registry.loader_for(str(path))
    for suffix in (".pdf", ".md", ".txt", ".jsonl"):
        assert suffix in info.value.hint
    assert "Notion" in info.value.hint


def test_missing_path_and_plain_folder_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no such file or folder"):
        registry.loader_for(str(tmp_path / "nope.docx"))
    with pytest.raises(IngestError, match="is a folder"):
        registry.loader_for(str(tmp_path))
