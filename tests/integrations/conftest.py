"""What the adapters' tests share: a distinct value for every search option, and a
store whose ``search`` records the keywords it was called with."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kredenc import Kredenc
from kredenc.integrations import hits

#: A value for each option, none of them its default (so passing it is visible).
SAMPLES: dict[str, Any] = {
    "k": 3,
    "mode": "lexical",
    "user_id": "alice",
    "agent_id": "helper",
    "run_id": "run-7",
    "tags": ["work"],
    "where": {"project": "kettle"},
    "min_score": 0.25,
}


@pytest.fixture
def every_option() -> dict[str, Any]:
    """Every name of ``hits.OPTIONS`` with a value that is not its default; a new option
    fails here until it has a sample, so each adapter's test then checks it too."""
    missing = sorted(set(hits.OPTIONS) - set(SAMPLES))
    assert not missing, f"give the new search option(s) {missing} a sample value here"
    return {name: SAMPLES[name] for name in hits.OPTIONS}


@pytest.fixture
def recording_kb(
    open_store: Callable[..., Kredenc], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Kredenc, list[dict[str, Any]]]]:
    """A store whose ``search`` returns no hits and records each call's keywords."""
    calls: list[dict[str, Any]] = []

    def search(query: str, **kwargs: Any) -> list[Any]:
        calls.append(kwargs)
        return []

    with open_store() as kb:
        monkeypatch.setattr(kb, "search", search)
        yield kb, calls
