"""The tool registry: a tools folder loaded by path and the kredenc.tools plugin group."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc import plugins
from kredenc.config import Settings
from kredenc.errors import InvalidInput, ProviderError
from kredenc.loop.registry import ToolRegistry
from kredenc.loop.tool import Tool
from kredenc.testing.distributions import write_distribution

from ._tools import SOURCE

ECHO = """
from kredenc.loop.tool import Tool, ToolResult


class Echo(Tool):
    name = "echo"

    def run(self, mind, services):
        mind.write("echo.text", mind.read("ask.question"))
        return ToolResult()
"""


def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "store")


def touch_later(path: Path, text: str) -> None:
    """Rewrite ``path`` so that its mtime surely differs from the last write's."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_folder_tools_are_found_by_name_and_built(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(SOURCE, encoding="utf-8")
    registry = ToolRegistry(tmp_path)
    assert {"decide", "retrieve", "generate", "judge", "reflect"} <= set(registry.names())
    tool = registry.build("judge", settings(tmp_path))
    assert isinstance(tool, Tool) and tool.name == "judge"
    assert registry.sources()["judge"].origin == "folder"
    assert registry.sources()["judge"].where.startswith(f"{tmp_path / 'mine.py'}:")
    assert registry.problems() == []


def test_a_broken_file_is_reported_with_file_and_line_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(ECHO, encoding="utf-8")
    (tmp_path / "syntax.py").write_text("x = 1\ndef broken(:\n", encoding="utf-8")
    (tmp_path / "raises.py").write_text("import os\n\nraise RuntimeError('no model\\nhere')\n")
    registry = ToolRegistry(tmp_path)
    assert "echo" in registry.names()
    problems = registry.problems()
    assert any(p.startswith(f"{tmp_path / 'syntax.py'}:2: SyntaxError") for p in problems)
    assert f"{tmp_path / 'raises.py'}:3: RuntimeError: no model here" in problems
    with pytest.raises(InvalidInput) as err:
        registry.build("missing", settings(tmp_path))
    assert "unknown tool 'missing'" in err.value.message
    assert err.value.hint.startswith("known tools: echo; the tools folder has errors: ")
    assert "raises.py:3" in err.value.hint and "(and 1 more, logged)" in err.value.hint


def test_the_folder_is_confined(tmp_path: Path) -> None:
    folder, outside = tmp_path / "tools", tmp_path / "elsewhere"
    folder.mkdir()
    (outside / "sub").mkdir(parents=True)
    (outside / "sneaky.py").write_text(ECHO, encoding="utf-8")
    (folder / "link.py").symlink_to(outside / "sneaky.py")
    (folder / "sub").mkdir()
    (folder / "sub" / "nested.py").write_text(ECHO, encoding="utf-8")
    registry = ToolRegistry(folder)
    assert "echo" not in registry.names()
    assert registry.problems() == [
        f"{folder / 'link.py'}: refused, its real path leaves the tools folder"
    ]


def test_adding_editing_and_removing_a_file_is_seen_on_the_next_lookup(tmp_path: Path) -> None:
    registry = ToolRegistry(tmp_path)
    assert "echo" not in registry.names()
    echo = tmp_path / "echo.py"
    touch_later(echo, ECHO)
    assert "echo" in registry.names()
    touch_later(echo, ECHO.replace('name = "echo"', 'name = "shout"'))
    assert "shout" in registry.names() and "echo" not in registry.names()
    echo.unlink()
    assert "shout" not in registry.names()


def test_a_missing_folder_is_no_tools_and_no_error(tmp_path: Path) -> None:
    registry = ToolRegistry(tmp_path / "nope")
    assert registry.problems() == []
    assert "echo" not in registry.names()


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = write_distribution(
        tmp_path / "site",
        "kredenc-echo",
        {plugins.TOOLS: {"echo": "kredenc_echo:Echo", "misnamed": "kredenc_echo:Echo"}},
        {"kredenc_echo": ECHO},
    )
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    yield site
    sys.modules.pop("kredenc_echo", None)
    plugins.refresh()


def test_a_tool_from_a_package_is_built_by_its_entry_point(installed: Path, tmp_path: Path) -> None:
    registry = ToolRegistry(None)
    assert registry.sources()["echo"].origin == "plugin"
    assert registry.build("echo", settings(tmp_path)).name == "echo"
    # The entry point's name is the tool's namespace on the mind: they must agree.
    with pytest.raises(ProviderError, match="is a tool named 'echo'"):
        registry.build("misnamed", settings(tmp_path))


def test_a_folder_tool_replaces_a_plugin_of_the_same_name(installed: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "mine.py").write_text(ECHO.replace("class Echo", "class MyEcho"), encoding="utf-8")
    registry = ToolRegistry(folder)
    assert registry.sources()["echo"].origin == "folder"
    assert type(registry.build("echo", settings(tmp_path))).__name__ == "MyEcho"
