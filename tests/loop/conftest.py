"""A store with a few documents' worth of passages, a tools folder and an agents folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder

from ._tools import SOURCE, agent_file

PASSAGES = [
    "The heron nests by the mill pond every spring.",
    "Invoices are due on the first of the month.",
    "The lighthouse keeper logs the weather at dawn.",
    "A needle was found in the haystack behind the barn.",
]

Open = Callable[..., Kredenc]


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """(tools_dir, agents_dir): the test tools in one file, the ``finder`` agent."""
    tools, agents = tmp_path / "tools", tmp_path / "agents"
    tools.mkdir()
    agents.mkdir()
    (tools / "finder_tools.py").write_text(SOURCE, encoding="utf-8")
    (agents / "finder.md").write_text(agent_file(), encoding="utf-8")
    return tools, agents


@pytest.fixture
def open_loop(store_dir: Path, folders: tuple[Path, Path]) -> Open:
    """``open_loop(**overrides)``: a store with :data:`PASSAGES`, the test folders set."""
    tools, agents = folders

    def _open(path: Path | None = None, **overrides: Any) -> Kredenc:
        overrides.setdefault("durability", "none")
        overrides.setdefault("tools_dir", tools)
        overrides.setdefault("agents_dir", agents)
        kb = Kredenc.open(path or store_dir, embedder=HashEmbedder(), **overrides)
        if not kb.read_only and not kb.stats()["drawers"]:
            kb.add_passages([{"text": t} for t in PASSAGES], drawer="docs")
        return kb

    return _open
