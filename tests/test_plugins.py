"""The plugin registry: built-ins through the same door, and packages installed for the
test only (a real ``*.dist-info`` on ``sys.path``), used without touching kredenc."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kredenc import plugins
from kredenc.config import Settings, load_settings
from kredenc.engine import Kredenc, make_default_embedder
from kredenc.errors import InvalidInput, ProviderError
from kredenc.providers.embed.base import Embedder
from kredenc.providers.embed.minilm import MiniLMEmbedder
from kredenc.testing.distributions import write_distribution

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

TINY = '''
from kredenc.testing.embedders import HashEmbedder


class TinyEmbedder(HashEmbedder):
    """A third-party embedder: its own package, its own name, built from Settings."""

    @classmethod
    def from_settings(cls, settings):
        return cls(dim=16, model_id=f"tiny-{settings.embed_threads}")


def make_tiny(settings):
    return TinyEmbedder(dim=8)


def make_wrong(settings):
    return "not an embedder"


def make_failing(settings):
    raise RuntimeError("the model file is missing\\nsee /var/log")
'''

Install = Callable[..., Path]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """``install(name, entry_points, modules)``: a distribution on sys.path for this test."""
    added: list[str] = []

    def _install(
        name: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str] | None = None
    ) -> Path:
        site = write_distribution(tmp_path / f"site-{name}", name, entry_points, modules)
        monkeypatch.syspath_prepend(str(site))
        added.extend(modules or {})
        plugins.refresh()
        return site

    yield _install
    for module in added:
        sys.modules.pop(module, None)
    plugins.refresh()


def test_every_group_has_its_builtins_declared_in_pyproject() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]
    assert set(plugins.BUILTINS) == set(plugins.GROUPS)
    for group, builtins in plugins.BUILTINS.items():
        assert declared.get(group, {}) == builtins, f"pyproject.toml and BUILTINS differ: {group}"
    assert plugins.names(plugins.INDEXES) == ["sqlite"]
    assert "openai" in plugins.names(plugins.LLMS) and "local" in plugins.names(plugins.LLMS)
    roles = ["decide", "generate", "grade", "judge", "reflect", "retrieve", "rewrite", "verify"]
    assert plugins.names(plugins.TOOLS) == roles


def test_every_builtin_imports() -> None:
    for group, builtins in plugins.BUILTINS.items():
        for name in builtins:
            obj = plugins.load(group, name)
            # A class, or an object that builds the plugin (an LLM provider record).
            assert isinstance(obj, type) or callable(obj.from_settings), (group, name)


def test_the_default_embedder_comes_through_the_registry() -> None:
    embedder = make_default_embedder(Settings(embed_threads=3, embed_query_quantized=False))
    assert isinstance(embedder, MiniLMEmbedder) and not embedder.loaded
    assert embedder.intra_op_num_threads == 3 and embedder.quantized_queries is False


def test_an_unknown_name_is_one_line_naming_the_available_ones() -> None:
    with pytest.raises(InvalidInput) as info:
        plugins.load(plugins.EMBEDDERS, "bert")
    assert info.value.message == "unknown embedder 'bert'"
    assert info.value.hint.startswith("available: minilm, onnx, openai, sentence-transformers;")
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidInput, match=r"unknown tool 'gpt' \(available: decide, generate"):
        plugins.load(plugins.TOOLS, "gpt")
    with pytest.raises(InvalidInput, match="unknown plugin group"):
        plugins.names("kredenc.nothing")


def test_embed_provider_is_checked_against_the_registry(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        load_settings(tmp_path, embed_provider="tiny")
    assert "unknown embedder 'tiny'; available: minilm, onnx, openai" in info.value.message
    assert "\n" not in str(info.value)


def test_a_default_setting_does_not_read_the_entry_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreadable() -> None:
        raise AssertionError("entry points read")

    monkeypatch.setattr(plugins, "entry_points", unreadable)
    plugins.refresh()
    try:
        assert Settings(embed_provider="openai").embed_provider == "openai"
        assert Settings().embed_provider == "minilm"
    finally:
        monkeypatch.undo()
        plugins.refresh()


def test_entry_points_are_read_once_until_refreshed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = plugins.entry_points

    def counting() -> object:
        calls.append(1)
        return real()

    monkeypatch.setattr(plugins, "entry_points", counting)
    plugins.refresh()
    try:
        for _ in range(3):
            assert not plugins.is_known(plugins.EMBEDDERS, "nope")
            plugins.names(plugins.LOADERS)
        assert len(calls) == 1
        plugins.refresh()
        plugins.names(plugins.LOADERS)
        assert len(calls) == 2
    finally:
        monkeypatch.undo()
        plugins.refresh()


def test_an_embedder_from_a_package_is_used_by_name(install: Install, tmp_path: Path) -> None:
    install(
        "kredenc-tiny",
        {plugins.EMBEDDERS: {"tiny": "kredenc_tiny:TinyEmbedder"}},
        {"kredenc_tiny": TINY},
    )
    assert plugins.names(plugins.EMBEDDERS) == [
        "minilm",
        "onnx",
        "openai",
        "sentence-transformers",
        "tiny",
    ]
    assert plugins.get(plugins.EMBEDDERS, "tiny").dist == "kredenc-tiny"
    home = tmp_path / "store"
    with Kredenc.open(home, embed_provider="tiny", embed_threads=5, durability="none") as kb:
        assert type(kb.embedder).__name__ == "TinyEmbedder"
        memory = kb.remember("the heron nests by the mill pond")
        kb.remember("invoices are due on the first of the month")
        assert kb.search("where does the heron nest", k=1)[0].id == memory.id
    assert json.loads((home / "store.json").read_text())["model_id"] == "tiny-5-16"


def test_a_factory_function_is_a_plugin_too(install: Install) -> None:
    install(
        "kredenc-tiny",
        {plugins.EMBEDDERS: {"tiny-fn": "kredenc_tiny:make_tiny"}},
        {"kredenc_tiny": TINY},
    )
    embedder = plugins.build(plugins.EMBEDDERS, "tiny-fn", Settings(), Embedder)
    assert embedder.dim == 8


def test_a_plugin_that_fails_says_which_and_why(install: Install) -> None:
    install(
        "kredenc-broken",
        {
            plugins.EMBEDDERS: {
                "gone": "kredenc_no_such_module:Embedder",
                "typo": "kredenc_tiny:NoSuchClass",
                "wrong": "kredenc_tiny:make_wrong",
                "failing": "kredenc_tiny:make_failing",
            }
        },
        {"kredenc_tiny": TINY},
    )

    def error(name: str) -> ProviderError:
        with pytest.raises(ProviderError) as info:
            plugins.build(plugins.EMBEDDERS, name, Settings(), Embedder)
        assert "\n" not in str(info.value)
        assert "kredenc-broken" in str(info.value)
        return info.value

    gone = error("gone")
    assert gone.message.startswith("embedder 'gone' (kredenc_no_such_module:Embedder, from ")
    assert "cannot be imported: ModuleNotFoundError" in gone.message
    assert "has no attribute 'NoSuchClass'" in error("typo").message
    assert "built a 'str', expected: Embedder" in error("wrong").message
    failing = error("failing")
    assert "failed to start: RuntimeError: the model file is missing see /var/log" in str(failing)


def test_a_broken_embedder_stops_open_with_one_line(install: Install, tmp_path: Path) -> None:
    install("kredenc-broken", {plugins.EMBEDDERS: {"gone": "kredenc_no_such_module:Embedder"}})
    with pytest.raises(ProviderError, match=r"embedder 'gone' .* cannot be imported"):
        Kredenc.open(tmp_path / "store", embed_provider="gone")
    assert not (tmp_path / "store" / "store.json").exists()


def test_a_package_can_replace_a_builtin(install: Install) -> None:
    install(
        "kredenc-tiny",
        {plugins.EMBEDDERS: {"minilm": "kredenc_tiny:make_tiny"}},
        {"kredenc_tiny": TINY},
    )
    embedder = make_default_embedder(Settings())
    assert type(embedder).__name__ == "TinyEmbedder"
    assert plugins.get(plugins.EMBEDDERS, "minilm").dist == "kredenc-tiny"


def test_groups_without_builtins_take_plugins(install: Install) -> None:
    install(
        "kredenc-extras",
        {plugins.TOOLS: {"calculator": "operator:add"}, plugins.LLMS: {"echo": "builtins:repr"}},
    )
    assert "calculator" in plugins.names(plugins.TOOLS)
    assert "echo" in plugins.names(plugins.LLMS)
    assert plugins.load(plugins.TOOLS, "calculator")(2, 3) == 5
