"""Namespace isolation under pressure: 10,000 near-duplicates of the query's target in
namespace B must neither leak into namespace A's results nor crowd them out.

The namespace is bound inside every leg's query (FTS5 scope token and SQL for the
lexical leg, the shard key for the dense leg), never applied after top-k: if it were,
B's duplicates would fill the top k and A would get fewer than k results, or none.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import NotFound
from kredenc.testing.embedders import HashEmbedder

TARGET = "kestrel budget review for the water tower project"
QUERY = "kestrel budget review water tower"
FILLER = ("alpha", "beta", "gamma", "delta", "river", "garden", "coffee", "invoice", "meeting")
MODES = ("lexical", "dense", "hybrid")


def open_store(home: Path, namespace: str) -> Kredenc:
    return Kredenc.open(home, namespace, embedder=HashEmbedder(), durability="none")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    home = tmp_path_factory.mktemp("isolation") / "store"
    rng = random.Random(11)
    # B first, so its records have the lower rowids and win every tie.
    with open_store(home, "b") as kb:
        for start in range(0, 10_000, 2_000):
            batch = []
            for i in range(start, start + 2_000):
                # Every tenth an exact duplicate (the same vector, the same card).
                text = TARGET if i % 10 == 0 else f"{TARGET} {rng.choice(FILLER)} {i}"
                batch.append({"text": text, "drawer": "memories" if i % 2 else "work"})
            kb.remember_many(batch)
        b_ids = {h.id for h in kb.search(QUERY, k=50, mode="lexical")}
    with open_store(home, "a") as kb:
        a_items = [{"text": TARGET}] + [
            {"text": f"kestrel {' '.join(rng.choices(FILLER, k=4))}", "drawer": "work"}
            for _ in range(49)
        ]
        a_ids = {m.id for m in kb.remember_many(a_items)}
    with open_store(home, "a") as kb:
        yield {"kb": kb, "a": a_ids, "b_sample": b_ids}


@pytest.mark.parametrize("mode", MODES)
def test_a_sees_only_its_own_records_and_still_k_of_them(
    store: dict[str, object], mode: str
) -> None:
    kb, a_ids = store["kb"], store["a"]
    assert isinstance(kb, Kredenc) and isinstance(a_ids, set)
    hits = kb.search(QUERY, k=10, mode=mode)
    assert len(hits) == 10
    assert {h.id for h in hits} <= a_ids
    assert hits[0].text == TARGET
    # Ranks are ranks among A's records only.
    for leg in ("lexical", "dense"):
        ranks = sorted(h.legs[leg].rank for h in hits if leg in h.legs)
        if mode == leg:
            assert ranks == list(range(1, 11))


@pytest.mark.parametrize("mode", MODES)
def test_drawer_filter_inside_a_namespace(store: dict[str, object], mode: str) -> None:
    kb, a_ids = store["kb"], store["a"]
    assert isinstance(kb, Kredenc) and isinstance(a_ids, set)
    hits = kb.search(QUERY, k=10, mode=mode, drawer="work")
    assert len(hits) == 10
    assert {h.id for h in hits} <= a_ids and {h.drawer for h in hits} == {"work"}


def test_a_cannot_read_or_forget_b(store: dict[str, object]) -> None:
    kb, b_sample = store["kb"], store["b_sample"]
    assert isinstance(kb, Kredenc) and isinstance(b_sample, set) and len(b_sample) == 50
    for rid in sorted(b_sample)[:5]:
        with pytest.raises(NotFound):
            kb.get(rid)
        with pytest.raises(NotFound):
            kb.forget(rid)
        with pytest.raises(NotFound):
            kb.relate(next(iter(store["a"])), rid, "supports")  # type: ignore[call-overload]
    assert kb.stats()["records"] == 50
    assert kb.stats()["edges"] == 0


def test_k_larger_than_a_returns_all_of_a_and_nothing_else(store: dict[str, object]) -> None:
    kb, a_ids = store["kb"], store["a"]
    assert isinstance(kb, Kredenc) and isinstance(a_ids, set)
    for mode in ("dense", "hybrid"):
        hits = kb.search(QUERY, k=1000, mode=mode)
        assert {h.id for h in hits} == a_ids, mode
