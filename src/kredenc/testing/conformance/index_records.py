"""The index conformance suite, part one: its hook and helpers, and records.

Puts, upserts (changed scores, a refiled document), tombstones, access counts,
edges, ``apply`` being atomic and the embedding cache. :class:`IndexConformance`
(``index.py``) adds the queries; backends subclass that.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kredenc.errors import StoreError
from kredenc.storage.base import Index
from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import Phrase
from kredenc.storage.index.vectors import F32
from kredenc.testing.conformance.index_data import (
    FILTERED,
    SCOPED,
    Records,
    edge,
    label,
    put,
    tombstone,
)
from kredenc.testing.embedders import HashEmbedder

__all__ = ["IndexRecordConformance"]


class IndexRecordConformance:
    """The hook, the helpers, and the tests of records and edges.

    Record ids are unique across namespaces (the engine makes them so); every query
    still takes the namespace and answers within it.
    """

    dim = 32

    # -- the hook a backend implements ---------------------------------------------
    def make_index(self, path: Path, dim: int) -> Index:
        """Open the index stored at ``path`` (create it when there is none)."""
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------
    @pytest.fixture
    def embedder(self) -> HashEmbedder:
        return HashEmbedder(dim=self.dim)

    @contextmanager
    def opened(self, path: Path) -> Iterator[Index]:
        index = self.make_index(path, self.dim)
        try:
            yield index
        finally:
            index.close()

    @contextmanager
    def fresh(self, tmp_path: Path, name: str = "index") -> Iterator[Index]:
        (tmp_path / name).mkdir()
        with self.opened(tmp_path / name / "index.db") as index:
            yield index

    @staticmethod
    def apply(
        index: Index,
        log: Records,
        entries: Sequence[tuple[int, dict[str, Any]]],
        embedder: HashEmbedder,
        vectors: dict[str, F32] | None = None,
    ) -> None:
        index.apply(entries, vectors, embedder.embed, log.end)

    @staticmethod
    def ids(index: Index, ns: str, ranked: Sequence[tuple[int, float]]) -> list[str]:
        places = index.resolve(ns, [r for r, _ in ranked])
        return [places[r][0] for r, _ in ranked]

    def lexical_ids(self, index: Index, ns: str, word: str, f: Filters, k: int = 50) -> list[str]:
        return self.ids(index, ns, index.lexical(ns, [Phrase(word)], k, f))

    def dense_ids(
        self, index: Index, ns: str, text: str, f: Filters, embedder: HashEmbedder, k: int = 50
    ) -> list[str]:
        query = embedder.embed([text])[0]
        return self.ids(index, ns, index.dense(ns, query, k, f))

    def answers(self, index: Index, ns: str, embedder: HashEmbedder) -> dict[str, Any]:
        """What queries return, by record id (rowids may differ between indexes)."""
        out: dict[str, Any] = {}
        for word in ("marker", "shared", "alpha", "common"):
            ranked = index.lexical(ns, [Phrase(word)], 20, Filters())
            out[f"lexical {word}"] = [
                (i, round(s, 6))
                for i, (_, s) in zip(self.ids(index, ns, ranked), ranked, strict=True)
            ]
            found = index.dense(ns, embedder.embed([f"{word} text"])[0], 20, Filters())
            out[f"dense {word}"] = [
                (i, round(s, 5))
                for i, (_, s) in zip(self.ids(index, ns, found), found, strict=True)
            ]
        every = [p["id"] for p in FILTERED] + [f"x{n}" for n in range(10)]
        rowids = index.rowids_for(ns, every, Filters(include_deprecated=True))
        info = index.node_info(ns, list(rowids.values()))
        out["node_info"] = sorted(
            (v["id"], v["type"], v["kind"], v["importance"], v["status"], v["access_count"])
            for v in info.values()
        )
        out["neighbours"] = sorted(index.neighbours(ns, every))
        out["scoped"] = {label(f): sorted(index.rowids_for(ns, every, f)) for f in SCOPED}
        out["stats"] = index.stats(ns)
        out["document"] = index.document(ns, "docs/a.md")
        return out

    # -- records: put, upsert, tombstone ---------------------------------------------
    def test_put_is_found_with_its_address_and_state(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            entries = log.add(
                put(
                    "a",
                    "m1",
                    "the first memory",
                    kind="preference",
                    ts=123.5,
                    scores={"importance": 0.9, "confidence": 0.25, "stability": 0.75},
                    source="user",
                    episode_id="e1",
                    read_only=True,
                ),
            )
            self.apply(index, log, entries, embedder)
            found = index.lookup("a", "m1")
            assert found is not None
            assert (found.id, found.offset, found.deleted) == ("m1", entries[0][0], False)
            state = found.state
            assert (state["kind"], state["drawer"], state["type"]) == (
                "preference",
                "main",
                "memory",
            )
            assert state["created_at"] == 123.5
            assert (state["importance"], state["confidence"], state["stability"]) == (
                0.9,
                0.25,
                0.75,
            )
            assert (state["status"], state["source"], state["episode_id"]) == (
                "unvalidated",
                "user",
                "e1",
            )
            assert state["read_only"] is True
            assert index.resolve("a", [found.rowid]) == {found.rowid: ("m1", entries[0][0])}
            assert index.lookup("a", "missing") is None
            assert index.applied() == (1, log.end)

    def test_scores_and_status_replace_the_current_state(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            self.apply(index, log, log.add(put("a", "m1", "changing memory")), embedder)
            self.apply(
                index,
                log,
                log.add(
                    {"op": "score", "ns": "a", "id": "m1", "importance": 0.1, "valid_to": 5000.0},
                    {"op": "score", "ns": "b", "id": "m1", "importance": 0.99},  # other ns: no-op
                    {
                        "op": "status",
                        "ns": "a",
                        "id": "m1",
                        "status": "validated",
                        "task_status": "done",
                    },
                ),
                embedder,
            )
            found = index.lookup("a", "m1")
            assert found is not None
            assert found.state["importance"] == 0.1
            assert found.state["valid_to"] == 5000.0
            assert (found.state["status"], found.state["task_status"]) == ("validated", "done")
            assert found.state["confidence"] == 0.5  # untouched fields keep their value
            self.apply(
                index,
                log,
                log.add({"op": "status", "ns": "a", "id": "m1", "status": "deprecated"}),
                embedder,
            )
            assert self.lexical_ids(index, "a", "changing", Filters()) == []
            assert self.dense_ids(index, "a", "changing memory", Filters(), embedder) == []
            kept = Filters(include_deprecated=True)
            assert self.lexical_ids(index, "a", "changing", kept) == ["m1"]
            assert self.dense_ids(index, "a", "changing memory", kept, embedder) == ["m1"]

    def test_a_refiled_document_replaces_the_old_version(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()

        def version(n: int, words: Sequence[str]) -> list[dict[str, Any]]:
            doc = f"doc{n}"
            out = [
                put(
                    "a",
                    doc,
                    "",
                    type="document",
                    drawer="docs",
                    kind="",
                    origin="a.md",
                    content_hash=f"h{n}",
                    version=n,
                )
            ]
            for i, word in enumerate(words):
                cid = f"{doc}-c{i}"
                out.append(
                    put(
                        "a",
                        cid,
                        f"{word} part",
                        type="chunk",
                        drawer="docs",
                        kind="",
                        origin="a.md",
                        doc_id=doc,
                    )
                )
                out.append(edge("a", cid, doc, "part_of"))
            return out

        with self.fresh(tmp_path) as index:
            self.apply(index, log, log.add(*version(1, ["old", "shared", "gone"])), embedder)
            assert index.document("a", "a.md") == ("doc1", "h1", 1)
            assert index.parts_of("a", "doc1") == ["doc1-c0", "doc1-c1", "doc1-c2"]
            old = [tombstone("a", c) for c in index.parts_of("a", "doc1")]
            old.append(tombstone("a", "doc1"))
            self.apply(index, log, log.add(*old, *version(2, ["new", "shared"])), embedder)
            assert index.document("a", "a.md") == ("doc2", "h2", 2)
            assert index.parts_of("a", "doc2") == ["doc2-c0", "doc2-c1"]
            assert index.parts_of("a", "doc1") == []
            assert self.lexical_ids(index, "a", "shared", Filters()) == ["doc2-c1"]
            assert self.lexical_ids(index, "a", "old", Filters()) == []
            assert set(self.dense_ids(index, "a", "shared part", Filters(), embedder)) == {
                "doc2-c0",
                "doc2-c1",
            }
            assert index.sources_of("a", "doc2", "part_of") == ["doc2-c0", "doc2-c1"]
            assert index.sources_of("a", "doc1", "part_of") == []
            rowids = index.rowids_for("a", ["doc2-c0", "doc2-c1", "doc1-c0"], Filters())
            assert set(rowids) == {"doc2-c0", "doc2-c1"}
            assert index.doc_ids("a", list(rowids.values())) == {
                rowids["doc2-c0"]: "doc2",
                rowids["doc2-c1"]: "doc2",
            }

    def test_tombstone_hides_the_record_from_every_query(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            self.apply(
                index,
                log,
                log.add(
                    put("a", "m1", "doomed words here"),
                    put("a", "m2", "kept words here"),
                    edge("a", "m1", "m2", "relates_to"),
                    edge("a", "m2", "m1", "derived_from"),
                ),
                embedder,
            )
            gone = index.lookup("a", "m1")
            assert gone is not None
            assert index.stats("a")["records"] == 2
            self.apply(index, log, log.add(tombstone("a", "m1")), embedder)
            found = index.lookup("a", "m1")
            assert found is not None and found.deleted
            assert self.lexical_ids(index, "a", "words", Filters(include_deprecated=True)) == ["m2"]
            assert self.dense_ids(index, "a", "doomed words here", Filters(), embedder) == ["m2"]
            assert index.resolve("a", [gone.rowid]) == {}
            assert index.node_info("a", [gone.rowid]) == {}
            assert index.vectors_of([gone.rowid]) == {}
            assert index.rowids_for("a", ["m1", "m2"], Filters()).keys() == {"m2"}
            assert index.neighbours("a", ["m1", "m2"]) == []
            assert index.edges_among("a", ["m1", "m2"]) == []
            assert index.stats("a")["records"] == 1
            assert index.stats("a")["edges"] == 0
            # A tombstone for a record that is not there changes nothing.
            self.apply(index, log, log.add(tombstone("a", "never"), tombstone("b", "m2")), embedder)
            assert self.lexical_ids(index, "a", "kept", Filters()) == ["m2"]

    def test_session_turns_newest_first_within_session_and_namespace(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        def turn(ns: str, rid: str, session: str, text: str) -> dict[str, Any]:
            meta = {"session": session, "role": "user"}
            return put(ns, rid, text, type="turn", drawer="turns", kind="", meta=meta)

        log = Records()
        with self.fresh(tmp_path) as index:
            self.apply(
                index,
                log,
                log.add(
                    turn("a", "t1", "s1", "first question"),
                    turn("a", "t2", "s2", "another session"),
                    turn("b", "t3", "s1", "same session id, other namespace"),
                    put("a", "m1", "a memory is no turn", meta={"session": "s1"}),
                    turn("a", "t4", "s1", "second question"),
                ),
                embedder,
            )
            self.apply(index, log, log.add(turn("a", "t5", "s1", "third question")), embedder)
            turns = index.session_turns("a", "s1", 10)
            assert [rid for rid, _ in turns] == ["t5", "t4", "t1"]
            # Each address is the one the record was applied at.
            places = dict(e for e in ((p["id"], off) for off, p in log.entries))
            assert all(offset == places[rid] for rid, offset in turns)
            assert [rid for rid, _ in index.session_turns("a", "s1", 2)] == ["t5", "t4"]
            assert index.session_turns("a", "s1", 0) == []
            assert [rid for rid, _ in index.session_turns("a", "s2", 10)] == ["t2"]
            assert [rid for rid, _ in index.session_turns("b", "s1", 10)] == ["t3"]
            assert index.session_turns("c", "s1", 10) == []
            assert index.session_turns("a", "nobody", 10) == []
            self.apply(index, log, log.add(tombstone("a", "t4")), embedder)
            assert [rid for rid, _ in index.session_turns("a", "s1", 10)] == ["t5", "t1"]

    def test_access_counts_add_up(self, tmp_path: Path, embedder: HashEmbedder) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            self.apply(
                index, log, log.add(put("a", "m1", "seen"), put("a", "m2", "unseen")), embedder
            )
            for n, at in ((2, 50.0), (3, 40.0)):
                self.apply(
                    index,
                    log,
                    log.add({"op": "access", "ns": "a", "counts": {"m1": n}, "ts": at}),
                    embedder,
                )
            rowids = index.rowids_for("a", ["m1", "m2"], Filters())
            info = index.node_info("a", [rowids["m1"], rowids["m2"]])
            assert (info[rowids["m1"]]["access_count"], info[rowids["m1"]]["last_accessed_at"]) == (
                5,
                50.0,
            )
            assert (info[rowids["m2"]]["access_count"], info[rowids["m2"]]["last_accessed_at"]) == (
                0,
                None,
            )

    # -- edges --------------------------------------------------------------------------
    def test_edges_and_neighbours(self, tmp_path: Path, embedder: HashEmbedder) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            self.apply(
                index,
                log,
                log.add(
                    *(put("a", r, f"node {r}") for r in ("n1", "n2", "n3", "n4")),
                    edge("a", "n1", "n2", "next", 0.5),
                    edge("a", "n2", "n3", "next"),
                    edge("a", "n4", "n2", "derived_from", 0.25),
                    edge("a", "n1", "n3", "mentions", 0.75),
                ),
                embedder,
            )
            assert sorted(index.neighbours("a", ["n2"])) == [
                ("n2", "n1", "next", 0.5),
                ("n2", "n3", "next", 1.0),
                ("n2", "n4", "derived_from", 0.25),
            ]
            assert index.neighbours("a", []) == []
            assert index.edges_among("a", ["n1", "n2", "n3"]) == [
                ("n1", "n2", "next", 0.5),
                ("n2", "n3", "next", 1.0),
                ("n1", "n3", "mentions", 0.75),
            ]
            assert index.sources_of("a", "n2", "derived_from") == ["n4"]
            assert index.sources_of("a", "n2", "next") == ["n1"]
            # The same edge again replaces its weight; unedge removes one relation only.
            self.apply(
                index,
                log,
                log.add(
                    edge("a", "n1", "n2", "next", 0.9),
                    {"op": "unedge", "ns": "a", "src": "n2", "dst": "n3", "rel": "next"},
                    {"op": "unedge", "ns": "a", "src": "n1", "dst": "n3", "rel": "other"},
                ),
                embedder,
            )
            assert sorted(index.neighbours("a", ["n2"])) == [
                ("n2", "n1", "next", 0.9),
                ("n2", "n4", "derived_from", 0.25),
            ]
            assert ("n1", "n3", "mentions", 0.75) in index.edges_among("a", ["n1", "n3"])
            assert index.stats("a")["edges"] == 3
            # A source that is gone is no source.
            self.apply(index, log, log.add(tombstone("a", "n4")), embedder)
            assert index.sources_of("a", "n2", "derived_from") == []

    # -- applying -----------------------------------------------------------------------
    def test_apply_is_atomic_and_records_the_position(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            assert index.applied() == (0, 0)
            self.apply(index, log, log.add(put("a", "m1", "first")), embedder)
            assert index.applied() == (1, log.end)
            before = index.fingerprint()
            bad = log.add(
                put("a", "m2", "second"),
                edge("a", "m1", "m2", "next"),
                put("a", "m3", "third"),
            )
            wrong = np.ones(self.dim + 1, dtype=np.float32)
            with pytest.raises(StoreError):
                index.apply(bad, {"m3": wrong}, embedder.embed, log.end)
            assert index.applied() == (1, 120)
            assert index.fingerprint() == before
            assert index.lookup("a", "m2") is None
            assert self.lexical_ids(index, "a", "second", Filters()) == []
            # Good records apply afterwards, and ``applied_through`` (records of the
            # log's own after the last payload, e.g. a commit) moves the position on.
            good = log.add(put("a", "m4", "fourth"), edge("a", "m1", "m4", "next"))
            index.apply(good, None, embedder.embed, log.end + 10, applied_through=7)
            assert index.applied() == (7, log.end + 10)
            assert self.lexical_ids(index, "a", "fourth", Filters()) == ["m4"]
            assert index.edges_among("a", ["m1", "m4"]) == [("m1", "m4", "next", 1.0)]
            index.apply([], None, embedder.embed, 999)
            assert index.applied() == (7, log.end + 10)

    def test_vectors_come_given_cached_or_embedded(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        given = embedder.embed(["something else entirely"])[0]
        with self.fresh(tmp_path) as index:
            calls = embedder.calls
            self.apply(index, log, log.add(put("a", "g", "given text")), embedder, {"g": given})
            assert embedder.calls == calls  # given vectors are not embedded again
            hits = index.dense("a", given, 1, Filters())
            assert self.ids(index, "a", hits) == ["g"]
            assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
            # Embedding needs no embedder for a cached text; an uncached one needs it.
            index.apply(log.add(put("a", "g2", "given text")), None, None, log.end)
            assert index.lookup("a", "g2") is not None
            with pytest.raises(StoreError):
                index.apply(log.add(put("a", "u", "never cached")), None, None, log.end)
            assert index.lookup("a", "u") is None
            assert index.cached_vectors([]) == {}
            index.cache_vectors({b"k" * 32: given})
            index.cache_vectors({b"k" * 32: embedder.embed(["other"])[0]})  # kept: the first
            cached = index.cached_vectors([b"k" * 32, b"z" * 32])
            assert list(cached) == [b"k" * 32]
            assert np.array_equal(cached[b"k" * 32], given)

    def test_reopening_keeps_everything(self, tmp_path: Path, embedder: HashEmbedder) -> None:
        log = Records()
        (tmp_path / "index").mkdir()
        path = tmp_path / "index" / "index.db"
        with self.opened(path) as index:
            self.apply(index, log, log.add(*FILTERED, edge("a", "m1", "c4", "mentions")), embedder)
            answers = self.answers(index, "a", embedder)
            fingerprint = index.fingerprint()
            applied = index.applied()
        with self.opened(path) as index:
            assert index.applied() == applied
            assert index.fingerprint() == fingerprint
            assert self.answers(index, "a", embedder) == answers
            index.shards()  # loading the dense leg up front changes no answer
            assert self.answers(index, "a", embedder) == answers
            assert index.compact() >= 0.0
            assert isinstance(index.compaction_due(), bool)
            assert self.answers(index, "a", embedder) == answers
            index.save_ann()
