"""Graph expansion: neighbours keep the better of their own and their graph score."""

from __future__ import annotations

from pathlib import Path

from kredenc.engine import Kredenc
from kredenc.retrieve.graph import Expanded, merge
from kredenc.testing.embedders import HashEmbedder


def test_merge_lifts_a_linked_candidate_and_never_lowers_one() -> None:
    ranked = [(1, 1.0), (2, 0.6), (3, 0.2), (4, 0.1)]
    extra = [Expanded(3, 0.5, "mentions of a"), Expanded(2, 0.5, "mentions of a")]
    extra.append(Expanded(9, 0.3, "next of b"))
    out, via = merge(ranked, extra)
    assert out == [(1, 1.0), (2, 0.6), (3, 0.5), (9, 0.3), (4, 0.1)]
    assert via == {3: "mentions of a", 9: "next of b"}  # 2 kept its own, better score


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
        assert hits[1].score == hits[0].score * 0.5
        assert all(h.graph is None for h in hits if h.id != b.id)
    finally:
        kb.close()
