"""Every test here runs against the session's PostgreSQL (``postgres_dsn``, in
tests/conftest.py) and carries the ``postgres`` marker."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.postgres)
