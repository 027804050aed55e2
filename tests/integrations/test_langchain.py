"""The LangChain retriever against the real langchain-core: Documents with provenance,
filters passed through, per-call options, async, and LangChain's own run machinery."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc import AsyncKredenc, Kredenc
from kredenc.errors import InvalidInput

pytest.importorskip("langchain_core", reason="langchain-core is not installed (extra: langchain)")

from langchain_core.documents import Document

from kredenc.integrations.langchain import KredencRetriever


def _fill(kb: Kredenc, notes: Path) -> None:
    kb.remember("Alice drinks jasmine tea every morning.", user_id="alice", tags=["drink"])
    kb.remember("Alice's jasmine tea comes from Fujian.", user_id="alice", tags=["origin"])
    kb.remember("Bob drinks jasmine tea at night.", user_id="bob", tags=["drink"])
    (notes / "tea.md").write_text("# Tea\n\nJasmine tea is green tea scented with jasmine.\n")
    kb.ingest([notes / "tea.md"])


def test_documents_carry_provenance_and_the_filters_apply(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        retriever = KredencRetriever(kb=kb, k=5, mode="lexical", user_id="alice")
        docs = retriever.invoke("jasmine tea")
        assert docs and all(isinstance(d, Document) for d in docs)
        assert {d.metadata["user_id"] for d in docs} == {"alice"}
        assert all(d.id == d.metadata["id"] and d.page_content for d in docs)
        # Per call: other tags, fewer hits; the fields stay as they were.
        (drink,) = retriever.invoke("jasmine tea", k=1, tags=["drink"])
        assert drink.page_content == "Alice drinks jasmine tea every morning."
        assert len(retriever.invoke("jasmine tea")) == 2
        # A document's chunk: its file and title in the metadata.
        (chunk,) = KredencRetriever(kb=kb, search_kwargs={"types": ["chunk"]}).invoke(
            "jasmine scented green tea"
        )
        assert chunk.metadata["file"].endswith("tea.md") and chunk.metadata["type"] == "chunk"
        assert chunk.metadata["title"] and chunk.metadata["doc_id"]


def test_min_score_keeps_only_hits_above_the_calibrated_floor(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        everything = KredencRetriever(kb=kb, k=10).invoke("jasmine tea")
        assert all(0.0 <= d.metadata["relevance"] <= 1.0 for d in everything)
        floor = sorted(d.metadata["relevance"] for d in everything)[len(everything) // 2]
        kept = KredencRetriever(kb=kb, k=10, min_score=floor).invoke("jasmine tea")
        assert kept and len(kept) < len(everything)
        assert all(d.metadata["relevance"] >= floor for d in kept)


def test_async_and_batch_through_langchain(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    with open_store() as kb:
        _fill(kb, tmp_path)
        for handle in (kb, AsyncKredenc(kb)):
            retriever = KredencRetriever(kb=handle, k=3, mode="lexical", user_id="bob")
            docs = asyncio.run(retriever.ainvoke("jasmine tea"))
            assert [d.page_content for d in docs] == ["Bob drinks jasmine tea at night."]
            assert len(retriever.batch(["jasmine tea", "tea at night"])) == 2


def test_bad_options_are_one_clear_error(open_store: Callable[..., Kredenc]) -> None:
    with open_store() as kb:
        retriever = KredencRetriever(kb=kb)
        with pytest.raises(InvalidInput, match="unknown search option"):
            retriever.invoke("tea", kk=3)
        with pytest.raises(InvalidInput):
            retriever.invoke("tea", k=0)


def test_every_search_option_is_a_field_passed_to_the_search(
    every_option: dict[str, Any], recording_kb: tuple[Kredenc, list[dict[str, Any]]]
) -> None:
    kb, calls = recording_kb
    retriever = KredencRetriever(kb=kb, **every_option)
    assert retriever.invoke("tea") == []
    assert asyncio.run(retriever.ainvoke("tea")) == []
    assert calls == [every_option] * 2
