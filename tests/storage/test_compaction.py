"""The card index is merged into one FTS5 segment as it grows and after a rebuild,
between writes, without changing a single search result."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.storage.index import sqlite as index_sqlite
from kredenc.testing.embedders import HashEmbedder

WORDS = [f"w{i:02d}" for i in range(40)] + ["kestrel", "budget", "river"]
QUERIES = ("kestrel budget", "w01 w02 w03", "river w10", "w05")


def open_store(home: Path) -> Kredenc:
    return Kredenc.open(home, embedder=HashEmbedder(), durability="none")


def file_batches(kb: Kredenc, batches: int, size: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    for _ in range(batches):
        kb.remember_many(
            [{"text": " ".join(rng.choices(WORDS, k=rng.randint(3, 10)))} for _ in range(size)]
        )


def segments(kb: Kredenc) -> int:
    conn = kb.index.reader()
    return int(conn.execute("SELECT count(DISTINCT segid) FROM cards_idx").fetchone()[0])


def compacted_at(home: Path) -> int:
    """The cards the index held when last merged, read from a closed store's index."""
    conn = sqlite3.connect(home / "index.db")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='compacted_at'").fetchone()
    finally:
        conn.close()
    return int(row[0]) if row else 0


def results(kb: Kredenc) -> list[list[tuple[str, float]]]:
    return [
        [(h.id, round(h.score, 9)) for h in kb.search(q, k=20, mode="lexical")] for q in QUERIES
    ]


def test_a_growing_index_is_merged_between_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_sqlite, "COMPACT_MIN", 100)
    with open_store(tmp_path / "merged") as kb:
        file_batches(kb, 12, 25)  # 300 cards in 12 writes: merged at 100, 125, 175, 225
    # (Closing waits for the housekeeper: its last write and its upkeep are done.)
    assert 225 <= compacted_at(tmp_path / "merged") <= 300
    monkeypatch.setattr(index_sqlite, "COMPACT_MIN", 10**9)
    with open_store(tmp_path / "unmerged") as plain:
        file_batches(plain, 12, 25)
        assert segments(plain) > 1  # one segment per write, merged only a few at a time
    assert compacted_at(tmp_path / "unmerged") == 0
    with open_store(tmp_path / "merged") as kb, open_store(tmp_path / "unmerged") as plain:
        assert segments(kb) < segments(plain)
        # Merging moves no score: BM25 statistics are the same either way. (Ids differ
        # between the two stores; the scores and their order must not.)
        assert [[s for _, s in r] for r in results(kb)] == [
            [s for _, s in r] for r in results(plain)
        ]


def test_compaction_waits_for_enough_cards_and_growth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_sqlite, "COMPACT_MIN", 100)
    with open_store(tmp_path / "s") as kb:
        file_batches(kb, 1, 60)
        assert not kb.index.compaction_due()  # too few cards to bother
    assert compacted_at(tmp_path / "s") == 0
    with open_store(tmp_path / "s") as kb:
        file_batches(kb, 1, 60)
    assert compacted_at(tmp_path / "s") == 120  # merged once the writes were done
    with open_store(tmp_path / "s") as kb:
        file_batches(kb, 1, 20)  # 140 < 120 x 1.25: not grown enough
    assert compacted_at(tmp_path / "s") == 120


def test_rebuild_leaves_one_segment_and_the_same_results(tmp_path: Path) -> None:
    with open_store(tmp_path / "s") as kb:
        file_batches(kb, 10, 20)
        before = results(kb)
        kb.rebuild()
        assert segments(kb) == 1
        assert results(kb) == before
    assert compacted_at(tmp_path / "s") == 200
