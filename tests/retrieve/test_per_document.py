"""``per_document``: one hit per document, even when the legs pick different chunks of it.

Issue 16: the attention paper came back twice, p.9 found by words alone at #1 and
p.5 found by meaning alone at #2. The embedder here places texts by a table, so
that one chunk is the dense leg's best and another the lexical leg's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from kredenc.engine import Kredenc
from kredenc.providers.embed.base import Embedder, Vectors, l2_normalise

QUERY = "adam optimizer"
# text -> the axis it points along (the query's is 0); anything else: axis 7.
PLACES = {
    QUERY: (1.0, 0, 0),
    "We trained with a warmup of 4000 steps.": (1.0, 0, 0),  # attention p.5: meaning only
    "The adam optimizer, adam with beta2 0.98.": (0, 1.0, 0),  # attention p.9: words only
    "SGD with momentum beat the adam optimizer here.": (0.6, 0, 0.8),  # other: both
    "Learning rates and schedules.": (0.5, 0, 0.87),  # notes: meaning only, weaker
}


class TableEmbedder(Embedder):
    dim = 8
    model_id = "test-table-8"

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            place = PLACES.get(text)
            if place is None:
                out[row, 7] = 1.0
            else:
                out[row, : len(place)] = place
        return l2_normalise(out)


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    store = Kredenc.open(tmp_path / "s", embedder=TableEmbedder(), durability="none")
    store.add_passages(
        [
            {"text": "We trained with a warmup of 4000 steps.", "doc_id": "attention"},
            {"text": "The adam optimizer, adam with beta2 0.98.", "doc_id": "attention"},
            {"text": "SGD with momentum beat the adam optimizer here.", "doc_id": "other"},
            {"text": "Learning rates and schedules.", "doc_id": "notes"},
        ]
    )
    yield store
    store.close()


def test_the_legs_pick_different_chunks_of_one_document(kb: Kredenc) -> None:
    dense = kb.search(QUERY, k=1, mode="dense", per_document=True)
    lexical = kb.search(QUERY, k=1, mode="lexical", per_document=True)
    assert dense[0].doc_id == lexical[0].doc_id == "attention"
    assert dense[0].id != lexical[0].id


@pytest.mark.parametrize("hops", [0, 1])
def test_hybrid_per_document_shows_each_document_once(kb: Kredenc, hops: int) -> None:
    chunks = kb.search(QUERY, k=10, hops=hops)
    assert [h.doc_id for h in chunks].count("attention") == 2  # without the flag: both
    docs = kb.search(QUERY, k=10, per_document=True, hops=hops)
    ids = [h.doc_id for h in docs]
    assert sorted(ids) == ["attention", "notes", "other"]
    # The document keeps its best fused chunk, in the place that chunk had.
    best = next(h for h in chunks if h.doc_id == "attention")
    assert next(h for h in docs if h.doc_id == "attention").id == best.id


def test_the_cut_counts_documents_not_chunks(kb: Kredenc) -> None:
    top2 = kb.search(QUERY, k=2, per_document=True)
    assert len({h.doc_id for h in top2}) == 2


def test_the_document_carries_each_legs_best_chunk(kb: Kredenc) -> None:
    """A document is ranked by its best chunk in each leg (words found p.9, meaning
    p.5): the hit that stands for it has both legs, so it is fused as one document
    found both ways, not as two half-found chunks."""
    docs = kb.search(QUERY, k=10, per_document=True)
    attention = next(h for h in docs if h.doc_id == "attention")
    assert set(attention.legs) == {"lexical", "dense"}
    assert attention.legs["lexical"].rank == 1 and attention.legs["dense"].rank == 1
    assert docs[0].doc_id == "attention"  # first in both legs: first fused


def test_one_long_document_does_not_use_up_the_legs(tmp_path: Path) -> None:
    """Issue 16: with a 70-chunk paper in the store, 'search --per-document -k 5'
    answered 2 hits: each leg's 50 candidates were nearly all the paper's chunks, one
    document once grouped. The legs go deeper until they hold enough documents."""
    with Kredenc.open(tmp_path / "s", embedder=TableEmbedder(), durability="none") as kb:
        paper = [f"Attention heads part {i}: eight heads." for i in range(70)]
        kb.add_passages([{"text": text, "doc_id": "paper"} for text in paper])
        kb.add_passages(
            [{"text": f"Note {i} on attention heads.", "doc_id": f"note{i}"} for i in range(6)]
        )
        for mode in ("hybrid", "lexical", "dense"):
            hits = kb.search("attention heads", k=5, mode=mode, per_document=True)
            assert len(hits) == 5, mode
            assert len({h.doc_id for h in hits}) == 5, mode


def test_the_feedback_pass_fuses_documents_too(tmp_path: Path) -> None:
    """With pseudo-relevance feedback the legs are searched again and fused again: the
    second fusion puts each document under one chunk as the first does."""
    with Kredenc.open(
        tmp_path / "s", embedder=TableEmbedder(), durability="none", feedback="both"
    ) as kb:
        kb.add_passages(
            [
                {"text": "We trained with a warmup of 4000 steps.", "doc_id": "attention"},
                {"text": "The adam optimizer, adam with beta2 0.98.", "doc_id": "attention"},
                {"text": "SGD with momentum beat the adam optimizer here.", "doc_id": "other"},
            ]
        )
        docs = kb.search(QUERY, k=10, per_document=True)
        assert sorted(h.doc_id for h in docs) == ["attention", "other"]
        attention = next(h for h in docs if h.doc_id == "attention")
        assert set(attention.legs) == {"lexical", "dense"}
