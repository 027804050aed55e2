"""The haystack log: appending, reading, torn tails and damage.

Two properties carry the store's durability and are checked exhaustively here:

* a log cut at *any* byte length keeps exactly its complete records (a cut inside
  the 24-byte file header is damage, not a torn write: ``CorruptLog`` at offset 0),
  and opening it cuts the torn tail so that appending continues the seqs;
* *every* single-bit flip is detected: in a record that valid records follow,
  opening is refused with ``CorruptLog`` naming the damaged record's offset and
  nothing is cut; only a damaged *last* record may be cut, and then it is reported
  (``Recovery.problems``, a WARNING).

The 24-byte file header has no checksum, so its fields are checked one by one:
magic and flags (``CorruptLog`` at offsets 0 and 6), the version (a flip to 0 is
``CorruptLog`` at offset 4; a flip to a larger number cannot be told from a newer
format and is refused with ``FormatError``), and the 16-byte log id, which only
``Kredenc.open`` can check, against store.json.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import CorruptLog, FormatError, InvalidInput, StoreError
from kredenc.storage.haystack import (
    HEADER,
    HEADER_SIZE,
    MAX_PAYLOAD,
    RECORD_HEADER_SIZE,
    Haystack,
    check_file,
    read_header,
    scan,
)

from . import memory_put, parse_log, read_log

SEED = 20261130
OpenStore = Callable[..., Kredenc]
LOGGER = "kredenc.storage.haystack"


def new_log(path: Path, *, durability: str = "none") -> Haystack:
    Haystack.create(path)
    return Haystack(path, durability=durability)  # type: ignore[arg-type]


# -- appending and reading -------------------------------------------------------


def test_append_assigns_seqs_and_offsets_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "h.log"
    hay = new_log(path)
    try:
        placed = [hay.append([memory_put(n)])[0] for n in range(5)]
        assert [seq for seq, _ in placed] == [1, 2, 3, 4, 5]
        assert placed[0][1] == HEADER_SIZE
        assert hay.end == path.stat().st_size
        for n, (seq, offset) in enumerate(placed):
            got = hay.read(offset)
            assert got["seq"] == seq
            assert got["id"] == f"mt{n}"
            assert list(got)[:2] == ["seq", "op"]  # the prefix recovery reads
        records = list(hay.iter_from())
        assert [(r.seq, r.offset) for r in records] == placed
        assert [r.end for r in records[:-1]] == [off for _, off in placed[1:]]
        assert list(hay.iter_from(placed[3][1])) == records[3:]
        for bad in (0, HEADER_SIZE - 1, hay.end, hay.end + 100):
            with pytest.raises(StoreError):
                hay.read(bad)
    finally:
        hay.close()
    assert [r.seq for r in read_log(path)] == [1, 2, 3, 4, 5]


def test_batch_gets_a_txn_and_a_commit_record(tmp_path: Path) -> None:
    path = tmp_path / "h.log"
    hay = new_log(path)
    try:
        hay.append([memory_put(0)])
        placed = hay.append([memory_put(n) for n in (1, 2, 3)], batch=True)
        assert [seq for seq, _ in placed] == [2, 3, 4]
        assert hay.last_seq == 5  # the commit record
        end = hay.end
        # One payload needs no transaction: no txn, no commit record.
        assert hay.append([memory_put(4)], batch=True) == [(6, end)]
    finally:
        hay.close()
    recs = read_log(path)
    assert [r.seq for r in recs] == [1, 2, 3, 4, 5, 6]
    assert [r.payload.get("txn") for r in recs] == [None, 2, 2, 2, 2, None]
    assert [r.op for r in recs] == ["put", "put", "put", "put", "commit", "put"]
    assert [r.offset for r in recs[1:4]] == [off for _, off in placed]


def test_read_verifies_the_record(tmp_path: Path) -> None:
    """A record damaged after the log was opened is refused when read, not returned."""
    path = tmp_path / "h.log"
    hay = new_log(path)
    try:
        placed = [hay.append([memory_put(n)])[0] for n in range(3)]
        offset = placed[1][1]
        with open(path, "r+b") as fh:
            fh.seek(offset + RECORD_HEADER_SIZE + 5)
            byte = fh.read(1)
            fh.seek(offset + RECORD_HEADER_SIZE + 5)
            fh.write(bytes([byte[0] ^ 0x01]))
        with pytest.raises(CorruptLog) as exc:
            hay.read(offset)
        assert exc.value.offset == offset
        with pytest.raises(CorruptLog):
            list(hay.iter_from())
        assert hay.read(placed[2][1])["id"] == "mt2"
    finally:
        hay.close()


def test_oversized_payload_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "h.log"
    hay = new_log(path)
    try:
        hay.append([memory_put(0)])
        end, size = hay.end, path.stat().st_size
        big = memory_put(1, text="x" * MAX_PAYLOAD)
        with pytest.raises(InvalidInput, match="exceeds"):
            hay.append([memory_put(2), big, memory_put(3)], batch=True)
        assert (hay.end, hay.last_seq, path.stat().st_size) == (end, 1, size)
        assert hay.append([memory_put(4)]) == [(2, end)]
    finally:
        hay.close()


def test_unknown_durability_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.log"
    Haystack.create(path)
    with pytest.raises(InvalidInput, match="durability"):
        Haystack(path, durability="sometimes")  # type: ignore[arg-type]


def test_missing_log_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="missing"):
        Haystack(tmp_path / "nope.log")


def test_fsync_follows_the_durability_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr("kredenc.storage.haystack.os.fsync", counting_fsync)
    for durability, expected in (("none", 0), ("append", 3), ("batch", 3)):
        path = tmp_path / f"{durability}.log"
        hay = new_log(path, durability=durability)
        calls.clear()
        try:
            for n in range(3):
                hay.append([memory_put(n)])
            hay.append([memory_put(9)], sync=False)
            hay.sync()
        finally:
            hay.close()
        # "batch" fsyncs when asked to (the housekeeper asks only for batches).
        assert len(calls) == expected + (0 if durability == "none" else 1), durability


# -- a log cut at every byte length ---------------------------------------------


def small_put(n: int) -> dict[str, object]:
    return {"op": "put", "ns": "default", "id": f"r{n}"}


def test_log_cut_at_every_byte_length(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """20 records; every cut keeps exactly the complete records and appending goes on.

    A cut inside the 24-byte file header is not a torn write (the header is written
    and fsynced when the store is created, before store.json names the log): it is
    refused with ``CorruptLog`` at offset 0, and the file is left as it is.
    """
    full = tmp_path / "full.log"
    hay = new_log(full)
    try:
        # Small records (about 50 bytes) keep the number of cuts, each a file, small.
        starts = [hay.append([small_put(n)])[0][1] for n in range(20)]
    finally:
        hay.close()
    data = full.read_bytes()
    ends = [*starts[1:], len(data)]
    cut_path = tmp_path / "cut.log"
    for length in range(len(data) + 1):
        cut = data[:length]
        cut_path.write_bytes(cut)
        if length < HEADER_SIZE:
            with pytest.raises(CorruptLog) as exc:
                scan(cut, cut_path)
            assert exc.value.offset == 0
            assert f"file header is incomplete ({length} bytes)" in exc.value.message
            with pytest.raises(CorruptLog) as exc:
                Haystack(cut_path, durability="none")
            assert exc.value.offset == 0
            assert cut_path.read_bytes() == cut, "a refused open must not change the file"
            continue
        complete = bisect.bisect_right(ends, length)
        boundary = ends[complete - 1] if complete else HEADER_SIZE
        torn = length != boundary
        rec = scan(cut, cut_path)
        assert (rec.records, rec.last_seq, rec.end) == (complete, complete, boundary), length
        assert rec.truncated_bytes == length - boundary
        assert bool(rec.problems) == torn
        if torn:
            assert f"tail at byte offset {boundary}" in rec.problems[0]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            hay = Haystack(cut_path, durability="none")
        try:
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert bool(warnings) == torn, length
            assert cut_path.stat().st_size == boundary
            assert (hay.end, hay.last_seq) == (boundary, complete)
            assert hay.append([small_put(100)]) == [(complete + 1, boundary)]
            assert hay.append([small_put(101), small_put(102)], batch=True)[0][0] == complete + 2
            seqs = [r.seq for r in hay.iter_from()]
        finally:
            hay.close()
        assert seqs == list(range(1, complete + 5)), length
        again = scan(cut_path.read_bytes(), cut_path)
        assert (again.records, again.last_seq, again.problems) == (complete + 4, complete + 4, [])
        kept = parse_log(cut_path.read_bytes())
        assert [r.payload["id"] for r in kept[:complete]] == [f"r{n}" for n in range(complete)]


# -- single-bit flips --------------------------------------------------------------


def _flip_log(path: Path) -> tuple[bytes, list[int]]:
    """A 1,000-record log (singles and batches, the last record a single put)."""
    rng = random.Random(SEED)
    hay = new_log(path)
    n = 0
    try:
        while hay.last_seq < 995:
            if rng.random() < 0.1:
                size = rng.randint(2, 4)
                hay.append(
                    [memory_put(n + k, text="b" * rng.randint(0, 80)) for k in range(size)],
                    batch=True,
                )
                n += size
            else:
                hay.append([memory_put(n, text="s" * rng.randint(0, 80))])
                n += 1
        while hay.last_seq < 1000:
            hay.append([memory_put(n)])
            n += 1
    finally:
        hay.close()
    data = path.read_bytes()
    records = parse_log(data)
    assert len(records) == 1000
    assert records[-1].op == "put" and "txn" not in records[-1].payload
    return data, [r.offset for r in records]


def _flip(data: bytes, bit: int) -> bytes:
    buf = bytearray(data)
    buf[bit // 8] ^= 1 << (bit % 8)
    return bytes(buf)


def _header_expectation(bit: int) -> tuple[type[Exception] | None, int]:
    """What a flip of header bit ``bit`` must do: (error type or None, offset)."""
    byte = bit // 8
    if byte < 4:
        return CorruptLog, 0  # file magic
    if byte < 6:
        # The version field (1, little endian). Without a header checksum a flip that
        # makes it larger cannot be told from a newer format: FormatError. A flip to 0
        # is an invalid version: CorruptLog.
        value = 1 ^ (1 << (bit - 32))
        return (CorruptLog, 4) if value == 0 else (FormatError, 4)
    if byte < 8:
        return CorruptLog, 6  # flags must be 0 in version 1
    return None, 8  # the log id: caught by Kredenc.open against store.json


def _check_flip(data: bytes, starts: list[int], bit: int, path: Path) -> None:
    """One trial of the flip test, on the pure ``scan``."""
    damaged = _flip(data, bit)
    byte = bit // 8
    where = f"seed {SEED}, bit {bit} (byte {byte})"
    if byte < HEADER_SIZE:
        kind, offset = _header_expectation(bit)
        if kind is None:
            rec = scan(damaged, path)
            assert rec.records == 1000 and not rec.problems, where
            assert read_header(damaged, path) != read_header(data, path), where
            return
        with pytest.raises(kind) as exc:
            scan(damaged, path)
        if kind is CorruptLog:
            assert exc.value.offset == offset, where  # type: ignore[attr-defined]
        else:
            assert "format version" in str(exc.value), where
        return
    index = bisect.bisect_right(starts, byte) - 1
    start = starts[index]
    if index < len(starts) - 1:
        with pytest.raises(CorruptLog) as exc:
            scan(damaged, path)
        assert exc.value.offset == start, where
        assert f"byte offset {start}" in exc.value.message, where
        return
    rec = scan(damaged, path)  # the last record: may be cut, never silently
    assert rec.end == start, where
    assert rec.records == 999 and rec.last_seq == 999, where
    assert rec.truncated_bytes == len(data) - start, where
    assert rec.problems and f"byte offset {start}" in rec.problems[0], where


def _flip_bits(data: bytes, starts: list[int], trials: int, seed: int) -> list[int]:
    """Every header bit, every bit of the first and last record, the rest at random."""
    bits = list(range(HEADER_SIZE * 8))
    bits += range(starts[0] * 8, starts[1] * 8)
    bits += range(starts[-1] * 8, len(data) * 8)
    rng = random.Random(seed)
    bits += [rng.randrange(HEADER_SIZE * 8, len(data) * 8) for _ in range(trials - len(bits))]
    return bits


@pytest.mark.slow
def test_every_single_bit_flip_is_detected(tmp_path: Path) -> None:
    """10,000 flips in a 1,000-record log, one per trial, on the pure ``scan``."""
    path = tmp_path / "flips.log"
    data, starts = _flip_log(path)
    assert scan(data, path).records == 1000
    bits = _flip_bits(data, starts, 10_000, SEED)
    assert len(bits) == 10_000
    for bit in bits:
        _check_flip(data, starts, bit, path)


def test_bit_flips_through_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """200 flips written to a file and opened with ``Haystack`` and ``check_file``.

    A refused open leaves the file byte for byte as it was; a cut last record is
    reported in ``recovery.problems`` and logged as a WARNING.
    """
    data, starts = _flip_log(tmp_path / "flips.log")
    rng = random.Random(SEED + 1)
    bits = rng.sample(range(HEADER_SIZE * 8), 30)
    bits += [rng.randrange(starts[-1] * 8, len(data) * 8) for _ in range(20)]
    bits += [rng.randrange(HEADER_SIZE * 8, starts[-1] * 8) for _ in range(150)]
    path = tmp_path / "damaged.log"
    for bit in bits:
        damaged = _flip(data, bit)
        path.write_bytes(damaged)
        byte = bit // 8
        where = f"seed {SEED + 1}, bit {bit} (byte {byte})"
        sound, findings = check_file(path)
        if byte < HEADER_SIZE:
            kind, offset = _header_expectation(bit)
        elif byte < starts[-1]:
            kind, offset = CorruptLog, starts[bisect.bisect_right(starts, byte) - 1]
        else:
            kind, offset = None, starts[-1]
        if kind is not None:
            with pytest.raises(kind) as exc:
                Haystack(path, durability="none")
            if kind is CorruptLog:
                assert exc.value.offset == offset, where  # type: ignore[attr-defined]
            assert not sound and findings == [exc.value.message], where  # type: ignore[attr-defined]
            if byte >= HEADER_SIZE:
                assert f"byte offset {offset}" in findings[0], where
            assert path.read_bytes() == damaged, f"{where}: a refused open changed the file"
            continue
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            hay = Haystack(path, durability="none")
        try:
            if byte < HEADER_SIZE:  # the log id: the log itself is sound
                assert sound, where
                assert hay.recovery.problems == [] and hay.last_seq == 1000, where
                assert path.read_bytes() == damaged, where
                continue
            assert not sound and any("would be cut" in f for f in findings), where
            assert any(f"byte offset {offset}" in f for f in findings), where
            assert hay.recovery.problems, where
            assert f"byte offset {offset}" in hay.recovery.problems[0], where
            logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert any(f"byte offset {offset}" in m for m in logged), where
            assert path.stat().st_size == offset and hay.last_seq == 999, where
        finally:
            hay.close()


def test_log_id_flips_are_refused_by_kredenc_open(tmp_path: Path, open_store: OpenStore) -> None:
    """The 16-byte log id has no checksum of its own: store.json is its witness."""
    home = tmp_path / "store"
    with open_store(home) as kb:
        kb.remember("the log id names this store's log")
    log = home / "haystack.log"
    data = log.read_bytes()
    rng = random.Random(SEED + 2)
    for byte in range(8, HEADER_SIZE, 2):
        bit = byte * 8 + rng.randrange(8)
        copy = tmp_path / f"copy{byte}"
        shutil.copytree(home, copy)
        (copy / "haystack.log").write_bytes(_flip(data, bit))
        for _ in range(2):  # the failed open released the lock: the same error again
            with pytest.raises(StoreError, match=r"log id does not match store\.json"):
                open_store(copy)
    with open_store(home) as kb:  # the original is untouched
        assert kb.search("witness store's log", mode="lexical")


def test_header_damage_is_refused_by_kredenc_open(tmp_path: Path, open_store: OpenStore) -> None:
    home = tmp_path / "store"
    with open_store(home) as kb:
        kb.remember("first")
        second = kb.remember("second")
        kb.remember("third")
    log = home / "haystack.log"
    data = log.read_bytes()
    cases = {
        "magic": (0, 0),  # (bit, expected offset)
        "flags": (6 * 8 + 3, 6),
        "middle record": (second.offset * 8 + 100 * 8, second.offset),
    }
    for name, (bit, offset) in cases.items():
        log.write_bytes(_flip(data, bit))
        with pytest.raises(CorruptLog) as exc:
            open_store(home)
        assert exc.value.offset == offset, name
        assert log.read_bytes() == _flip(data, bit), name
    version = bytearray(data)
    struct.pack_into("<H", version, 4, 2)
    log.write_bytes(bytes(version))
    with pytest.raises(FormatError, match="newer than this kredenc supports"):
        open_store(home)
    log.write_bytes(data)
    with open_store(home) as kb:
        assert kb.get(second.id).text == "second"


def test_header_layout(tmp_path: Path) -> None:
    path = tmp_path / "h.log"
    log_id = Haystack.create(path)
    data = path.read_bytes()
    assert len(data) == HEADER_SIZE == 24
    assert HEADER.unpack(data) == (b"KRDH", 1, 0, log_id)
    assert read_header(data, path) == log_id
    assert RECORD_HEADER_SIZE == 12
    with pytest.raises(FileExistsError):
        Haystack.create(path)
