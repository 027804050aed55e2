"""Graph expansion: neighbours keep the better of their own and their graph score."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.retrieve.graph import DECAY, Expanded, merge
from kredenc.retrieve.query import search_params
from kredenc.retrieve.search import search
from kredenc.storage.index.filters import Filters
from kredenc.testing.embedders import HashEmbedder


def test_merge_lifts_a_linked_candidate_and_never_lowers_one() -> None:
    ranked = [(1, 1.0), (2, 0.6), (3, 0.2), (4, 0.1)]
    extra = [Expanded(3, 0.5, "mentions of a"), Expanded(2, 0.5, "mentions of a")]
    extra.append(Expanded(9, 0.3, "next of b"))
    out, via = merge(ranked, extra)
    assert out == [(1, 1.0), (2, 0.6), (3, 0.5), (9, 0.3), (4, 0.1)]
    assert via == {3: "mentions of a", 9: "next of b"}  # 2 kept its own, better score


def test_the_setting_and_the_walk_share_one_default(tmp_path: Path) -> None:
    from kredenc.config import Settings

    assert Settings().graph_decay == DECAY
    assert search_params(Settings(graph_decay=0.3), hops=1).graph_decay == 0.3


def test_a_graph_decay_outside_zero_to_one_is_refused(tmp_path: Path) -> None:
    from kredenc.errors import InvalidInput

    for bad in (0, 1.5, -0.2):
        with pytest.raises(InvalidInput, match="graph_decay"):
            Kredenc.open(tmp_path / f"s{bad}", embedder=HashEmbedder(), graph_decay=bad)


def test_merge_keeps_the_legs_order_on_ties() -> None:
    out, via = merge([(5, 0.5), (6, 0.5), (7, 0.1)], [Expanded(7, 0.5, "x")])
    assert [r for r, _ in out] == [5, 6, 7] and via == {7: "x"}


def test_expansion_moves_up_a_neighbour_the_legs_ranked_low(tmp_path: Path) -> None:
    kb = Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none")
    try:
        a = kb.remember("kestrel sqlite kestrel sqlite storage")
        fillers = [
            kb.remember(f"kestrel {w} notes about a field trip to the river and the hills")
            for w in ("alpha", "beta", "gamma")
        ]
        b = kb.remember(
            "kestrel invoices are rounded to whole cents by the finance team every quarter"
            " of the year, with receipts kept for audits and reviewed by two people"
        )
        kb.relate(a.id, b.id, "depends_on")
        plain = [h.id for h in kb.search("kestrel sqlite", k=10, mode="lexical")]
        assert plain[0] == a.id and plain.index(b.id) > 1  # the legs rank it low
        assert set(plain) == {a.id, b.id, *(f.id for f in fillers)}
        hits = kb.search("kestrel sqlite", k=10, mode="lexical", hops=1)
        assert [h.id for h in hits[:2]] == [a.id, b.id]
        assert hits[1].graph == f"depends_on of {a.id}"
        assert hits[1].score == pytest.approx(hits[0].score * DECAY)
        assert all(h.graph is None for h in hits if h.id != b.id)
        # The share is the search's ``graph_decay``.
        store = kb.store
        base = search_params(store.settings, k=10, mode="lexical", hops=1)
        for decay in (0.9, 0.6):
            got = search(
                store.index,
                store.haystack,
                kb.namespace,
                "kestrel sqlite",
                replace(base, graph_decay=decay),
                Filters(),
                store.embed_query,
            )
            assert [h.id for h in got[:2]] == [a.id, b.id]
            assert got[1].score == pytest.approx(got[0].score * decay)
    finally:
        kb.close()
