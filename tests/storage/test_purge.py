"""Erasure (issue 13, finding 4): after ``forget`` and ``compact(purge=True)`` the
forgotten text is in no file under the store, the tombstone (the id's history) stays,
and a crash at any step leaves the old or the new generation, never neither."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import StoreLocked
from kredenc.storage.haystack import scan
from kredenc.storage.housekeeper import StoreLock

from . import read_log

OpenStore = Callable[..., Kredenc]
CANARY = "the bank PIN is 4921 zebracanary"
STEPS = ["written", "index dropped", "swapped", "cache pruned", "done"]


def _files_holding(home: Path, needle: bytes) -> list[str]:
    return [str(p) for p in sorted(home.rglob("*")) if p.is_file() and needle in p.read_bytes()]


def _seed(kb: Kredenc) -> tuple[str, list[str]]:
    keep = [kb.remember(f"kept note {i} about gardens").id for i in range(5)]
    secret = kb.remember(CANARY, tags=["zebratag"], meta={"why": "zebrameta"}).id
    kb.relate(keep[0], secret, "related_to")
    kb.score(secret, importance=0.9, reason="zebrareason")
    kb.forget(secret)
    return secret, keep


def test_purge_erases_forgotten_text_from_every_file(
    open_store: OpenStore, store_dir: Path
) -> None:
    with open_store() as kb:
        secret, keep = _seed(kb)
        kb.search("zebracanary gardens")  # vectors and cards read
        assert _files_holding(store_dir, b"zebracanary")  # today: still on disk
        out = kb.compact(purge=True)
        assert out["purged"] == 1 and out["stripped"] >= 1
        for rid in keep:
            assert kb.get(rid).text.startswith("kept note")
        assert kb.search("gardens", mode="lexical")
        assert not kb.search("zebracanary", mode="lexical")
        kb.remember("written after the purge")
    for needle in (b"zebracanary", b"4921", b"zebratag", b"zebrameta", b"zebrareason"):
        assert _files_holding(store_dir, needle) == [], needle
    ops = [(r.payload["op"], r.payload.get("id")) for r in read_log(store_dir / "haystack.log")]
    assert ("tombstone", secret) in ops and ("purged", secret) in ops
    with open_store() as kb:
        assert kb.stats()["records"] == 6


def test_purge_drops_the_forgotten_vector_from_the_cache(
    open_store: OpenStore, store_dir: Path
) -> None:
    import sqlite3

    def cached() -> int:
        conn = sqlite3.connect(store_dir / "embeddings.db")
        try:
            return int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
        finally:
            conn.close()

    with open_store() as kb:
        _seed(kb)
    assert cached() == 6
    with open_store() as kb:
        assert kb.compact(purge=True)["cache_dropped"] == 1
    assert cached() == 5


def test_the_writer_lock_is_held_throughout(open_store: OpenStore, store_dir: Path) -> None:
    refused: list[str] = []

    def try_lock(step: str) -> None:
        try:
            StoreLock(store_dir / "lock").release()
        except StoreLocked:
            refused.append(step)

    with open_store() as kb:
        _seed(kb)
        kb.compact(purge=True, on_step=try_lock)
    assert refused == STEPS


_CRASHER = textwrap.dedent(
    """
    import os, sys
    from kredenc.engine import Kredenc
    from kredenc.testing.embedders import HashEmbedder

    home, at = sys.argv[1], sys.argv[2]

    def crash(step):
        if step == at:
            os._exit(9)  # no cleanup, no finally: like kill -9 at this point

    kb = Kredenc.open(home, embedder=HashEmbedder(), durability="none")
    kb.compact(purge=True, on_step=crash)
    """
)


@pytest.mark.parametrize("at", STEPS)
def test_a_crash_at_any_step_leaves_one_whole_generation(
    open_store: OpenStore, store_dir: Path, at: str
) -> None:
    with open_store() as kb:
        secret, keep = _seed(kb)
    old = (store_dir / "haystack.log").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-c", _CRASHER, str(store_dir), at],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 9, proc.stderr
    data = (store_dir / "haystack.log").read_bytes()
    swapped = STEPS.index(at) >= STEPS.index("swapped")
    assert (data != old) == swapped
    rec = scan(data, store_dir / "haystack.log")
    assert rec.problems == [] and rec.last_seq == scan(old, store_dir / "haystack.log").last_seq
    with open_store() as kb:  # opens, discards a stale .new, rebuilds a missing index
        assert [kb.get(r).text for r in keep] == [f"kept note {i} about gardens" for i in range(5)]
        assert not kb.search("zebracanary", mode="lexical")
        kb.compact(purge=True)  # finishing the job after a crash
    assert not (store_dir / "haystack.log.new").exists()
    assert _files_holding(store_dir, b"zebracanary") == []
    assert os.listdir(store_dir)
    assert secret
