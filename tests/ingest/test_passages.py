"""Plain passages: ids made in advance are used as given, and refused when malformed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.records import is_new_id, new_id
from kredenc.testing.embedders import HashEmbedder


def test_ids_made_in_advance_are_the_records_ids(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        ids = [new_id("turn"), new_id("turn")]
        got = kb.add_passages(
            [{"text": "first turn"}, {"text": "second turn"}], record_type="turn", ids=ids
        )
        assert got == ids
        assert [kb.get(i).text for i in ids] == ["first turn", "second turn"]


@pytest.mark.parametrize(
    "ids",
    [
        ["c0123456789abcdef0123"],  # a chunk id for a turn
        ["t0123"],  # too short
        ["t0123456789abcdeg0123"],  # not hex
        [new_id("turn"), new_id("turn")],  # two ids for one item
    ],
)
def test_malformed_ids_are_refused_and_nothing_is_filed(tmp_path: Path, ids: list[str]) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        with pytest.raises(InvalidInput, match="one new turn id per item"):
            kb.add_passages([{"text": "a turn"}], record_type="turn", ids=ids)
        assert kb.stats()["records"] == 0


def test_is_new_id_knows_each_types_prefix() -> None:
    assert is_new_id(new_id("memory"), "memory") and not is_new_id(new_id("memory"), "turn")
    assert not is_new_id(None, "turn") and not is_new_id(12, "turn")
