"""The index conformance suite, the history part: ``Index.history_of``.

Which log records land in a memory's history when they are applied (in seq order, by
address), that other records and other namespaces stay out of it, that a forgotten
or erased memory keeps it, and that a rebuild from the same log gives the same one.
"""

from __future__ import annotations

from pathlib import Path

from kredenc.testing.conformance.index_data import Records, edge, put, tombstone
from kredenc.testing.conformance.index_records import IndexRecordConformance
from kredenc.testing.embedders import HashEmbedder

__all__ = ["IndexHistoryConformance"]


class IndexHistoryConformance(IndexRecordConformance):
    """What ``history_of`` holds after ``apply``."""

    @staticmethod
    def _story(log: Records) -> list[list[tuple[int, dict[str, object]]]]:
        """Batches touching memories m1 and m2 (namespace "a"), a chunk c1, and a
        memory of namespace "b"; a test names the seqs it expects."""
        return [
            log.add(  # seqs 1-3
                put("a", "m1", "first memory"),
                put("a", "m2", "second memory"),
                put("a", "c1", "a chunk", type="chunk", kind=""),
            ),
            log.add(  # 4: m1 scored; 5: m1 -> m2; 6: m1 -> c1; 7: c1 scored (no memory)
                {"op": "score", "ns": "a", "id": "m1", "importance": 0.9, "reason": "why"},
                edge("a", "m1", "m2", "supports"),
                edge("a", "m1", "c1", "mentions"),
                {"op": "score", "ns": "a", "id": "c1", "importance": 0.2},
            ),
            log.add(  # 8: m2 status; 9: the access counts are no change; 10: m1 -x- m2
                {"op": "status", "ns": "a", "id": "m2", "status": "validated"},
                {"op": "access", "ns": "a", "counts": {"m1": 3}, "ts": 5.0},
                {"op": "unedge", "ns": "a", "src": "m1", "dst": "m2", "rel": "supports"},
            ),
            log.add(  # 11: m2 -> m1 again; 12: m1 forgotten (m2 loses the edge)
                edge("a", "m2", "m1", "depends_on"),
                tombstone("a", "m1"),
            ),
            log.add(  # 13: a memory of "b" under the same words; 14: "b" scores "m2"
                put("b", "bm", "first memory"),
                {"op": "score", "ns": "b", "id": "m2", "importance": 0.1},
            ),
        ]

    def test_history_holds_each_change_to_a_memory_in_order(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            for batch in self._story(log):
                self.apply(index, log, batch, embedder)
            address = {p["seq"]: offset for offset, p in log.entries}
            m1 = index.history_of("a", "m1")
            assert [seq for seq, _ in m1] == [1, 4, 5, 6, 10, 11, 12]
            assert all(addr == address[seq] for seq, addr in m1)
            # m2: its put, the edges to and from it, its status, m1's tombstone.
            assert [seq for seq, _ in index.history_of("a", "m2")] == [2, 5, 8, 10, 11, 12]
            assert [seq for seq, _ in index.history_of("b", "bm")] == [13]

    def test_history_is_for_memories_of_the_namespace_only(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            for batch in self._story(log):
                self.apply(index, log, batch, embedder)
            assert index.history_of("a", "c1") == []  # a chunk keeps none
            assert index.history_of("b", "m1") == []  # another namespace's id
            assert index.history_of("a", "bm") == []
            assert index.history_of("a", "nothing") == []
            assert 14 not in [seq for seq, _ in index.history_of("a", "m2")]

    def test_an_erased_memory_keeps_its_history_from_the_stub(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        batch = log.add(
            {"op": "purged", "ns": "a", "id": "m9", "type": "memory"},
            {"op": "purged", "ns": "a", "id": "c9", "type": "chunk"},
            {"op": "score", "ns": "a", "id": "m9", "importance": 0.3},
            tombstone("a", "m9"),
        )
        with self.fresh(tmp_path) as index:
            self.apply(index, log, batch, embedder)
            assert [seq for seq, _ in index.history_of("a", "m9")] == [1, 3, 4]
            assert index.history_of("a", "c9") == []
            assert index.lookup("a", "m9") is None  # a stub files no record

    def test_a_rebuild_gives_the_same_history(self, tmp_path: Path, embedder: HashEmbedder) -> None:
        log = Records()
        with self.fresh(tmp_path, "live") as live, self.fresh(tmp_path, "rebuilt") as rebuilt:
            for batch in self._story(log):
                self.apply(live, log, batch, embedder)
            self.apply(rebuilt, log, log.entries, embedder)
            for ns, rid in (("a", "m1"), ("a", "m2"), ("b", "bm")):
                assert rebuilt.history_of(ns, rid) == live.history_of(ns, rid)
            assert rebuilt.fingerprint()["history"] == live.fingerprint()["history"]

    def test_history_survives_reopening(self, tmp_path: Path, embedder: HashEmbedder) -> None:
        log = Records()
        (tmp_path / "index").mkdir()
        path = tmp_path / "index" / "index.db"
        with self.opened(path) as index:
            for batch in self._story(log):
                self.apply(index, log, batch, embedder)
            before = index.history_of("a", "m2")
        with self.opened(path) as index:
            assert index.history_of("a", "m2") == before
