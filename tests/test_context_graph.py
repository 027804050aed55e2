"""ContextGraph: blended ranking, contradictions never one-sided, a prompt within budget."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.records import ContextGraph, GraphEdge, GraphNode
from kredenc.retrieve import context_graph as graphs
from kredenc.testing.embedders import HashEmbedder


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    with Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none") as store:
        yield store


def test_contradiction_brings_both_sides_with_the_relation(kb: Kredenc) -> None:
    old = kb.remember("The office coffee machine is broken", kind="fact")
    kb.remember("Lunch is at noon on Fridays")
    new = kb.remember("Facilities say it works again", kind="fact")
    kb.relate(new.id, old.id, "contradicts")
    graph = kb.context_graph("office coffee machine broken", hops=0, k=1)
    ids = {n.id for n in graph.nodes}
    assert {old.id, new.id} <= ids
    assert GraphEdge(new.id, old.id, "contradicts", 1.0) in graph.edges
    assert f"[{new.id}] contradicts [{old.id}]" in graph.to_prompt_text(2000)


def test_importance_weight_reorders(kb: Kredenc) -> None:
    low = kb.remember("garden plan tulips", importance=0.0)
    high = kb.remember("garden plan roses", importance=1.0)
    by_sim = kb.context_graph("garden plan tulips", hops=0, weights=(1, 0, 0))
    by_imp = kb.context_graph("garden plan tulips", hops=0, weights=(0, 1, 0))
    assert by_sim.nodes[0].id == low.id
    assert by_imp.nodes[0].id == high.id
    with pytest.raises(InvalidInput):
        kb.context_graph("garden", weights=(0, 0, 0))


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(min_size=0, max_size=300), min_size=0, max_size=8),
    budget=st.integers(min_value=0, max_value=600),
)
def test_prompt_text_never_exceeds_the_budget(texts: list[str], budget: int) -> None:
    nodes = [
        GraphNode(
            id=f"m{i:020d}",
            type="memory",
            kind="fact",
            text=t,
            score=1.0,
            similarity=0.5,
            importance=0.5,
            recency=1.0,
            created_at=1_700_000_000.0,
        )
        for i, t in enumerate(texts)
    ]
    edges = [GraphEdge(a.id, b.id, "supports") for a, b in pairwise(nodes)]
    text = ContextGraph("q", nodes, edges).to_prompt_text(budget)
    assert len(text) <= budget


def test_an_unrelated_document_does_not_flood_the_graph(kb: Kredenc) -> None:
    """A day-one audit: a 10th seed at cosine 0.06 (a bibliography chunk) pulled in
    about 40 chunks of its paper through ``part_of`` and ``next``. Records found by
    meaning alone below the similarity floor are neither nodes nor walked from, and a
    neighbour reached by a document's structure (``part_of``, ``next``, links) must be
    similar enough itself; a typed relation between memories brings its record
    whatever its similarity."""
    tea = kb.remember("the user drinks green tea every morning")
    budget = kb.remember("budgets are approved quarterly")
    kb.relate(tea.id, budget.id, "supports")
    kb.add_passages(
        [{"text": "what a long list of references follows here", "doc_id": "paper"}]
        + [
            {"text": f"alpha beta gamma delta epsilon zeta eta theta {i}", "doc_id": "paper"}
            for i in range(30)
        ]
    )
    graph = kb.context_graph("what does the user drink")
    assert graph.nodes[0].id == tea.id
    ids = {n.id for n in graph.nodes}
    assert budget.id in ids  # a typed relation, however dissimilar
    assert not any(n.type == "chunk" for n in graph.nodes)
    # Every node by meaning alone clears the floor.
    dense_only = [n for n in graph.nodes if n.hop == 0 and n.id != tea.id]
    assert all(n.similarity >= graphs.MIN_SIMILARITY for n in dense_only)
    # A seed given by id is walked from, and its document's structure with it.
    chunk = kb.search("references follows", k=1)[0].id
    near = kb.context_graph("what does the user drink", seed_ids=[chunk], hops=1)
    assert chunk in {n.id for n in near.nodes}
