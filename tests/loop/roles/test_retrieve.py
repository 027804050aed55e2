"""retrieve: the modes, the queries it searches, accumulation over iterations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.loop.roles import retrieve, verify
from kredenc.loop.roles.retrieve import Retrieve, choose_mode, fuse
from kredenc.records import Hit
from kredenc.testing.embedders import HashEmbedder

from .conftest import MakeServices
from .helpers import TinyLLM, mind

DISTRACTORS = [
    f"Note {i}: the {topic} meeting moved to room {i} on floor {i % 5}."
    for i, topic in enumerate(
        [
            "budget",
            "hiring",
            "roadmap",
            "design",
            "security",
            "sales",
            "support",
            "legal",
            "travel",
            "marketing",
            "finance",
            "research",
            "planning",
            "review",
            "training",
            "safety",
            "quality",
            "launch",
            "audit",
            "partnership",
        ]
    )
]
KISS = "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer."
TEMPLE = "Shirley Temple Black served as United States ambassador to Ghana and Czechoslovakia."
BRIDGE_Q = (
    "What government position was held by the woman who portrayed Corliss Archer "
    "in the film Kiss and Tell?"
)


def _fill(kb: Kredenc) -> None:
    kb.remember_many([{"text": t} for t in [*DISTRACTORS, KISS, TEMPLE]])


def test_modes_follow_the_question(services: MakeServices) -> None:
    s = services()
    assert choose_mode("How many heads does the model use?", s) == "hybrid"
    assert choose_mode("Were Scott Derrickson and Ed Wood of the same nationality?", s) == "graph"
    assert choose_mode(BRIDGE_Q, s) == "iterative"
    assert choose_mode("What BLEU score does it reach on English-to-German?", s) == "hybrid"
    assert choose_mode("How many heads?", services(rerank="cross-encoder")) == "reranked"
    assert choose_mode(BRIDGE_Q, services(options={"retrieve_mode": "hybrid"})) == "hybrid"


def test_hybrid_search_writes_chunks_mode_and_queries(kb: Kredenc, services: MakeServices) -> None:
    _fill(kb)
    m = mind("Where did the budget meeting move?", rewrite_query="budget meeting room")
    result = Retrieve().run(m, services(options={"k": 3}))
    chunks = m.read("retrieve.chunks")
    assert result.status == "ok" and m.read("retrieve.mode") == "hybrid"
    assert m.read("retrieve.queries") == ["budget meeting room"]
    assert "budget" in chunks[0].text and len(chunks) <= 6


def test_iterative_mode_follows_the_bridge_entity(kb: Kredenc, services: MakeServices) -> None:
    _fill(kb)
    plain = mind(BRIDGE_Q)
    Retrieve().run(plain, services(options={"k": 3, "retrieve_mode": "hybrid"}))
    assert TEMPLE not in [h.text for h in plain.read("retrieve.chunks")]
    m = mind(BRIDGE_Q)
    Retrieve().run(m, services(options={"k": 3}))
    texts = [h.text for h in m.read("retrieve.chunks")]
    assert m.read("retrieve.mode") == "iterative"
    assert KISS in texts and TEMPLE in texts
    assert any(q.startswith("Shirley Temple") for q in m.read("retrieve.queries")[1:])


def test_later_iterations_add_the_focus_and_keep_earlier_chunks(
    kb: Kredenc, services: MakeServices
) -> None:
    _fill(kb)
    m = mind("Where did the budget meeting move?", rewrite_query="budget meeting")
    s = services(options={"k": 2})
    Retrieve().run(m, s)
    first = [h.id for h in m.read("retrieve.chunks")]
    m.write("loop.iteration", 2)
    m.write("reflect.focus", "security meeting room")
    Retrieve().run(m, s)
    second = m.read("retrieve.chunks")
    ids = [h.id for h in second]
    assert set(first) <= set(ids) and len(ids) == len(set(ids))
    assert any("security" in h.text for h in second)
    assert m.read("retrieve.queries") == ["budget meeting", "security meeting room"]
    m.write("loop.iteration", 3)  # nothing new to search: the chunks stay as they were
    assert Retrieve().run(m, s).note == f"hybrid: {len(ids)} chunks from 0 searches"
    assert [h.id for h in m.read("retrieve.chunks")] == ids


def test_skips_without_retrieval_or_question(services: MakeServices) -> None:
    from kredenc.loop.mind import LocalMind

    assert Retrieve().run(mind("hi", decide_retrieve=False), services()).status == "skipped"
    assert Retrieve().run(LocalMind(), services()).status == "skipped"


def test_the_llm_plans_mode_and_extra_queries(kb: Kredenc, services: MakeServices) -> None:
    _fill(kb)
    llm = TinyLLM([{"mode": "graph", "queries": ["security meeting"]}])
    m = mind("Where did the budget meeting move?")
    Retrieve().run(m, services(llm=llm, role_retrieve="llm", options={"k": 2}))
    assert m.read("retrieve.mode") == "graph"
    assert m.read("retrieve.queries") == ["Where did the budget meeting move?", "security meeting"]


def _hit(i: str) -> Hit:
    return Hit(id=i, text=i, score=0.0, kind="note", drawer="d")


def test_fuse_interleaves_or_sums_reciprocal_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c, d = _hit("a"), _hit("b"), _hit("c"), _hit("d")
    assert [h.id for h in fuse([[a, b, d], [c, b]])] == ["a", "c", "b", "d"]  # interleave
    assert [h.id for h in fuse([[a, b], [b, c]], limit=2)] == ["a", "b"]
    monkeypatch.setattr(retrieve, "FUSION", "rrf")
    assert [h.id for h in fuse([[a, b], [b, c]])] == ["b", "a", "c"]


def test_the_drawer_option_limits_the_search(kb: Kredenc, services: MakeServices) -> None:
    _fill(kb)
    kb.remember("The budget meeting notes live in the archive.", drawer="archive")
    m = mind("budget meeting")
    Retrieve().run(m, services(options={"k": 5, "drawer": "archive"}))
    assert [h.drawer for h in m.read("retrieve.chunks")] == ["archive"]


def test_the_loops_own_answers_are_no_source(kb: Kredenc, services: MakeServices) -> None:
    from kredenc.retrieve.query import search

    kb.remember("The budget meeting moved to room 7.")
    turns = [
        {"role": "user", "content": "Where did the budget meeting move?"},
        {"role": "assistant", "content": "The budget meeting moved to room 7 [1]."},
    ]
    kb.file_turns("s1", turns)
    found = search(kb.store, kb.namespace, "budget meeting moved room", k=5)
    assert {h.meta.get("role") for h in found} >= {"user", "assistant"}  # the store has both
    m = mind("Where did the budget meeting move?")
    Retrieve().run(m, services(options={"k": 5}))
    chunks = m.read("retrieve.chunks")
    assert "The budget meeting moved to room 7." in [h.text for h in chunks]
    assert not any(h.type == "turn" for h in chunks)  # the answer, nor the question


def test_a_configured_onnx_cross_encoder_orders_what_the_loop_retrieves(
    kb: Kredenc, services: MakeServices, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The bring-your-own cross-encoder in the loop: reranked mode, its favourites first
    among the ``k`` (12 by default) chunks retrieve hands on."""
    from kredenc.testing.tiny_models import build_cross_encoder

    folder = build_cross_encoder(tmp_path_factory.mktemp("ce") / "m", favour=("apple",)).path
    apples = ["the red apple and the green apple", "an apple tree grows by the river"]
    kb.remember_many([{"text": t} for t in [*DISTRACTORS, "the river boat", *apples]])
    s = services(options={"rerank": f"onnx:{folder}"}, rerank=f"onnx:{folder}")
    m = mind("the river boat")
    Retrieve().run(m, s)
    chunks = m.read("retrieve.chunks")
    assert m.read("retrieve.mode") == "reranked"
    assert [h.text for h in chunks[:2]] == apples
    assert all(h.rerank is not None for h in chunks) and len(chunks) <= 12


def test_the_ask_reranks_once_and_verify_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole ask with the tiny ONNX cross-encoder configured: the reranker is called
    once per retrieve iteration, on at most ``ask_rerank_depth`` pairs of the standalone
    query; no search reranks (verify's evidence searches among them)."""
    from kredenc.providers.rerank.onnx import OnnxCrossEncoder
    from kredenc.retrieve import query as querying
    from kredenc.testing.tiny_models import build_cross_encoder

    folder = build_cross_encoder(tmp_path / "ce", favour=("apple",)).path
    calls: list[tuple[str, int]] = []
    score = OnnxCrossEncoder.score

    def counted(self: OnnxCrossEncoder, query: str, passages: Sequence[str]) -> list[float]:
        calls.append((query, len(passages)))
        return score(self, query, passages)

    searched: list[tuple[int, str | None]] = []
    search = querying.search

    def recorded(*args: Any, **kw: Any) -> list[Hit]:
        searched.append((kw.get("k"), kw.get("rerank")))
        return search(*args, **kw)

    monkeypatch.setattr(OnnxCrossEncoder, "score", counted)
    monkeypatch.setattr(querying, "search", recorded)
    texts = [
        "the red apple grows on the old tree",
        "the green apple tree grows by the river",
        "a small fruit tree grows by the river",
        "the fruit of the tree is a seed",
        *[f"the {w} boat on the sea" for w in ("red", "blue", "fast", "slow", "old", "new")],
        *[f"the {w} bird on the stone bridge" for w in ("red", "blue", "small", "large")],
    ]
    with Kredenc.open(
        tmp_path / "store",
        embedder=HashEmbedder(),
        durability="none",
        rerank=f"onnx:{folder}",
        ask_rerank_depth=5,
    ) as kb:
        kb.remember_many([{"text": t} for t in texts])
        got = kb.ask("which tree grows fruit by the river", max_iterations=1, file=False)
        again = kb.ask("which tree grows fruit by the river", max_iterations=1, file=False)
    steps = {s.tool: s for s in got.trace}
    assert [h.id for h in again.verdicts] == [h.id for h in got.verdicts]
    assert got.mode == "reranked" and "5 reranked" in steps["retrieve"].note
    assert calls == [("which tree grows fruit by the river", 5)]  # the repeat: from the cache
    assert {rerank for _, rerank in searched} == {"none"}
    assert {k for k, _ in searched} == {12, verify.EVIDENCE_K}  # retrieve's and verify's
    kept = [c for c in got.verdicts if c.verdict in ("CORRECT", "VERIFIED")]
    assert kept, "the test needs a kept chunk"


def test_rerank_chunks_puts_the_reranked_head_first_and_keeps_the_rest(
    kb: Kredenc, services: MakeServices, tmp_path: Path
) -> None:
    from kredenc.testing.tiny_models import build_cross_encoder

    folder = build_cross_encoder(tmp_path / "ce", favour=("apple",)).path
    words = ["the river boat", "the old stone", "an apple tree", "the apple", "the sea ship"]
    hits = [
        Hit(id=f"h{i}", text=t, score=1.0 - i / 10, kind="memory", drawer="")
        for i, t in enumerate(words)
    ]
    s = services(rerank=f"onnx:{folder}", ask_rerank_depth=3)
    out = retrieve.rerank_chunks(s, "the river", hits)
    assert [h.id for h in out] == ["h2", "h0", "h1", "h3", "h4"]
    assert [h.rerank is not None for h in out] == [True, True, True, False, False]
    assert all(h.rerank is None for h in hits)  # the caller's hits are not changed
    assert retrieve.rerank_chunks(services(), "the river", hits) == hits  # no reranker
    off = services(rerank=f"onnx:{folder}", ask_rerank_depth=0)
    assert retrieve.rerank_chunks(off, "the river", hits) == hits
    assert choose_mode("the river", off) == "hybrid"


def test_an_ask_reranks_at_most_its_depth_in_all(
    kb: Kredenc, services: MakeServices, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The ask's rerank budget is ``ask_rerank_depth`` chunks over all its iterations:
    a later iteration's new chunks are reranked only within what the earlier ones left,
    and follow the earlier chunks in fused order once it is spent."""
    from kredenc.testing.tiny_models import build_cross_encoder

    folder = build_cross_encoder(tmp_path_factory.mktemp("ce") / "m", favour=("apple",)).path
    words = ["the river boat", "the old stone", "an apple tree", "the apple", "the sea ship"]
    hits = [
        Hit(id=f"h{i}", text=t, score=1.0 - i / 10, kind="memory", drawer="")
        for i, t in enumerate(words)
    ]
    s = services(rerank=f"onnx:{folder}", ask_rerank_depth=3)
    left_one = retrieve.rerank_chunks(s, "the river", hits, spent=2)
    assert [h.rerank is not None for h in left_one] == [True, False, False, False, False]
    assert retrieve.rerank_chunks(s, "the river", hits, spent=3) == hits

    kb.remember_many([{"text": t} for t in [*DISTRACTORS, "the river boat", "the apple pie"]])
    s = services(options={"rerank": f"onnx:{folder}"}, rerank=f"onnx:{folder}", ask_rerank_depth=2)
    m = mind("the river boat")
    Retrieve().run(m, s)
    first = m.read("retrieve.chunks")
    assert [h.rerank is not None for h in first[:3]] == [True, True, False]
    m.write("loop.iteration", 2)
    m.write("reflect.focus", "apple pie")
    Retrieve().run(m, s)
    both = m.read("retrieve.chunks")
    assert [h.id for h in both[: len(first)]] == [h.id for h in first]
    assert len(both) > len(first), "the focus should bring a new chunk"
    assert all(h.rerank is None for h in both[len(first) :])  # the budget was spent


def test_iterative_mode_runs_one_bridge_round(
    kb: Kredenc, services: MakeServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second round would search the names the first round's passage brought
    # (Ghana, Czechoslovakia); measured through this role, later rounds push the
    # question's own passages out of the top (retrieve.MAX_HOPS).
    ghana = "Ghana is a country in West Africa whose capital is Accra."
    _fill(kb)
    kb.remember(ghana)
    assert retrieve.MAX_HOPS == 1

    def searched(hops: int) -> list[str]:
        monkeypatch.setattr(retrieve, "MAX_HOPS", hops)
        m = mind(BRIDGE_Q)
        Retrieve().run(m, services(options={"k": 3}))
        return list(m.read("retrieve.queries"))

    one, two = searched(1), searched(2)
    assert any(q.startswith("Shirley Temple") for q in one[1:])
    assert not any("Ghana" in q or "Czechoslovakia" in q for q in one)
    assert any("Ghana" in q or "Czechoslovakia" in q for q in two)  # what one round spares
