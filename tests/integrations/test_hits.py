"""The adapters' shared part: options passed through, a hit's metadata, refusals."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kredenc import AsyncKredenc, Client, Kredenc
from kredenc.errors import InvalidInput
from kredenc.integrations import hits
from kredenc.records import Hit, LegScore


def test_hit_metadata_carries_the_provenance_and_leaves_out_what_is_absent() -> None:
    hit = Hit(
        id="c1", text="t", score=1.0, kind="", drawer="docs", type="chunk",
        legs={"dense": LegScore(rank=2, score=0.61)}, title="Attention", origin="/p/a.pdf",
        page=5, doc_id="d1", relevance=0.83, tags=("paper",), meta={"lang": "en"},
    )  # fmt: skip
    meta = hits.hit_metadata(hit)
    assert meta["file"] == "/p/a.pdf" and meta["page"] == 5 and meta["title"] == "Attention"
    assert meta["score"] == 1.0 and meta["relevance"] == 0.83 and meta["doc_id"] == "d1"
    assert meta["legs"] == {"dense": {"rank": 2, "score": 0.61}}
    assert meta["tags"] == ["paper"] and meta["meta"] == {"lang": "en"}
    bare = hits.hit_metadata(Hit(id="m1", text="t", score=0.5, kind="fact", drawer="memories"))
    assert not {"relevance", "file", "page", "title", "tags", "user_id"} & set(bare)


def test_options_merge_per_call_and_refuse_unknown_names() -> None:
    base = hits.search_options(k=3, user_id="alice", tags=["work"], search_kwargs={"hops": 1})
    assert base.kwargs() == {"hops": 1, "k": 3, "mode": "hybrid", "user_id": "alice",
                             "tags": ["work"]}  # fmt: skip
    merged = base.merged({"k": 1, "tags": "home", "user_id": None})
    assert merged.kwargs()["k"] == 1 and merged.kwargs()["tags"] == ["home"]
    assert merged.kwargs()["user_id"] == "alice"  # None leaves an option as it is
    with pytest.raises(InvalidInput, match="unknown search option kk"):
        base.merged({"kk": 2})
    with pytest.raises(InvalidInput, match="search_kwargs repeats k"):
        hits.search_options(search_kwargs={"k": 2})
    with pytest.raises(InvalidInput, match="tags must be a list of strings"):
        base.merged({"tags": [1]})


def test_search_and_asearch_filter_by_scope_on_every_handle(
    open_store: Callable[..., Kredenc], tmp_path: Path
) -> None:
    with open_store() as kb:
        kb.remember("Alice drinks jasmine tea.", user_id="alice")
        kb.remember("Bob drinks jasmine tea too.", user_id="bob")
        opts = hits.search_options(k=5, user_id="bob", mode="lexical")
        found = hits.search(kb, "jasmine tea", opts)
        assert [h.user_id for h in found] == ["bob"]
        assert [h.user_id for h in asyncio.run(hits.asearch(kb, "jasmine tea", opts))] == ["bob"]
        akb = AsyncKredenc(kb)
        assert [h.user_id for h in hits.search(akb, "jasmine tea", opts)] == ["bob"]
        assert [h.user_id for h in asyncio.run(hits.asearch(akb, "jasmine tea", opts))] == ["bob"]


def test_the_options_are_keywords_of_every_handles_search() -> None:
    for handle in (Kredenc, Client, AsyncKredenc):
        params = inspect.signature(handle.search).parameters
        missing = [name for name in hits.OPTIONS if name not in params]
        assert not missing, f"{handle.__name__}.search has no {missing}"


def test_every_option_reaches_the_search_and_a_per_call_override_wins(
    every_option: dict[str, Any], recording_kb: tuple[Kredenc, list[dict[str, Any]]]
) -> None:
    kb, calls = recording_kb
    options = hits.search_options(search_kwargs={"hops": 1}, **every_option)
    hits.search(kb, "tea", options)
    asyncio.run(hits.asearch(kb, "tea", options))
    assert calls == [{**every_option, "hops": 1}] * 2
    assert hits.SearchOptions().merged(every_option).kwargs() == every_option
