"""Fixtures of the role tests: a real store in tmp_path and Services over it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.loop.tool import Services
from kredenc.providers.llm.base import LLM
from kredenc.testing.embedders import HashEmbedder

MakeServices = Callable[..., Services]


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "store", embedder=HashEmbedder(), durability="none") as store:
        yield store


@pytest.fixture
def services(kb: Kredenc) -> MakeServices:
    """``services(llm=None, options=None, **settings)``: Services over ``kb``."""

    def make(
        llm: LLM | None = None, options: dict[str, Any] | None = None, **settings: Any
    ) -> Services:
        return Services(
            store=kb.store,
            ns=kb.namespace,
            settings=kb.settings.model_copy(update=settings),
            llm=llm,
            options=dict(options or {}),
        )

    return make
