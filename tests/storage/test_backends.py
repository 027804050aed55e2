"""Which log and index a store opens (storage/backends.py): the file backend by
default; PostgreSQL by setting, refused with one line when its packages are missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import MissingExtra
from kredenc.storage import layout
from kredenc.storage.haystack import Haystack
from kredenc.storage.index.sqlite import SqliteIndex
from kredenc.testing.embedders import HashEmbedder


def test_the_default_backend_is_the_files(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        assert isinstance(kb.store.haystack, Haystack)
        assert isinstance(kb.store.index, SqliteIndex)
    assert (tmp_path / "s" / layout.LOG_FILE).is_file()


def test_postgres_without_its_packages_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.startswith("kredenc.storage.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg fails
    with pytest.raises(MissingExtra) as err:
        Kredenc.open(
            tmp_path / "s",
            embedder=HashEmbedder(),
            backend="postgres",
            postgres_dsn="host=127.0.0.1 dbname=kredenc",
        )
    assert "kredenc[postgres]" in err.value.hint
    assert not (tmp_path / "s").exists()  # nothing was created
