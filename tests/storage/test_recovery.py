"""Recovery: uncommitted batches, the index catching up with the log, ``kredenc check``."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import CorruptLog
from kredenc.storage.haystack import HEADER_SIZE, Haystack, encode_payload, frame, scan
from kredenc.storage.verify import verify_store

from . import memory_put, parse_log, read_log

OpenStore = Callable[..., Kredenc]


def _log_with_batch(path: Path) -> tuple[bytes, int, int]:
    """5 single records, then a batch of 4 (seqs 6-9, commit 10): (data, batch start, commit)."""
    Haystack.create(path)
    hay = Haystack(path, durability="none")
    try:
        for n in range(5):
            hay.append([memory_put(n)])
        placed = hay.append([memory_put(n) for n in range(5, 9)], batch=True)
        commit = hay.end - len(frame(encode_payload({"seq": 10, "op": "commit", "txn": 6})))
    finally:
        hay.close()
    data = path.read_bytes()
    assert parse_log(data)[-1].offset == commit
    return data, placed[0][1], commit


def test_uncommitted_batch_at_the_tail_is_discarded_whole(tmp_path: Path) -> None:
    """Every cut between the batch's first byte and its commit's last keeps seqs 1-5."""
    data, start, commit = _log_with_batch(tmp_path / "full.log")
    batch_starts = [r.offset for r in parse_log(data)[5:9]]
    path = tmp_path / "cut.log"
    for length in range(start + 1, len(data)):
        rec = scan(data[:length], path)
        assert (rec.records, rec.last_seq, rec.end) == (5, 5, start), length
        assert rec.truncated_bytes == length - start, length
        assert rec.problems, length
        whole = sum(1 for s in [*batch_starts[1:], commit] if s <= length)
        assert rec.discarded_uncommitted == whole, length
        if whole:
            assert (
                f"uncommitted batch of {whole} records at byte offset {start}" in rec.problems[-1]
            )
    full = scan(data, path)
    assert (full.records, full.last_seq, full.problems) == (10, 10, [])


@pytest.mark.parametrize("where", ["before commit", "inside commit", "inside batch"])
def test_opening_cuts_the_uncommitted_batch_and_appending_continues(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    data, start, commit = _log_with_batch(tmp_path / "full.log")
    length = {"before commit": commit, "inside commit": commit + 5, "inside batch": start + 40}[
        where
    ]
    path = tmp_path / "cut.log"
    path.write_bytes(data[:length])
    with caplog.at_level(logging.WARNING, logger="kredenc.storage.haystack"):
        hay = Haystack(path, durability="none")
    try:
        assert caplog.records, "the discarded batch must be logged"
        assert (hay.end, hay.last_seq) == (start, 5)
        assert path.stat().st_size == start
        assert hay.append([memory_put(50)]) == [(6, start)]
        again = hay.append([memory_put(51), memory_put(52)], batch=True)
        assert [s for s, _ in again] == [7, 8]
    finally:
        hay.close()
    recs = read_log(path)
    assert [r.seq for r in recs] == list(range(1, 10))
    assert [r.payload.get("id") for r in recs[5:8]] == ["mt50", "mt51", "mt52"]
    assert scan(path.read_bytes(), path).problems == []


def test_batch_without_commit_followed_by_valid_records_is_corruption(tmp_path: Path) -> None:
    """Nothing is cut from the middle: a batch that lost its commit is damage.

    A batch is written with one write that ends in its commit record, so only a torn
    tail can lack a commit. Valid records after a commit-less batch mean damage (or a
    broken writer); recovery must refuse, not discard the batch and what follows.
    """
    path = tmp_path / "h.log"
    Haystack.create(path)
    data = bytearray(path.read_bytes())

    def rec(seq: int, txn: int | None = None) -> bytes:
        head: dict[str, object] = {"seq": seq}
        if txn is not None:
            head["txn"] = txn
        head.update({"op": "put", "ns": "default", "id": f"r{seq}"})
        return frame(encode_payload(head))

    for seq in (1, 2, 3):
        data += rec(seq)
    batch = len(data)
    data += rec(4, txn=4) + rec(5, txn=4)
    follows = len(data)
    data += rec(6) + rec(7)
    with pytest.raises(CorruptLog) as exc:
        scan(bytes(data), path)
    assert exc.value.offset == batch
    assert f"byte offset {follows}" in exc.value.message
    # The same when a second batch starts while the first is open.
    other = bytearray(data[:follows]) + rec(6, txn=6) + rec(7, txn=6)
    with pytest.raises(CorruptLog) as exc:
        scan(bytes(other), path)
    assert exc.value.offset == batch
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLog):
        Haystack(path, durability="none")
    assert path.read_bytes() == bytes(data), "nothing may be cut"


# -- the index catches up with the log ----------------------------------------


def _raw_append(home: Path, payloads: list[dict[str, object]]) -> None:
    """Append to a closed store's log behind the index's back (a stale index)."""
    hay = Haystack(home / "haystack.log", durability="none")
    try:
        for payload in payloads:
            hay.append([payload])
    finally:
        hay.close()


def _index_rows(kb: Kredenc) -> set[tuple[str, int, int]]:
    return {(r[0], r[5], r[6]) for r in kb.index.fingerprint()["records"]}


def _log_puts(home: Path) -> set[tuple[str, int, int]]:
    return {
        (r.payload["id"], r.seq, r.offset) for r in read_log(home / "haystack.log") if r.op == "put"
    }


def test_reopen_after_clean_close_catches_up_a_stale_index(
    tmp_path: Path, open_store: OpenStore
) -> None:
    home = tmp_path / "store"
    with open_store(home) as kb:
        kept = [kb.remember(f"indexed before close {n} kept{n}") for n in range(5)]
    stale = tmp_path / "stale"
    shutil.copytree(home, stale)
    _raw_append(stale, [memory_put(n, tag="late") for n in range(7)])
    with open_store(stale) as kb:
        assert _index_rows(kb) == _log_puts(stale)
        for n in range(7):
            hits = kb.search(f"latew{n}", mode="lexical", k=3)
            assert [h.id for h in hits] == [f"mlate{n}"]
            assert kb.search(f"stored note {n} latew{n}", mode="dense", k=1)[0].id == f"mlate{n}"
            assert kb.get(f"mlate{n}").text == f"stored note {n} latew{n}"
        assert kb.get(kept[2].id).text == "indexed before close 2 kept2"
        before = kb.index.fingerprint()
        kb.rebuild()
        assert kb.index.fingerprint() == before, "catch-up and rebuild must agree"
    with open_store(home) as kb:  # the original store did not see the late records
        assert kb.search("latew3", mode="lexical") == []


def test_index_ahead_of_the_log_is_rebuilt(
    tmp_path: Path, open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A log older than its index (e.g. restored from a backup) rebuilds the index."""
    home = tmp_path / "store"
    with open_store(home) as kb:
        kb.remember("early note alpha")
    old_log = (home / "haystack.log").read_bytes()
    with open_store(home) as kb:
        kb.remember("later note beta")
    (home / "haystack.log").write_bytes(old_log)
    with caplog.at_level(logging.WARNING, logger="kredenc.storage.store"), open_store(home) as kb:
        assert any("ahead of the log" in r.getMessage() for r in caplog.records)
        assert _index_rows(kb) == _log_puts(home)
        assert kb.search("beta", mode="lexical") == []
        assert len(kb.search("alpha", mode="lexical")) == 1


def test_index_with_records_lost_catches_up(tmp_path: Path, open_store: OpenStore) -> None:
    """An index whose last transaction was lost (applied_seq behind) is replayed."""
    home = tmp_path / "store"
    with open_store(home) as kb:
        first = kb.remember("first one gamma")
        applied = kb.index.applied()
        kb.remember("second one delta")
        kb.remember_many([{"text": "third one epsilon"}, {"text": "fourth one zeta"}])
    conn = sqlite3.connect(home / "index.db")
    try:
        # Roll the index back to just after the first memory, as if its later
        # transactions never reached the disk.
        conn.execute("DELETE FROM cards WHERE rowid IN (SELECT rowid FROM records WHERE seq > 1)")
        conn.execute("DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM records WHERE seq > 1)")
        conn.execute("DELETE FROM records WHERE seq > 1")
        conn.execute("UPDATE meta SET value=? WHERE key='applied_seq'", (str(applied[0]),))
        conn.execute("UPDATE meta SET value=? WHERE key='applied_end'", (str(applied[1]),))
        conn.commit()
    finally:
        conn.close()
    with open_store(home) as kb:
        assert _index_rows(kb) == _log_puts(home)
        for word in ("gamma", "delta", "epsilon", "zeta"):
            assert len(kb.search(word, mode="lexical")) == 1, word
        assert kb.get(first.id).text == "first one gamma"


# -- kredenc check ---------------------------------------------------------------


def test_check_sound_store(tmp_path: Path, open_store: OpenStore) -> None:
    home = tmp_path / "store"
    with open_store(home) as kb:
        kb.remember("one")
        kb.remember_many([{"text": "two"}, {"text": "three"}])
    report = verify_store(home)
    assert report["sound"] is True, report
    assert report["findings"][-1] == "sound"
    # Three memories and the batch's commit record.
    assert any("4 committed records, last seq 4" in f for f in report["findings"]), report


def test_check_damaged_middle_record(tmp_path: Path, open_store: OpenStore) -> None:
    home = tmp_path / "store"
    with open_store(home) as kb:
        kb.remember("one")
        middle = kb.remember("two")
        kb.remember("three")
    log = home / "haystack.log"
    data = bytearray(log.read_bytes())
    data[middle.offset + 30] ^= 0x10
    log.write_bytes(bytes(data))
    report = verify_store(home)
    assert report["sound"] is False, report
    assert report["findings"][-1] == "NOT sound"
    assert any(f"damaged record at byte offset {middle.offset}" in f for f in report["findings"])
    assert log.read_bytes() == bytes(data), "check must not change the store"


@pytest.mark.parametrize("damage", ["torn", "flipped last", "uncommitted batch"])
def test_check_tail_problems(tmp_path: Path, open_store: OpenStore, damage: str) -> None:
    home = tmp_path / "store"
    with open_store(home) as kb:
        kb.remember("one")
        if damage == "uncommitted batch":
            kb.remember_many([{"text": "two"}, {"text": "three"}])
        else:
            kb.remember("two")
    log = home / "haystack.log"
    data = log.read_bytes()
    recs = parse_log(data)
    if damage == "torn":
        cut_at, data = recs[-1].offset, data[:-7]
    elif damage == "flipped last":
        cut_at = recs[-1].offset
        data = data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]
    else:
        cut_at, data = recs[1].offset, data[: recs[-1].offset]  # drop the commit record
    log.write_bytes(data)
    report = verify_store(home)
    assert report["sound"] is False, report
    text = "\n".join(report["findings"])
    assert f"byte offset {cut_at}" in text
    assert "would be cut when the store is next opened" in text
    assert log.read_bytes() == data, "check must not change the store"
    with open_store(home) as kb:  # opening cuts it; afterwards the store is sound
        assert kb.search("one", mode="lexical")
        assert kb.haystack.end == cut_at
    assert verify_store(home)["sound"] is True


def test_check_cut_inside_header(tmp_path: Path, open_store: OpenStore) -> None:
    home = tmp_path / "store"
    with open_store(home) as kb:
        kb.remember("one")
    (home / "haystack.log").write_bytes((home / "haystack.log").read_bytes()[: HEADER_SIZE - 1])
    report = verify_store(home)
    assert report["sound"] is False
    assert any("file header is incomplete" in f for f in report["findings"])
