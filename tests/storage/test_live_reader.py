"""A read-only handle beside a live writer follows the log: every record acknowledged
before a call began is readable (``get``), found by words (the lexical leg, SQLite WAL)
and by meaning (the dense leg: the reader's vector shards catch up with the index),
and no call fails because the writer moved on.

The writer is a real second process (``_writer_proc.py engine``) that prints each
record once ``remember`` has returned, so the parent knows what was acknowledged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import KredencError
from kredenc.testing.embedders import HashEmbedder

from ._writer_proc import item_text, item_token

OpenStore = Callable[..., Kredenc]
WRITER = Path(__file__).with_name("_writer_proc.py")
SEED = 7
COUNT = 400


class Acks:
    """The writer's acknowledged items, read from its stdout on a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.items: list[tuple[int, str]] = []
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if parts == ["done"]:
                self.done.set()
            elif len(parts) == 4:
                with self._lock:
                    self.items.append((int(parts[0]), parts[3]))
        self.done.set()

    def snapshot(self) -> list[tuple[int, str]]:
        with self._lock:
            return list(self.items)


def _start_writer(home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), "engine", str(home), str(SEED), str(COUNT), "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    _out, err = proc.communicate(timeout=60)
    return err


def test_a_reader_follows_a_writer_in_another_process(
    store_dir: Path, open_store: OpenStore
) -> None:
    with open_store() as kb:
        kb.remember("written before the reader opened")
    reader = Kredenc.open(store_dir, embedder=HashEmbedder(), read_only=True)
    # Load the reader's vector shards before the writer starts: they must follow.
    assert reader.search("written before the reader opened", mode="dense", k=1)
    writer = _start_writer(store_dir)
    acks = Acks(writer)
    errors: list[str] = []
    checked = 0
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            finished = acks.done.is_set()
            acked = acks.snapshot()  # acknowledged before the calls below begin
            if acked:
                newest, rid = acked[-1]
                try:
                    assert reader.get(rid).text == item_text(SEED, newest)
                    lexical = reader.search(item_token(SEED, newest), mode="lexical", k=3)
                    assert rid in [h.id for h in lexical], "lexical leg missed it"
                    dense = reader.search(item_text(SEED, newest), mode="dense", k=3)
                    assert rid in [h.id for h in dense], "dense leg missed it"
                    reader.search("crash note", k=5)  # hybrid, over records being written
                    checked += 1
                except (KredencError, AssertionError) as exc:
                    errors.append(f"item {newest}: {type(exc).__name__}: {exc}")
                    if len(errors) > 20:
                        break
            if finished:
                break
        assert errors == [], errors[:5]
        assert acks.done.is_set(), _stop(writer)
        assert checked > 0
        # Everything acknowledged is readable at the end, through the same handle.
        final = acks.snapshot()
        assert len(final) == COUNT
        for i, rid in final:
            assert reader.get(rid).text == item_text(SEED, i)
        assert reader.stats()["log_records"] >= COUNT
    finally:
        reader.close()
        _stop(writer)


def test_a_reader_sees_forgotten_records_go(store_dir: Path, open_store: OpenStore) -> None:
    """Removals reach the reader's shards too: a forgotten record leaves the dense leg."""
    with open_store() as writer:
        kept = writer.remember("the lighthouse keeper logs the storm")
        gone = writer.remember("the ferry timetable changed in spring")
        with Kredenc.open(store_dir, embedder=HashEmbedder(), read_only=True) as reader:
            hits = reader.search("the ferry timetable changed in spring", mode="dense", k=2)
            assert hits[0].id == gone.id
            writer.forget(gone.id)
            later = writer.remember("the ferry now leaves at noon")
            hits = reader.search("the ferry timetable changed in spring", mode="dense", k=5)
            ids = [h.id for h in hits]
            assert gone.id not in ids
            assert later.id in ids and kept.id in ids


def test_no_record_hint_names_a_command_that_helps(store_dir: Path, open_store: OpenStore) -> None:
    with open_store() as kb:
        kb.remember("one record")
        end = kb.haystack.end
    with Kredenc.open(store_dir, embedder=HashEmbedder(), read_only=True) as reader:
        with pytest.raises(KredencError) as exc:
            reader.haystack.read(end + 1000)
        assert "rebuild" not in exc.value.hint
        assert "check" in exc.value.hint
