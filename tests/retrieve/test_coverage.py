"""Covering the query: the top of a hybrid list is reordered so that each next hit adds
query terms the hits above it lack (retrieve/coverage.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.records import Hit
from kredenc.retrieve.coverage import WEIGHT, cover
from kredenc.retrieve.query import search_params
from kredenc.retrieve.relevance import WINDOW
from kredenc.testing.embedders import HashEmbedder


def hit(i: int, text: str, score: float, title: str = "") -> Hit:
    return Hit(id=f"h{i}", text=text, score=score, kind="fact", drawer="d", title=title)


def two_things() -> list[Hit]:
    """Three passages about the kestrel above the only one about the heron."""
    return [
        hit(0, "The kestrel hovers over fields and hunts voles.", 1.0),
        hit(1, "A kestrel nests in old crow nests and cliff ledges.", 0.95),
        hit(2, "Kestrel eggs hatch after about four weeks.", 0.9),
        hit(3, "The heron stalks fish in shallow water.", 0.85),
        hit(4, "Gardens attract many small birds in spring.", 0.6),
    ]


def test_a_hit_holding_the_terms_the_others_lack_moves_up() -> None:
    got = cover("Which is larger, the kestrel or the heron?", two_things())
    assert [h.id for h in got][:2] == ["h0", "h3"]
    # Nothing is lost or repeated.
    assert sorted(h.id for h in got) == [f"h{i}" for i in range(5)]


def test_weight_zero_keeps_the_fused_order_and_scores() -> None:
    hits = two_things()
    got = cover("Which is larger, the kestrel or the heron?", hits, weight=0)
    assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in two_things()]


def test_scores_fall_down_the_list_and_never_drop_below_the_fused_score() -> None:
    fused = {h.id: h.score for h in two_things()}
    got = cover("kestrel heron eggs fields", two_things(), weight=WEIGHT)
    scores = [h.score for h in got]
    assert scores == sorted(scores, reverse=True)
    assert all(h.score >= fused[h.id] for h in got)
    assert any(h.score > fused[h.id] for h in got)  # the bonus is in the score
    # The first pick's bonus is its share of the query's (IDF-weighted) terms.
    assert got[0].score <= fused[got[0].id] + WEIGHT


def test_a_title_counts_as_what_the_hit_holds() -> None:
    hits = [
        hit(0, "It hovers over fields and hunts voles.", 1.0, title="Kestrel"),
        hit(1, "It also hovers, over the same fields.", 0.95, title="Kestrel"),
        hit(2, "It stalks fish in shallow water.", 0.9, title="Heron"),
    ]
    # The heron's title holds the query's rarer term: it and the first kestrel lead.
    assert [h.id for h in cover("kestrel or heron", hits)] == ["h2", "h0", "h1"]
    untitled = [hit(i, h.text, h.score) for i, h in enumerate(hits)]
    assert [h.id for h in cover("kestrel or heron", untitled)] == ["h0", "h1", "h2"]


def test_only_the_window_moves() -> None:
    hits = [hit(i, f"kestrel note {i}", 1.0 - i / 100) for i in range(WINDOW)]
    below = [hit(100, "heron heron heron", 0.5), hit(101, "kestrel again", 0.4)]
    got = cover("kestrel heron", hits + below)
    assert [h.id for h in got[WINDOW:]] == ["h100", "h101"]
    assert [h.score for h in got[WINDOW:]] == [0.5, 0.4]
    # A window holds the best of the fused list: the heron below it cannot jump in.
    assert "h100" not in {h.id for h in got[:WINDOW]}


def test_a_query_without_content_terms_changes_nothing() -> None:
    hits = two_things()
    got = cover("what is it?", hits)
    assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in two_things()]


def test_hybrid_search_covers_both_things_a_question_names(tmp_path: Path) -> None:
    texts = [
        "Kestrel hunting notes: the kestrel hunting over fields.",
        "Kestrel hunting notes: a kestrel hunting from a perch.",
        "Kestrel hunting notes: kestrel hunting at dusk.",
        "A heron waits by the pond.",
        *(
            f"Garden diary, day {i}: went hunting for weeds, watered the roses and cut the hedge."
            for i in range(20)
        ),
    ]

    def top(weight: float) -> list[Hit]:
        with Kredenc.open(
            tmp_path / f"w{weight}",
            embedder=HashEmbedder(),
            durability="none",
            coverage_weight=weight,
        ) as kb:
            kb.remember_many([{"text": t} for t in texts])
            return kb.search("kestrel hunting heron", k=4)

    heron = texts[3]
    fused = top(0)
    covered = top(WEIGHT)
    # The fused order has every kestrel note first; covering the query brings the
    # heron up to second, under the best kestrel note.
    assert [h.text for h in fused].index(heron) == 3
    assert [h.text for h in covered][:2] == [fused[0].text, heron]
    assert {h.text for h in fused} == {h.text for h in covered}
    assert all(h.score == h.fused for h in fused)
    assert all(h.score >= h.fused for h in covered)
    assert [h.score for h in covered] == sorted((h.score for h in covered), reverse=True)


def test_single_leg_modes_keep_their_leg_order(tmp_path: Path) -> None:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as kb:
        kb.remember_many(
            [
                {"text": "kestrel kestrel kestrel fields"},
                {"text": "kestrel kestrel nests"},
                {"text": "heron water"},
            ]
        )
        hits = kb.search("kestrel heron", k=3, mode="lexical")
        assert [h.score for h in hits] == [h.legs["lexical"].score for h in hits]


def test_the_setting_and_the_module_share_one_default() -> None:
    assert Settings().coverage_weight == WEIGHT
    assert search_params(Settings(coverage_weight=0.2)).coverage_weight == 0.2


def test_a_negative_coverage_weight_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="coverage_weight"):
        Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), coverage_weight=-0.5)


def test_rrf_fusion_keeps_its_order_and_scores(tmp_path: Path) -> None:
    """The weight is on min-max's scale: under RRF (scores near 1/60) it would swamp the
    fusion, so an RRF store keeps its fused order."""
    with Kredenc.open(
        tmp_path / "s", embedder=HashEmbedder(), durability="none", fusion="rrf"
    ) as kb:
        kb.remember_many(
            [
                {"text": "Kestrel hunting notes: the kestrel hunting over fields."},
                {"text": "Kestrel hunting notes: a kestrel hunting from a perch."},
                {"text": "A heron waits by the pond."},
                *({"text": f"Garden diary, day {i}: went hunting for weeds."} for i in range(9)),
            ]
        )
        hits = kb.search("kestrel hunting heron", k=8)
        assert [h.score for h in hits] == [h.fused for h in hits]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


_TIE = """
from kredenc.records import Hit
from kredenc.retrieve import coverage

# Query terms x, y, z, w with IDF 0.1, 0.2, 0.3, 0.4 (total 1.0). B holds w, A holds
# x, y and z: 0.1 + 0.2 + 0.3 is 0.6 or 0.6000000000000001 by the order it is added
# in, and B's objective (0.25 + 0.4) is exactly A's (0.05 + 0.6) in the first case.
coverage.query_terms = lambda q: ["x", "y", "z", "w"]
coverage.list_idf = lambda terms, stems: {"x": 0.1, "y": 0.2, "z": 0.3, "w": 0.4}
coverage._stems = lambda h: tuple(h.text.split())
coverage.has_term = lambda stems, t: t in stems
hits = [
    Hit(id="B", text="w", score=0.25, kind="fact", drawer="d"),
    Hit(id="A", text="x y z", score=0.05, kind="fact", drawer="d"),
]
print(" ".join(h.id for h in coverage.cover("q", hits, weight=1.0)))
"""


def test_the_order_does_not_depend_on_the_process_hash_seed() -> None:
    """Near-ties are broken the same way in every process: the novelty of a hit is not
    a float sum in a set's (hash-seeded) order. Two processes once ranked a HotpotQA
    question's 7th and 8th hits differently."""
    import os
    import subprocess
    import sys

    orders = set()
    for seed in range(12):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        out = subprocess.run(
            [sys.executable, "-c", _TIE], env=env, capture_output=True, text=True, check=True
        )
        orders.add(out.stdout.strip())
    assert len(orders) == 1, orders
