"""Salvage (issue 13, finding 7): every verifiable record before and after damage goes
into a new store with its id; an incomplete batch is left out whole; the seqs lost are
reported; the damaged store is not changed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.storage.haystack import scan
from kredenc.storage.salvage import salvage

from . import read_log

OpenStore = Callable[..., Kredenc]


def _tree(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def _flip_payload(log: Path, k: int) -> None:
    rec = read_log(log)[k]
    data = bytearray(log.read_bytes())
    data[rec.offset + 12 + 30] ^= 0xFF
    log.write_bytes(bytes(data))


def test_records_before_and_after_damage_are_kept_with_their_ids(
    open_store: OpenStore, store_dir: Path, tmp_path: Path
) -> None:
    with open_store() as kb:
        ids = [kb.remember(f"memory {i} word{i}").id for i in range(10)]
    log = store_dir / "haystack.log"
    _flip_payload(log, 4)  # seq 5: ids[4]
    before = _tree(store_dir)
    dest = tmp_path / "saved"
    report = salvage(store_dir, dest)
    assert _tree(store_dir) == before
    assert report.records == 9
    assert report.lost_seqs == [(5, 5)]
    assert len(report.damaged_bytes) == 1
    data = (dest / "haystack.log").read_bytes()
    assert scan(data, dest / "haystack.log").last_seq == 9  # renumbered
    with open_store(dest) as kb:
        for i, rid in enumerate(ids):
            if i == 4:
                continue
            assert kb.get(rid).text == f"memory {i} word{i}"
        assert kb.search("word8", mode="lexical")[0].id == ids[8]
        assert kb.stats()["records"] == 9


def test_a_damaged_batch_is_left_out_whole_and_complete_ones_are_kept(
    open_store: OpenStore, store_dir: Path, tmp_path: Path
) -> None:
    with open_store() as kb:
        first = [m.id for m in kb.remember_many([{"text": f"a{i} first"} for i in range(3)])]
        second = [m.id for m in kb.remember_many([{"text": f"b{i} second"} for i in range(3)])]
        last = kb.remember("after the batches").id
    _flip_payload(store_dir / "haystack.log", 5)  # seq 6: the second batch's 2nd record
    report = salvage(store_dir, tmp_path / "saved")
    assert report.dropped_batches == [(5, 2)]
    assert report.lost_seqs == [(5, 8)]  # the batch's records and its commit
    with open_store(tmp_path / "saved") as kb:
        assert [kb.get(r).text for r in first] == ["a0 first", "a1 first", "a2 first"]
        assert kb.get(last).text == "after the batches"
        assert kb.stats()["records"] == 4
        assert not kb.search("second", mode="lexical")
    assert second


def test_salvage_refuses_a_destination_that_is_not_new(
    open_store: OpenStore, store_dir: Path, tmp_path: Path
) -> None:
    with open_store() as kb:
        kb.remember("x")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "f").write_text("keep")
    with pytest.raises(InvalidInput):
        salvage(store_dir, busy)
    with pytest.raises(InvalidInput):
        salvage(store_dir, store_dir / "inside")
    assert (busy / "f").read_text() == "keep"
