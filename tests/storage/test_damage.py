"""Damage never dead-ends (issue 13, finding 7): readers never change the store, a
writer keeps what it cuts, mid-log damage leaves reads working and names salvage,
``rebuild`` recovers from any index.db or embeddings.db, ``check`` names the file."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import CorruptLog, StoreError
from kredenc.storage.haystack import scan
from kredenc.storage.verify import verify_store
from kredenc.testing.embedders import HashEmbedder

from . import read_log

OpenStore = Callable[..., Kredenc]


def _fill(open_store: OpenStore, n: int = 12) -> list[str]:
    with open_store() as kb:
        return [kb.remember(f"note {i} about topic{i} canaryword").id for i in range(n)]


def _hashes(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _middle_text_offset(home: Path, k: int) -> int:
    rec = read_log(home / "haystack.log")[k]
    return rec.offset + 12 + 40  # inside the payload: the checksum fails


def test_a_reader_on_a_torn_tail_cuts_nothing_and_reads_what_is_good(
    open_store: OpenStore, store_dir: Path
) -> None:
    ids = _fill(open_store)
    log = store_dir / "haystack.log"
    data = log.read_bytes()
    last = read_log(log)[-1]
    log.write_bytes(data[: last.offset + 20])  # the last record torn
    before = _hashes(store_dir)
    with open_store(read_only=True) as kb:
        assert kb.get(ids[0]).text.startswith("note 0")
        assert kb.search("topic3", mode="lexical")[0].id == ids[3]
        assert kb.haystack.end == last.offset
    assert _hashes(store_dir) == before


def test_a_writer_keeps_the_cut_tail_beside_the_log_and_names_it(
    open_store: OpenStore, store_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _fill(open_store)
    log = store_dir / "haystack.log"
    data = log.read_bytes()
    last = read_log(log)[-1]
    log.write_bytes(data[: last.offset + 20])
    with caplog.at_level(logging.WARNING), open_store():
        pass
    (cut,) = store_dir.glob("haystack.log.cut-*")
    assert cut.read_bytes() == data[last.offset : last.offset + 20]
    assert log.read_bytes() == data[: last.offset]
    assert cut.name in caplog.text


def test_mid_log_damage_reads_work_and_a_writer_names_salvage(
    open_store: OpenStore, store_dir: Path
) -> None:
    ids = _fill(open_store)
    _flip(store_dir / "haystack.log", _middle_text_offset(store_dir, 5))
    before = _hashes(store_dir)
    with open_store(read_only=True) as kb:
        assert kb.get(ids[2]).text.startswith("note 2")
        assert kb.get(ids[9]).text.startswith("note 9")  # after the damage too
        assert kb.stats()["records"] == 12
        with pytest.raises(CorruptLog) as damaged:
            kb.get(ids[5])
    assert _hashes(store_dir) == before
    assert "salvage" in damaged.value.hint
    with pytest.raises(CorruptLog) as refused:
        open_store()
    offset = read_log_offsets(store_dir)[5]
    assert f"byte offset {offset}" in refused.value.message
    assert f"--store {store_dir} salvage" in refused.value.hint
    assert _hashes(store_dir) == before


def read_log_offsets(home: Path) -> list[int]:
    """Record offsets, read around damage (the record headers are intact)."""
    import struct

    data = (home / "haystack.log").read_bytes()
    out, pos = [], 24
    while pos < len(data):
        (length,) = struct.unpack_from("<I", data, pos + 4)
        out.append(pos)
        pos += 12 + length
    return out


@pytest.mark.parametrize("which", ["index.db", "embeddings.db", "embeddings.db partly"])
def test_rebuild_recovers_from_any_content_of_the_derived_files(
    open_store: OpenStore, store_dir: Path, which: str
) -> None:
    ids = _fill(open_store, 30)
    path = store_dir / which.split(maxsplit=1)[0]
    if which.endswith("partly"):
        data = bytearray(path.read_bytes())
        data[8192 : 8192 + 6000] = b"\x5a" * 6000  # pages after the header overwritten
        path.write_bytes(bytes(data))
    else:
        path.write_bytes(b"garbage, not SQLite " * 300)
    if not which.endswith("partly"):  # a partly overwritten file opens; it fails later
        with pytest.raises(StoreError) as refused:
            open_store()
        assert path.name in refused.value.message, refused.value
        assert "rebuild" in refused.value.hint
    report = verify_store(store_dir)
    assert not report["sound"] and path.name in report["faults"]
    embedder = HashEmbedder()
    from kredenc.storage import repair

    repair.set_aside_bad_files(store_dir, store_dir / "embeddings.db")  # what the CLI does
    with open_store(embedder=embedder) as kb:
        out = kb.rebuild()
        assert out["records"] == 30
        assert kb.search("topic7", mode="lexical")[0].id == ids[7]
        assert kb.search("topic7 canaryword", mode="dense")[0].id == ids[7]
    assert list(store_dir.glob(path.name + ".bad-*"))
    assert verify_store(store_dir)["sound"]


def test_check_names_store_json_when_its_log_id_or_model_is_wrong(
    open_store: OpenStore, store_dir: Path
) -> None:
    _fill(open_store, 3)
    emb = HashEmbedder()
    assert verify_store(store_dir, model_id=emb.model_id, dim=emb.dim)["sound"]
    other = verify_store(store_dir, model_id="sentence-transformers/x", dim=384)
    assert not other["sound"] and other["faults"] == ["store.json"]
    meta = store_dir / "store.json"
    meta.write_text(meta.read_text().replace('"log_id": "', '"log_id": "00'))
    wrong = verify_store(store_dir, model_id=emb.model_id, dim=emb.dim)
    assert not wrong["sound"] and "store.json" in wrong["faults"]
    assert any("log id" in line for line in wrong["findings"])


def test_check_finds_an_index_row_missing_and_full_compares_every_record(
    open_store: OpenStore, store_dir: Path
) -> None:
    ids = _fill(open_store, 20)
    conn = sqlite3.connect(store_dir / "index.db")
    conn.execute("DELETE FROM records WHERE id=?", (ids[13],))
    conn.commit()
    conn.close()
    report = verify_store(store_dir, full=True)
    assert not report["sound"] and report["faults"] == ["index.db"]
    assert any(ids[13] in line for line in report["findings"])
    assert any("rebuild" in line for line in report["findings"])


def test_check_finds_cached_vectors_of_the_wrong_size(
    open_store: OpenStore, store_dir: Path
) -> None:
    _fill(open_store, 5)
    conn = sqlite3.connect(store_dir / "embeddings.db")
    conn.execute("UPDATE embeddings SET vec=zeroblob(12)")
    conn.commit()
    conn.close()
    report = verify_store(store_dir)
    assert report["faults"] == ["embeddings.db"]
    with open_store() as kb:
        kb.rebuild()  # sets the cache aside (wrong sizes) and embeds again
    assert verify_store(store_dir)["sound"]


def test_a_missing_log_says_so_and_names_a_way_out(open_store: OpenStore, store_dir: Path) -> None:
    _fill(open_store, 2)
    (store_dir / "haystack.log").unlink()
    with pytest.raises(StoreError) as missing:
        open_store()
    assert "missing" in missing.value.message
    assert "init --new-log" in missing.value.hint
    assert "run 'kredenc init'" not in missing.value.hint
    report = verify_store(store_dir)
    assert report["faults"] == ["haystack.log"]


def test_scan_of_the_damaged_log_still_refuses(open_store: OpenStore, store_dir: Path) -> None:
    _fill(open_store, 6)
    _flip(store_dir / "haystack.log", _middle_text_offset(store_dir, 2))
    with pytest.raises(CorruptLog):
        scan((store_dir / "haystack.log").read_bytes(), store_dir / "haystack.log")
