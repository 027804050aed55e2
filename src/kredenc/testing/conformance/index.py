"""What every :class:`~kredenc.storage.base.Index` backend must do: the conformance suite.

Subclass :class:`IndexConformance` in a test module as ``TestMyIndex`` and implement
``make_index(path, dim)``: open (or create) the index stored at ``path`` for vectors
of ``dim`` dimensions. The suite feeds it log records the way the store's
housekeeper does (``apply`` with (address, payload) pairs, addresses made up here)
and embeds with the deterministic :class:`~kredenc.testing.embedders.HashEmbedder`.

It covers upserts (a refiled document, changed scores), tombstones, namespace
isolation in every query, every :class:`~kredenc.storage.index.filters.Filters`
field on both legs, the legs' order and score ranges, edges and neighbours, apply
being atomic, the embedding cache, a memory's history (``index_history.py``),
reopening, rebuild equivalence (the same records
applied to a fresh index give the same answers) and readers running while records
are applied.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kredenc.storage.index.filters import Filters
from kredenc.storage.index.lexical import Phrase
from kredenc.testing.conformance.index_data import (
    FILTERED,
    FILTERS,
    Records,
    edge,
    label,
    passes,
    put,
    tombstone,
)
from kredenc.testing.conformance.index_history import IndexHistoryConformance
from kredenc.testing.conformance.index_listing import IndexListingConformance
from kredenc.testing.embedders import HashEmbedder

__all__ = ["IndexConformance"]


class IndexConformance(IndexListingConformance, IndexHistoryConformance):
    """Upsert, tombstone, isolation, filters, legs, edges, history, rebuild, concurrency.

    Implement ``make_index(path, dim)`` (see :class:`IndexRecordConformance`).
    """

    # -- namespaces --------------------------------------------------------------------
    def test_no_query_crosses_namespaces(self, tmp_path: Path, embedder: HashEmbedder) -> None:
        log = Records()
        same = "shared words in both namespaces"
        with self.fresh(tmp_path) as index:
            payloads: list[dict[str, Any]] = []
            for ns in ("a", "b"):
                payloads += [
                    put(ns, f"{ns}-m", same),
                    put(
                        ns,
                        f"{ns}-doc",
                        "",
                        type="document",
                        kind="",
                        origin="same.md",
                        content_hash=f"h-{ns}",
                    ),
                    put(
                        ns,
                        f"{ns}-c",
                        same,
                        type="chunk",
                        kind="",
                        origin="same.md",
                        doc_id=f"{ns}-doc",
                        loader="markdown",
                        page=1,
                    ),
                    edge(ns, f"{ns}-c", f"{ns}-doc", "part_of"),
                    edge(ns, f"{ns}-m", f"{ns}-c", "derived_from"),
                ]
            self.apply(index, log, log.add(*payloads), embedder)
            a_rows = index.rowids_for("a", ["a-m", "a-c"], Filters())
            b_rows = index.rowids_for("b", ["b-m", "b-c"], Filters())
            assert len(a_rows) == len(b_rows) == 2
            for ns, mine, theirs in (("a", a_rows, b_rows), ("b", b_rows, a_rows)):
                other = "b" if ns == "a" else "a"
                everything = Filters(include_deprecated=True)
                assert set(self.lexical_ids(index, ns, "shared", everything)) == set(mine)
                assert set(self.dense_ids(index, ns, same, everything, embedder)) == set(mine)
                assert index.lookup(ns, f"{other}-m") is None
                assert index.resolve(ns, list(theirs.values())) == {}
                assert index.node_info(ns, list(theirs.values())) == {}
                assert index.doc_ids(ns, list(theirs.values())) == {}
                assert index.rowids_for(ns, list(theirs), everything) == {}
                assert index.document(ns, "same.md") == (f"{ns}-doc", f"h-{ns}", 1)
                assert index.parts_of(ns, f"{other}-doc") == []
                assert index.neighbours(ns, [f"{other}-m", f"{other}-c"]) == []
                assert index.edges_among(ns, [f"{other}-m", f"{other}-c", f"{other}-doc"]) == []
                assert index.sources_of(ns, f"{other}-doc", "part_of") == []
                assert index.sources_of(ns, f"{ns}-doc", "part_of") == [f"{ns}-c"]
                stats = index.stats(ns)
                assert (stats["records"], stats["edges"]) == (3, 2)
            assert index.lexical("c", [Phrase("shared")], 10, Filters()) == []
            assert index.dense("c", embedder.embed([same])[0], 10, Filters()) == []
            assert index.stats("c")["records"] == 0

    # -- filters -----------------------------------------------------------------------
    @pytest.mark.parametrize("f", FILTERS, ids=label)
    def test_every_filter_on_both_legs(
        self, tmp_path: Path, embedder: HashEmbedder, f: Filters
    ) -> None:
        log = Records()
        copies = [{**p, "ns": "b", "id": "b" + p["id"]} for p in FILTERED]
        with self.fresh(tmp_path) as index:
            self.apply(index, log, log.add(*FILTERED, *copies), embedder)
            want = {p["id"] for p in FILTERED if passes(p, f)}
            assert set(self.lexical_ids(index, "a", "marker", f)) == want
            assert set(self.dense_ids(index, "a", "marker", f, embedder)) == want
            every = [p["id"] for p in FILTERED]
            assert set(index.rowids_for("a", every, f)) == want

    def test_the_filter_reference_tells_the_records_apart(self) -> None:
        """Every field of ``Filters`` is exercised, and each one excludes something."""
        changed = {
            field.name
            for f in FILTERS
            for field in fields(f)
            if getattr(f, field.name) != getattr(Filters(), field.name)
        }
        assert changed == {field.name for field in fields(Filters)}
        unfiltered = {p["id"] for p in FILTERED if passes(p, Filters())}
        assert unfiltered == {"m1", "m2", "c4", "c5", "c6", "t7", "m8"}
        for f in FILTERS[1:]:
            assert {p["id"] for p in FILTERED if passes(p, f)} != unfiltered, f

    # -- the legs -----------------------------------------------------------------------
    def test_lexical_ranks_by_relevance_best_first(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        texts = {
            "r3": "apple apple apple pear",
            "r2": "apple apple pear plum",
            "r1": "apple pear plum fig",
            "r0": "pear plum fig kiwi",
        }
        with self.fresh(tmp_path) as index:
            self.apply(index, log, log.add(*(put("a", r, t) for r, t in texts.items())), embedder)
            ranked = index.lexical("a", [Phrase("apple")], 10, Filters())
            assert self.ids(index, "a", ranked) == ["r3", "r2", "r1"]
            scores = [s for _, s in ranked]
            assert all(s > 0 for s in scores)
            assert scores == sorted(scores, reverse=True)
            assert scores[0] > scores[-1]
            assert index.lexical("a", [Phrase("apple")], 2, Filters()) == ranked[:2]
            assert index.lexical("a", [Phrase("apple")], 0, Filters()) == []
            # Any of the phrases; a prefix phrase matches the words that start with it.
            either = index.lexical("a", [Phrase("kiwi"), Phrase("apple")], 10, Filters())
            assert set(self.ids(index, "a", either)) == {"r0", "r1", "r2", "r3"}
            prefix = index.lexical("a", [Phrase("app", prefix=True)], 10, Filters())
            assert set(self.ids(index, "a", prefix)) == {"r1", "r2", "r3"}
            assert index.lexical("a", [Phrase("app")], 10, Filters()) == []

    def test_corrections_offer_the_held_word_one_typo_away(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        records = [
            put("a", "m1", "Sydney is renowned for its harbour research"),
            put("a", "m2", "The research budget of the business school"),
            put("a", "m3", "A research station in Antarctica"),
            put("a", "m4", "The harbor of Boston", kind="event"),
            put("b", "m5", "Melbourne is renowned for coffee"),
            put("a", "m6", "Hobart has a festival in the city"),
            put("a", "m7", "Stars at night"),
            put("a", "m8", "Two stars"),
            put("a", "m9", "Do not stare"),
        ]
        with self.fresh(tmp_path) as index:
            self.apply(index, log, log.add(*records), embedder)
            words = ["sydeney", "reknowned", "reserach", "buisiness", "melborne", "sydney"]
            assert index.corrections("a", words, Filters()) == {
                "sydeney": "sydney",  # a letter too many
                "reknowned": "renowned",  # a letter too many, suffix stemmed
                "reserach": "research",  # two letters swapped
                "buisiness": "business",
                # "melborne": only namespace b holds "melbourne"; "sydney" is held.
            }
            # The most held term wins ("star": two cards, "stare": one), spelt as the
            # first edit that makes it ("star", a letter dropped, before "stars"); a
            # tie goes to the first edit (a letter added before a letter changed).
            assert index.corrections("a", ["starx"], Filters()) == {"starx": "star"}
            assert index.corrections("a", ["harbur"], Filters()) == {"harbur": "harbour"}
            # Filters bind the correction too: no event card holds "sydney".
            assert index.corrections("a", ["sydeney"], Filters(kinds=("event",))) == {}
            assert index.corrections("b", ["melborne", "sydeney"], Filters()) == {
                "melborne": "melbourne"
            }
            # A 4-letter word gets back a dropped letter only ("ctiy" is not swapped to
            # "city"); words with digits and words no neighbour is held for: left.
            words = ["ctiy", "nght", "festivl", "x1000a", "zzzzzz", "cty"]
            assert index.corrections("a", words, Filters()) == {
                "nght": "night",
                "festivl": "festival",
            }
            assert index.corrections("a", [], Filters()) == {}
            # Words of records applied since are offered at once.
            self.apply(index, log, log.add(put("a", "m10", "Perth has beaches")), embedder)
            assert index.corrections("a", ["beachse"], Filters()) == {"beachse": "beaches"}
            # Cards applied since count too: "stare" now outnumbers "star".
            more = [put("a", f"m{i}", "They stare at the sea") for i in (11, 12)]
            self.apply(index, log, log.add(*more), embedder)
            assert index.corrections("a", ["starx"], Filters()) == {"starx": "stare"}
            # A forgotten record's words are no correction.
            self.apply(index, log, log.add(tombstone("b", "m5")), embedder)
            assert index.corrections("b", ["melborne"], Filters()) == {}
            # Forgotten cards are counted out: with the two "stare" cards gone, "star"
            # leads again; a card put and forgotten in one apply never counts.
            gone = [tombstone("a", "m11"), tombstone("a", "m12")]
            gone += [put("a", "m13", "Stare, stare"), tombstone("a", "m13")]
            self.apply(index, log, log.add(*gone), embedder)
            assert index.corrections("a", ["starx"], Filters()) == {"starx": "star"}

    def test_dense_ranks_by_cosine_best_first_ties_by_rowid(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        texts = [
            ("t1", "river boat water"),
            ("t2", "river boat"),
            ("t3", "mountain snow"),
            ("t4", "river boat water"),  # the same text as t1: the same vector
            ("t5", "water"),
            ("t6", "desert sand"),
        ]
        with self.fresh(tmp_path) as index:
            self.apply(index, log, log.add(*(put("a", r, t) for r, t in texts)), embedder)
            query = embedder.embed(["river boat water"])[0]
            ranked = index.dense("a", query, 10, Filters())
            assert len(ranked) == len(texts)
            scores = [s for _, s in ranked]
            assert scores == sorted(scores, reverse=True)
            assert all(-1.0 - 1e-5 <= s <= 1.0 + 1e-5 for s in scores)
            ids = self.ids(index, "a", ranked)
            assert ids[:2] == ["t1", "t4"]  # exact ties, the lower rowid first
            assert ranked[0][0] < ranked[1][0]
            assert scores[0] == pytest.approx(1.0, abs=1e-4)
            assert scores[0] == scores[1]
            for k in (1, 2, 3, 5):
                assert index.dense("a", query, k, Filters()) == ranked[:k]
            vectors = index.vectors_of([r for r, _ in ranked])
            for rowid, score in ranked:
                assert float(np.dot(vectors[rowid], query)) == pytest.approx(score, abs=1e-4)

    def test_vectors_ready_says_when_dense_needs_no_load_and_starts_it(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        """A reopened index answers ``vectors_ready`` at once (False while a load it
        started runs, never raising), is ready within a short wait and stays so, and
        its dense leg answers as before."""
        log = Records()
        (tmp_path / "index").mkdir()
        path = tmp_path / "index" / "index.db"
        query = embedder.embed(["river boat water"])[0]
        with self.opened(path) as index:
            self.apply(index, log, log.add(*FILTERED), embedder)
            before = index.dense("a", query, 5, Filters())
        with self.opened(path) as index:
            assert isinstance(index.vectors_ready(), bool)
            assert index.vectors_ready(10.0)
            assert index.vectors_ready()  # and stays so
            assert index.dense("a", query, 5, Filters()) == before

    # -- rebuild -------------------------------------------------------------------------
    def test_a_rebuild_answers_like_the_index_it_replaces(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        batches = [
            log.add(*FILTERED[:4]),
            log.add(put("a", "x0", "shared common text", drawer="work")),
            log.add(*FILTERED[4:], edge("a", "m1", "c4", "mentions")),
            log.add(*(put("a", f"x{n}", f"common words {n} shared") for n in range(1, 8))),
            log.add(tombstone("a", "x3"), tombstone("a", "m2"), edge("a", "x1", "x2", "next")),
            log.add({"op": "score", "ns": "a", "id": "x4", "importance": 0.9}),
            log.add({"op": "access", "ns": "a", "counts": {"x5": 2}, "ts": 10.0}),
            log.add({"op": "unedge", "ns": "a", "src": "m1", "dst": "c4", "rel": "mentions"}),
            log.add(put("b", "bx1", "common words in b"), edge("b", "bx1", "bx1", "self")),
        ]
        with self.fresh(tmp_path, "live") as live, self.fresh(tmp_path, "rebuilt") as rebuilt:
            for batch in batches:
                self.apply(live, log, batch, embedder)
            self.apply(rebuilt, log, log.entries, embedder)
            assert rebuilt.applied() == live.applied()
            assert rebuilt.fingerprint() == live.fingerprint()
            for ns in ("a", "b"):
                assert self.answers(rebuilt, ns, embedder) == self.answers(live, ns, embedder)

    # -- concurrency ---------------------------------------------------------------------
    def test_readers_run_while_records_are_applied(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        query = embedder.embed(["common reader words"])[0]
        done = threading.Event()
        with self.fresh(tmp_path) as index:
            self.apply(index, log, log.add(put("a", "seed", "common seed")), embedder)

            def read() -> tuple[list[int], list[int]]:
                lexical_counts: list[int] = []
                dense_counts: list[int] = []
                while True:
                    stop = done.is_set()
                    lexical = index.lexical("a", [Phrase("common")], 1000, Filters())
                    dense = index.dense("a", query, 1000, Filters())
                    rowids = {r for r, _ in lexical + dense}
                    assert len(index.resolve("a", list(rowids))) == len(rowids)
                    lexical_counts.append(len(lexical))
                    dense_counts.append(len(dense))
                    if stop:
                        return lexical_counts, dense_counts

            with ThreadPoolExecutor(3) as pool:
                readers = [pool.submit(read) for _ in range(3)]
                for n in range(20):
                    batch = [
                        put("a", f"r{n}-{i}", f"common reader words {n} {i}") for i in range(5)
                    ]
                    self.apply(index, log, log.add(*batch), embedder)
                done.set()
                seen = [counts for reader in readers for counts in reader.result(timeout=60)]
            for counts in seen:
                # Whole batches only, never fewer than before, all of them at the end.
                assert all((c - 1) % 5 == 0 for c in counts), counts
                assert counts == sorted(counts)
                assert counts[-1] == 101

    # -- generations (what the operation cache's search keys carry) --------------------
    def test_generation_changes_with_what_a_search_can_see(
        self, tmp_path: Path, embedder: HashEmbedder
    ) -> None:
        log = Records()
        with self.fresh(tmp_path) as index:
            assert index.generation("a") == 0
            self.apply(
                index, log, log.add(put("a", "m1", "alpha"), put("a", "m2", "beta")), embedder
            )
            seen = {index.generation("a"), index.generation("a", ["memory"])}
            assert 0 not in seen
            turn = put("a", "t1", "a turn", type="turn", kind="")
            chunk_gen = index.generation("a", ["chunk"])
            memory_gen = index.generation("a", ["memory"])
            self.apply(index, log, log.add(turn), embedder)
            assert index.generation("a", ["memory"]) == memory_gen  # another type
            assert index.generation("a", ["chunk"]) == chunk_gen
            assert index.generation("a") != memory_gen
            self.apply(index, log, log.add(put("b", "m3", "alpha")), embedder)
            assert index.generation("a", ["memory"]) == memory_gen  # another namespace
            access = {"op": "access", "ns": "a", "counts": {"m1": 3}, "ts": 1.0}
            self.apply(index, log, log.add(access), embedder)
            assert index.generation("a", ["memory"]) == memory_gen  # counts rank nothing
            with_edges = index.generation("a", ["memory"], edges=True)
            self.apply(index, log, log.add(edge("a", "m1", "m2", "related_to")), embedder)
            assert index.generation("a", ["memory"]) == memory_gen
            assert index.generation("a", ["memory"], edges=True) != with_edges
            steps = []
            for record in (
                {"op": "score", "ns": "a", "id": "m1", "importance": 0.9},
                {"op": "status", "ns": "a", "id": "m1", "status": "deprecated"},
                tombstone("a", "m2"),
            ):
                before = index.generation("a", ["memory"])
                self.apply(index, log, log.add(record), embedder)
                steps.append(index.generation("a", ["memory"]) != before)
            assert steps == [True, True, True]
