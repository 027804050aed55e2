"""The context graph ranks by relevance first; importance and recency break near-ties.

Issue 16: ``graph "what does the user drink"`` put an important fact about the user's
manager first and the tea the user drinks second.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.retrieve.context_graph import Blend
from kredenc.testing.embedders import HashEmbedder

TEA = "The user likes to drink tea"
MANAGER = "The user's manager is Bob"


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    store = Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none")
    yield store
    store.close()


def test_relevance_outranks_importance(kb: Kredenc) -> None:
    tea = kb.remember(TEA, kind="preference", importance=0.2)
    manager = kb.remember(MANAGER, kind="fact", importance=1.0)
    graph = kb.context_graph("what does the user drink", hops=0)
    nodes = {n.id: n for n in graph.nodes}
    assert nodes[tea.id].similarity > nodes[manager.id].similarity + 0.1
    assert [n.id for n in graph.nodes[:2]] == [tea.id, manager.id]


def test_importance_breaks_a_near_tie(kb: Kredenc) -> None:
    low = kb.remember("The user likes to drink coffee", importance=0.1)
    high = kb.remember("The user likes to drink juice", importance=0.9)
    graph = kb.context_graph("what does the user drink", hops=0)
    sims = {n.id: n.similarity for n in graph.nodes}
    assert abs(sims[low.id] - sims[high.id]) < 0.01  # the same words the query has
    assert [n.id for n in graph.nodes] == [high.id, low.id]


def test_the_blend_bounds_what_importance_and_recency_can_move() -> None:
    blend = Blend().normalised()
    # Most important and freshest against least: 0.05 of similarity, no more.
    assert blend.score(0.60, 1.0, 1.0) > blend.score(0.649, 0.0, 0.0)
    assert blend.score(0.60, 1.0, 1.0) < blend.score(0.651, 0.0, 0.0)
    # Without a similarity weight the ranking is importance and recency alone.
    alone = Blend(0.0, 0.5, 0.5).normalised()
    assert alone.score(0.0, 1.0, 0.0) > alone.score(1.0, 0.5, 0.0)
    with pytest.raises(InvalidInput):
        Blend(tiebreak=2.0).normalised()


def test_the_setting_scales_the_tiebreak(tmp_path: Path) -> None:
    with Kredenc.open(
        tmp_path / "s", embedder=HashEmbedder(), durability="none", rank_tiebreak=1.0
    ) as kb:
        kb.remember(TEA, importance=0.2)
        manager = kb.remember(MANAGER, importance=1.0)
        # At 1.0 the old blend comes back: importance outweighs the similarity gap.
        assert kb.context_graph("what does the user drink", hops=0).nodes[0].id == manager.id
