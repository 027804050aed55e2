"""The index is derived: dropping and rebuilding it at any point changes no answer.

A Hypothesis state machine files, forgets and relates records, and at random steps
rebuilds the index (``Kredenc.rebuild``) or deletes it on disk and reopens the store
(the catch-up path). Search results (ids and order, lexical, dense and hybrid) must be
the same before and after; a model checks that forgotten ids never come back and that
every remembered id is retrievable with ``get``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    precondition,
    rule,
)

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, NotFound
from kredenc.memory.relations import RELATIONS, SYMMETRIC
from kredenc.storage import layout
from kredenc.testing.embedders import HashEmbedder

# A small vocabulary makes words (and whole texts) repeat, so BM25 and cosine ties
# are common: ties are where a rebuilt index most easily answers in another order.
VOCAB = ("alpha", "budget", "cat", "delta", "kestrel", "river", "mat", "near", "zebra", "café")
DRAWERS = ("memories", "notes", "work")
QUERIES = ("budget", "cat mat", "kestrel river alpha", "zebra café", "near delta budget")
MODES = ("lexical", "dense", "hybrid")

texts = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join)
drawers = st.sampled_from(DRAWERS)

Snapshot = dict[tuple[str, str, str | None], list[str]]


def open_store(home: Path) -> Kredenc:
    return Kredenc.open(home, embedder=HashEmbedder(dim=64), durability="none")


class RebuildMachine(RuleBasedStateMachine):
    records = Bundle("records")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kredenc-rebuild-"))
        self.home = self.tmp / "store"
        self.kb = open_store(self.home)
        self.live: dict[str, str] = {}  # id -> text
        self.drawer: dict[str, str] = {}
        self.gone: set[str] = set()
        self.edges: set[tuple[str, str, str]] = set()
        self.rebuilds = 0

    def teardown(self) -> None:
        self.kb.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- what the index answers ------------------------------------------------
    def snapshot(self) -> Snapshot:
        out: Snapshot = {}
        for query in QUERIES:
            for mode in MODES:
                for drawer in (None, "notes"):
                    hits = self.kb.search(query, k=20, mode=mode, drawer=drawer)
                    out[(query, mode, drawer)] = [h.id for h in hits]
        return out

    def assert_same_answers(self, before: Snapshot, fingerprint: dict[str, Any]) -> None:
        after = self.snapshot()
        for key, ids in before.items():
            assert after[key] == ids, f"search {key} changed across a rebuild"
        assert self.kb.index.fingerprint() == fingerprint

    # -- rules ---------------------------------------------------------------
    @rule(target=records, text=texts, drawer=drawers)
    def remember(self, text: str, drawer: str) -> str:
        mem = self.kb.remember(text, drawer=drawer)
        self.live[mem.id] = text
        self.drawer[mem.id] = drawer
        return mem.id

    @rule(target=records, items=st.lists(st.tuples(texts, drawers), min_size=1, max_size=4))
    def remember_many(self, items: list[tuple[str, str]]) -> Any:
        mems = self.kb.remember_many([{"text": t, "drawer": d} for t, d in items])
        for mem, (text, drawer) in zip(mems, items, strict=True):
            self.live[mem.id] = text
            self.drawer[mem.id] = drawer
        return multiple(*(m.id for m in mems))

    @rule(rid=consumes(records))
    def forget(self, rid: str) -> None:
        self.kb.forget(rid)
        del self.live[rid]
        self.gone.add(rid)
        self.edges = {e for e in self.edges if rid not in (e[0], e[1])}

    @precondition(lambda self: self.gone)
    @rule(data=st.data())
    def forget_again_is_not_found(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.gone)))
        with pytest.raises(NotFound):
            self.kb.forget(rid)
        with pytest.raises(NotFound):
            self.kb.relate(rid, rid + "x", "supports")

    @rule(src=records, dst=records, rel=st.sampled_from(RELATIONS))
    def relate(self, src: str, dst: str, rel: str) -> None:
        if src == dst:
            with pytest.raises(InvalidInput):
                self.kb.relate(src, dst, rel)
            return
        self.kb.relate(src, dst, rel)
        self.edges.add((src, dst, rel))
        if rel in SYMMETRIC:
            self.edges.add((dst, src, rel))

    @precondition(lambda self: self.live or self.gone)
    @rule()
    def rebuild(self) -> None:
        before, fingerprint = self.snapshot(), self.kb.index.fingerprint()
        self.kb.rebuild()
        self.rebuilds += 1
        self.assert_same_answers(before, fingerprint)

    @precondition(lambda self: self.live or self.gone)
    @rule()
    def delete_index_and_reopen(self) -> None:
        before, fingerprint = self.snapshot(), self.kb.index.fingerprint()
        self.kb.close()
        layout.drop_index(self.home)
        assert not (self.home / layout.INDEX_FILE).exists()
        self.kb = open_store(self.home)
        self.rebuilds += 1
        self.assert_same_answers(before, fingerprint)

    # -- the model -------------------------------------------------------------
    @invariant()
    def gets_match_the_model(self) -> None:
        for rid, text in self.live.items():
            mem = self.kb.get(rid)
            assert (mem.id, mem.text, mem.drawer) == (rid, text, self.drawer[rid])
        for rid in self.gone:
            with pytest.raises(NotFound):
                self.kb.get(rid)
        stats = self.kb.stats()
        assert stats["records"] == len(self.live)
        assert stats["edges"] == len(self.edges)

    @invariant()
    def forgotten_ids_never_come_back(self) -> None:
        for mode in MODES:
            hits = self.kb.search(" ".join(VOCAB), k=50, mode=mode)
            ids = [h.id for h in hits]
            assert len(ids) == len(set(ids))
            assert not set(ids) & self.gone
            assert set(ids) <= set(self.live)
            if mode == "dense" and len(self.live) <= 50:  # every live record has a vector
                assert set(ids) == set(self.live)


RebuildMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRebuildGivesSameAnswers = RebuildMachine.TestCase
