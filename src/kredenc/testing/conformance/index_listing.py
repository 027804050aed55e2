"""The index conformance suite, part two: the reads behind listing and export.

``list_records`` (every :class:`RecordQuery` field, paging, filing order, tombstones,
namespaces), ``sessions``, ``namespaces``, ``edges_of`` and ``taken_ids``.
:class:`IndexConformance` (``index.py``) inherits these.
"""

from __future__ import annotations

from pathlib import Path

from kredenc.storage.base import Index
from kredenc.storage.index.reads import RecordQuery
from kredenc.testing.conformance.index_data import Records, edge, put, tombstone
from kredenc.testing.conformance.index_records import IndexRecordConformance
from kredenc.testing.embedders import HashEmbedder

__all__ = ["IndexListingConformance"]


def _turn(ns: str, rid: str, session: str, ts: float) -> dict[str, object]:
    return put(ns, rid, f"turn {rid}", type="turn", kind="", ts=ts, meta={"session": session})


class IndexListingConformance(IndexRecordConformance):
    """Listing and export reads; implement ``make_index`` as for the records part."""

    def _filled(self, index: Index, embedder: HashEmbedder) -> Records:
        log = Records()
        payloads = [
            put("a", "m1", "first fact", kind="fact", ts=100.0, user_id="u1", tags=["x", "y"]),
            put(
                "a",
                "m2",
                "a task",
                kind="task",
                ts=200.0,
                status="validated",
                drawer="work",
                user_id="u2",
                agent_id="ag",
                run_id="r1",
                tags=["x"],
            ),
            put(
                "a",
                "d1",
                "",
                type="document",
                kind="",
                ts=250.0,
                origin="docs/a.pdf",
                loader="pdf",
                content_hash="h1",
            ),
            put(
                "a",
                "c1",
                "chunk text",
                type="chunk",
                kind="",
                ts=250.0,
                origin="docs/a.pdf",
                loader="pdf",
                doc_id="d1",
                page=2,
            ),
            put("a", "m3", "second fact", kind="fact", ts=300.0, user_id="u1", run_id="r1"),
            put("a", "m4", "forgotten fact", kind="fact", ts=400.0, user_id="u1", tags=["x"]),
            _turn("a", "t1", "s1", 500.0),
            _turn("a", "t2", "s2", 600.0),
            _turn("a", "t3", "s1", 700.0),
            put("b", "m9", "other namespace", kind="fact", ts=150.0, user_id="u1", tags=["x"]),
            edge("a", "m3", "m1", "related_to", 0.5),
            edge("a", "m1", "m4", "derived_from"),
            edge("a", "c1", "d1", "part_of"),
            tombstone("a", "m4"),
        ]
        self.apply(index, log, log.add(*payloads), embedder)
        return log

    def test_list_records_filters_pages_and_order(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        with self.fresh(tmp_path) as index:
            log = self._filled(index, embedder)
            addr = {p["id"]: off for off, p in log.entries if p.get("op") == "put"}

            def ids(query: RecordQuery, limit: int | None = None, offset: int = 0) -> list[str]:
                return [i for i, _ in index.list_records("a", query, limit, offset)]

            everything = index.list_records("a", RecordQuery())
            assert [i for i, _ in everything] == [
                "m1", "m2", "d1", "c1", "m3", "t1", "t2", "t3"
            ]  # fmt: skip
            assert all(off == addr[i] for i, off in everything)  # addresses given back
            memories = RecordQuery(types=("memory",))
            assert ids(memories) == ["m1", "m2", "m3"]  # m4 is forgotten
            assert ids(memories, limit=2) == ["m1", "m2"]
            assert ids(memories, limit=2, offset=2) == ["m3"]
            assert ids(memories, offset=5) == []
            assert ids(RecordQuery(types=("memory",), kinds=("task",))) == ["m2"]
            assert ids(RecordQuery(statuses=("validated",))) == ["m2"]
            assert ids(RecordQuery(types=("memory",), drawer="work")) == ["m2"]
            assert ids(RecordQuery(types=("memory",), since=200.0, until=300.0)) == ["m2"]
            assert ids(RecordQuery(types=("document",), loaders=("pdf",))) == ["d1"]
            assert ids(RecordQuery(types=("document",), loaders=("markdown",))) == []
            assert ids(RecordQuery(origin_glob="docs/*.pdf")) == ["d1", "c1"]
            assert ids(RecordQuery(origin_glob="*.md")) == []
            assert ids(RecordQuery(session="s1")) == ["t1", "t3"]
            # The scope ids and tags, inside the namespace (m9 of "b" has them too).
            assert ids(RecordQuery(user_id="u1")) == ["m1", "m3"]  # m4 is forgotten
            assert ids(RecordQuery(user_id="u1"), limit=1, offset=1) == ["m3"]
            assert ids(RecordQuery(agent_id="ag")) == ["m2"]
            assert ids(RecordQuery(run_id="r1")) == ["m2", "m3"]
            assert ids(RecordQuery(user_id="u1", run_id="r1")) == ["m3"]
            assert ids(RecordQuery(user_id="nobody")) == []
            assert ids(RecordQuery(tags=("x",))) == ["m1", "m2"]
            assert ids(RecordQuery(tags=("x", "y"))) == ["m1"]
            assert ids(RecordQuery(tags=("x",), user_id="u2")) == ["m2"]
            assert [i for i, _ in index.list_records("b", RecordQuery())] == ["m9"]
            assert index.list_records("nowhere", RecordQuery()) == []

    def test_sessions_namespaces_edges_and_taken_ids(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        with self.fresh(tmp_path) as index:
            log = self._filled(index, embedder)
            assert index.sessions("a") == [("s1", 2, 500.0, 700.0), ("s2", 1, 600.0, 600.0)]
            assert index.sessions("a", limit=1, offset=1) == [("s2", 1, 600.0, 600.0)]
            assert index.sessions("b") == []
            assert index.namespaces() == ["a", "b"]
            # The edge to the forgotten m4 went with it; the rest in writing order.
            assert index.edges_of("a") == [
                ("m3", "m1", "related_to", 0.5),
                ("c1", "d1", "part_of", 1.0),
            ]
            assert index.edges_of("b") == []
            assert index.taken_ids(["m1", "m4", "m9", "zz"]) == {"m1", "m4", "m9"}
            assert index.taken_ids([]) == set()
            self.apply(index, log, log.add(tombstone("b", "m9")), embedder)
            assert index.namespaces() == ["a"]
