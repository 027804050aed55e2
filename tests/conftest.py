"""Fixtures shared by every test package: a store directory and a cheap way to open it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder

OpenStore = Callable[..., Kredenc]


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """Where a test's store lives (not created until it is first opened)."""
    return tmp_path / "store"


@pytest.fixture
def open_store(store_dir: Path) -> OpenStore:
    """``open_store(path=None, **overrides)``: ``Kredenc.open`` with test defaults.

    Defaults: the ``store_dir`` path, ``HashEmbedder()`` (no model is loaded) and
    ``durability="none"``; any ``Kredenc.open`` keyword overrides them. Use the
    result in a ``with`` block so that it is closed even when the test fails.
    """

    def _open(path: Path | None = None, **overrides: Any) -> Kredenc:
        overrides.setdefault("durability", "none")
        embedder = overrides.pop("embedder", None) or HashEmbedder()
        return Kredenc.open(path or store_dir, embedder=embedder, **overrides)

    return _open
