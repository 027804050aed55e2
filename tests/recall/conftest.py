"""Fixtures for the recall reflex: an open store, and a session id no other test uses."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from kredenc.engine import Kredenc

_sessions = itertools.count(1)


@pytest.fixture
def kb(open_store: Callable[..., Kredenc]) -> Iterator[Kredenc]:
    """An open store (HashEmbedder, no fsync), closed after the test."""
    store = open_store()
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def session() -> str:
    """A session id no other test uses (the session registry is per process)."""
    return f"test-session-{next(_sessions)}"
