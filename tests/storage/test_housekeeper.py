"""The housekeeper: the one writer, all-or-nothing batches, group commit, many threads."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, StoreError
from kredenc.records import Appended
from kredenc.storage.haystack import MAX_PAYLOAD, Haystack
from kredenc.storage.housekeeper import Housekeeper
from kredenc.storage.index.sqlite import SqliteIndex
from kredenc.storage.index.vectors import AnnParams
from kredenc.testing.embedders import HashEmbedder

from . import memory_put, read_log

OpenStore = Callable[..., Kredenc]


@dataclass
class Parts:
    path: Path
    hay: Haystack
    index: SqliteIndex
    hk: Housekeeper

    def index_rows(self) -> list[tuple[str, int, int]]:
        return [(r[0], r[5], r[6]) for r in self.index.fingerprint()["records"]]

    def log_puts(self) -> list[tuple[str, int, int]]:
        return [(r.payload["id"], r.seq, r.offset) for r in read_log(self.path) if r.op == "put"]


def _open_parts(home: Path, durability: str) -> Parts:
    home.mkdir(exist_ok=True)
    path = home / "haystack.log"
    if not path.exists():
        Haystack.create(path)
    emb = HashEmbedder()
    hay = Haystack(path, durability=durability)  # type: ignore[arg-type]
    index = SqliteIndex(home / "index.db", dim=emb.dim, model_id=emb.model_id, ann=AnnParams())
    return Parts(path, hay, index, Housekeeper(hay, index, emb.embed))


@pytest.fixture
def parts(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Parts]:
    durability = getattr(request, "param", "none")
    p = _open_parts(tmp_path / "store", durability)
    try:
        yield p
    finally:
        p.hk.close()
        p.index.close()
        p.hay.close()


def _hold_writer(p: Parts) -> Future[list[Appended]]:
    """Block the writer thread inside an append; return that first request's future.

    Requests submitted until ``p.hay._append_lock`` is released queue up and are
    then taken as one group.
    """
    p.hay._append_lock.acquire()
    first = p.hk.submit([memory_put(1000, tag="first")])
    deadline = time.monotonic() + 10
    while p.hk._queue.qsize() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert p.hk._queue.qsize() == 0, "the writer did not take the first request"
    return first


# -- batches are all or nothing -------------------------------------------------


def test_batch_with_an_oversized_payload_writes_nothing(parts: Parts) -> None:
    parts.hk.write([memory_put(0)])
    end, seq, rows = parts.hay.end, parts.hay.last_seq, parts.index_rows()
    big = memory_put(2, text="x" * MAX_PAYLOAD)
    with pytest.raises(InvalidInput, match="exceeds"):
        parts.hk.write([memory_put(1), big, memory_put(3)], batch=True)
    assert (parts.hay.end, parts.hay.last_seq) == (end, seq)
    assert parts.path.stat().st_size == end
    assert parts.index_rows() == rows
    placed = parts.hk.write([memory_put(4), memory_put(5)], batch=True)
    assert [a.seq for a in placed] == [seq + 1, seq + 2]
    assert parts.index_rows() == parts.log_puts()
    assert [r.seq for r in read_log(parts.path)] == list(range(1, seq + 4))


def test_batch_with_an_unencodable_payload_writes_nothing(parts: Parts) -> None:
    end = parts.hay.end
    with pytest.raises(StoreError, match="append failed"):
        parts.hk.write([memory_put(1), memory_put(2, meta={"bad": {1, 2}})], batch=True)
    assert parts.hay.end == end == parts.path.stat().st_size
    assert parts.hk.write([memory_put(3)]) == [Appended(1, end)]


def test_remember_many_with_one_oversized_text_writes_nothing(open_store: OpenStore) -> None:
    with open_store(max_text_chars=MAX_PAYLOAD + 10) as kb:
        kb.remember("before the batch")
        end, seq = kb.haystack.end, kb.haystack.last_seq
        rows = kb.index.fingerprint()
        items = [{"text": "fine one"}, {"text": "y" * MAX_PAYLOAD}, {"text": "fine two"}]
        with pytest.raises(InvalidInput, match="exceeds"):
            kb.remember_many(items)
        assert (kb.haystack.end, kb.haystack.last_seq) == (end, seq)
        assert kb.index.fingerprint() == rows
        assert kb.search("fine", mode="lexical") == []
        mems = kb.remember_many([{"text": "fine one"}, {"text": "fine two"}])
        assert [m.seq for m in mems] == [seq + 1, seq + 2]


def test_a_failed_request_does_not_fail_its_group(parts: Parts) -> None:
    first = _hold_writer(parts)
    try:
        good1 = parts.hk.submit([memory_put(1)])
        bad = parts.hk.submit([memory_put(2), memory_put(3, text="x" * MAX_PAYLOAD)], batch=True)
        good2 = parts.hk.submit([memory_put(4), memory_put(5)], batch=True)
    finally:
        parts.hay._append_lock.release()
    assert [a.seq for a in first.result(10)] == [1]
    assert [a.seq for a in good1.result(10)] == [2]
    with pytest.raises(InvalidInput):
        bad.result(10)
    assert [a.seq for a in good2.result(10)] == [3, 4]  # commit is seq 5
    assert [r.seq for r in read_log(parts.path)] == [1, 2, 3, 4, 5]
    assert parts.index_rows() == parts.log_puts()


# -- group commit ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "syncs"), [("append", 2), ("batch", 1), ("none", 0)], indirect=["parts"]
)
def test_waiting_requests_share_one_fsync(
    parts: Parts, syncs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """11 requests in two groups: 'append' syncs per group, 'batch' only for batches."""
    calls: list[int] = []
    real_sync = parts.hay.sync
    monkeypatch.setattr(parts.hay, "sync", lambda: (calls.append(1), real_sync())[1])
    first = _hold_writer(parts)
    try:
        futures = [parts.hk.submit([memory_put(n)]) for n in range(8)]
        futures.append(parts.hk.submit([memory_put(8), memory_put(9)], batch=True))
        futures += [parts.hk.submit([memory_put(n)]) for n in (10, 11)]
    finally:
        parts.hay._append_lock.release()
    first.result(10)
    seqs = [a.seq for f in futures for a in f.result(10)]
    assert seqs == [*range(2, 10), 10, 11, 13, 14]  # 12 is the batch's commit
    assert len(calls) == syncs
    assert parts.index_rows() == parts.log_puts()


# -- the index follows the log ------------------------------------------------------


def test_index_failure_is_repaired_by_the_next_write(
    parts: Parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed index update must not leave the index behind the log for good.

    The record is in the log (the truth), its caller is told the index update
    failed; later writes, and reopening the store, must bring the index level.
    """
    real_apply = parts.index.apply
    failures = iter([True])

    def flaky_apply(*args: Any, **kwargs: Any) -> None:
        if next(failures, False):
            raise sqlite3.OperationalError("disk I/O error (simulated)")
        real_apply(*args, **kwargs)

    monkeypatch.setattr(parts.index, "apply", flaky_apply)
    with pytest.raises(StoreError, match="index update failed"):
        parts.hk.write([memory_put(1)])
    assert [r.seq for r in read_log(parts.path)] == [1]
    parts.hk.write([memory_put(2)])
    assert parts.index_rows() == parts.log_puts()


@pytest.mark.parametrize("more_writes", [True, False])
def test_index_failure_is_repaired_on_reopen(
    store_dir: Path, open_store: OpenStore, monkeypatch: pytest.MonkeyPatch, more_writes: bool
) -> None:
    with open_store() as kb:
        real_apply = kb.index.apply
        failures = iter([True])

        def flaky_apply(*args: Any, **kwargs: Any) -> None:
            if next(failures, False):
                raise sqlite3.OperationalError("disk I/O error (simulated)")
            real_apply(*args, **kwargs)

        monkeypatch.setattr(kb.index, "apply", flaky_apply)
        with pytest.raises(StoreError, match="index update failed"):
            kb.remember("logged alpha")
        if more_writes:
            kb.remember("logged beta")
    with open_store() as kb:
        assert len(kb.search("alpha", mode="lexical")) == 1
        assert len(kb.search("beta", mode="lexical")) == int(more_writes)
        rows = {(r[0], r[5], r[6]) for r in kb.index.fingerprint()["records"]}
        log = {(r.payload["id"], r.seq, r.offset) for r in read_log(store_dir / "haystack.log")}
        assert rows == log


# -- closing ----------------------------------------------------------------------


def test_close_answers_queued_requests_and_refuses_new_ones(tmp_path: Path) -> None:
    p = _open_parts(tmp_path / "store", "none")
    try:
        futures = [p.hk.submit([memory_put(n)]) for n in range(50)]
        p.hk.close()
        assert [f.result(0)[0].seq for f in futures] == list(range(1, 51))
        with pytest.raises(StoreError, match="closed"):
            p.hk.submit([memory_put(99)])
        p.hk.close()  # closing twice is harmless
    finally:
        p.index.close()
        p.hay.close()


# -- many threads ------------------------------------------------------------------


@pytest.mark.slow
def test_32_threads_remember_1000_each(open_store: OpenStore) -> None:
    threads, per_thread = 32, 1000
    results: list[list[tuple[str, int, int]]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads, timeout=60)
    with open_store() as kb:

        def work(t: int) -> None:
            start.wait()
            for n in range(per_thread):
                m = kb.remember(f"thread {t} note {n}", meta={"t": t, "n": n})
                results[t].append((m.id, m.seq, m.offset))

        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(work, t) for t in range(threads)]:
                future.result()
        total = threads * per_thread
        returned = sorted(x for r in results for x in r)
        assert len({rid for rid, _, _ in returned}) == total
        assert sorted(seq for _, seq, _ in returned) == list(range(1, total + 1))
        assert len({off for _, _, off in returned}) == total
        assert kb.stats()["records"] == total
        by_id = {rid: (seq, off) for rid, seq, off in returned}
        index = {r[0]: (r[5], r[6]) for r in kb.index.fingerprint()["records"]}
        assert index == by_id
        for t in (0, 17, 31):  # each thread's own order is the log's order
            assert [s for _, s, _ in results[t]] == sorted(s for _, s, _ in results[t])
    recs = read_log(kb.home / "haystack.log")
    assert [r.seq for r in recs] == list(range(1, total + 1))
    assert {r.payload["id"]: (r.seq, r.offset) for r in recs} == by_id
    assert {(r.payload["meta"]["t"], r.payload["meta"]["n"]) for r in recs} == {
        (t, n) for t in range(threads) for n in range(per_thread)
    }
