"""Memory-test fixtures: a store with a controllable clock for filing times."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.testing.embedders import HashEmbedder

from ._support import Clock


@pytest.fixture
def clock(kb: Kredenc) -> Clock:
    """The ``kb`` store's clock, set by the test: memories are filed at ``clock.t``."""
    fake = Clock()
    kb.store.clock = fake
    return fake


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as store:
        yield store
