"""Loader discovery through entry points, routing sources, walking folders."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import ClassVar

import pytest

from kredenc.errors import IngestError
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders import registry
from kredenc.ingest.loaders.base import Loader

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ingest"


class EpubLoader(Loader):
    """A third-party loader, as a plugin package would ship it."""

    name: ClassVar[str] = "epub"
    suffixes: ClassVar[tuple[str, ...]] = (".epub",)

    def load(self, source: str) -> list[LoadedDocument]:
        return [LoadedDocument(source, "book", self.name, [Section("chapter one")])]


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[EntryPoint]]:
    """Extra entry points in the loader group, on top of the installed ones."""
    module = types.ModuleType("kredenc_test_plugin")
    module.EpubLoader = EpubLoader  # type: ignore[attr-defined]
    module.NotALoader = dict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kredenc_test_plugin", module)
    installed = list(entry_points(group=registry.GROUP))
    extra: list[EntryPoint] = []
    monkeypatch.setattr(registry, "entry_points", lambda group: [*installed, *extra])
    registry.loaders.cache_clear()
    yield extra
    registry.loaders.cache_clear()


def test_builtins_are_registered_as_entry_points() -> None:
    installed = {ep.name: ep.value for ep in entry_points(group=registry.GROUP)}
    for name, value in registry.BUILTINS.items():
        assert installed.get(name) == value, f"pyproject.toml lacks the {name!r} entry point"
    names = [loader.name for loader in registry.loaders()]
    assert {"pdf", "markdown", "notion", "text", "jsonl"} <= set(names)
    assert names[0] == "notion"  # highest priority: asked before the markdown loader


def test_builtins_are_found_without_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    registry.loaders.cache_clear()
    try:
        assert {"pdf", "markdown", "notion", "text", "jsonl"} <= {
            loader.name for loader in registry.loaders()
        }
    finally:
        registry.loaders.cache_clear()


def test_a_plugin_adds_a_loader(plugins: list[EntryPoint]) -> None:
    plugins.append(EntryPoint("epub", "kredenc_test_plugin:EpubLoader", registry.GROUP))
    assert registry.loader_for("/books/dune.EPUB").name == "epub"
    assert ".epub" in registry.supported_suffixes()


def test_a_broken_plugin_is_skipped_with_a_warning(
    plugins: list[EntryPoint], caplog: pytest.LogCaptureFixture
) -> None:
    plugins.append(EntryPoint("gone", "kredenc_no_such_module:Loader", registry.GROUP))
    plugins.append(EntryPoint("odd", "kredenc_test_plugin:NotALoader", registry.GROUP))
    names = {loader.name for loader in registry.loaders()}
    assert "pdf" in names and "gone" not in names
    assert "'gone'" in caplog.text and "cannot import" in caplog.text
    assert "'odd'" in caplog.text and "not a kredenc Loader" in caplog.text


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
