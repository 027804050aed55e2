"""The LlamaIndex retriever against the real llama-index-core: NodeWithScore with the
calibrated relevance as score, provenance as metadata, filters, async."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc import AsyncKredenc, Kredenc
from kredenc.errors import InvalidInput

pytest.importorskip(
    "llama_index.core", reason="llama-index-core is not installed (extra: llamaindex)"
)

from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.schema import MetadataMode, NodeRelationship

from kredenc.integrations.llamaindex import KredencRetriever


def _fill(kb: Kredenc, notes: Path) -> None:
    kb.remember("Alice drinks jasmine tea every morning.", user_id="alice", tags=["drink"])
    kb.remember("Bob drinks jasmine tea at night.", user_id="bob", tags=["drink"])
    kb.remember("Bob's jasmine tea is from Fujian.", user_id="bob", tags=["origin"])
    (notes / "tea.md").write_text("# Tea\n\nJasmine tea is green tea scented with jasmine.\n")
    kb.ingest([notes / "tea.md"])


def test_nodes_carry_relevance_and_provenance(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        nodes = KredencRetriever(kb, k=5, user_id="bob", tags=["drink"]).retrieve("jasmine tea")
        assert [n.node.get_content() for n in nodes] == ["Bob drinks jasmine tea at night."]
        (node,) = nodes
        assert node.score == node.node.metadata["relevance"] and 0.0 <= node.score <= 1.0
        assert node.node.node_id == node.node.metadata["id"]
        (chunk,) = KredencRetriever(kb, search_kwargs={"types": ["chunk"]}).retrieve(
            "jasmine scented green tea"
        )
        meta = chunk.node.metadata
        assert meta["file"].endswith("tea.md") and meta["type"] == "chunk"
        assert chunk.node.relationships[NodeRelationship.SOURCE].node_id == meta["doc_id"]
        # An LLM sees the title and the file, not the scores and ids.
        shown = chunk.node.get_content(metadata_mode=MetadataMode.LLM)
        assert "tea.md" in shown and "relevance:" not in shown and meta["id"] not in shown


def test_a_lexical_search_scores_by_rank_and_a_cutoff_works_on_relevance(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        lexical = KredencRetriever(kb, k=5, mode="lexical").retrieve("jasmine tea")
        # No relevance computed: the node's score is the hit's rank score.
        assert "relevance" not in lexical[0].node.metadata
        assert lexical[0].score == lexical[0].node.metadata["score"]
        nodes = KredencRetriever(kb, k=10).retrieve("jasmine tea")
        floor = sorted(n.score or 0.0 for n in nodes)[len(nodes) // 2]
        kept = SimilarityPostprocessor(similarity_cutoff=floor).postprocess_nodes(nodes)
        assert kept and len(kept) < len(nodes)


def test_async_retrieval_on_both_handles(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        for handle in (kb, AsyncKredenc(kb)):
            retriever = KredencRetriever(handle, k=3, mode="lexical", user_id="alice")
            nodes = asyncio.run(retriever.aretrieve("jasmine tea"))
            assert [n.node.get_content() for n in nodes] == [
                "Alice drinks jasmine tea every morning."
            ]


def test_every_search_option_is_passed_to_the_search(
    every_option: dict[str, Any], recording_kb: tuple[Kredenc, list[dict[str, Any]]]
) -> None:
    kb, calls = recording_kb
    retriever = KredencRetriever(kb, **every_option)
    assert retriever.retrieve("tea") == []
    assert asyncio.run(retriever.aretrieve("tea")) == []
    assert calls == [every_option] * 2
    with pytest.raises(InvalidInput, match="unknown search option kk"):
        KredencRetriever(kb, kk=2)
