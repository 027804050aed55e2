"""The engine as an eval retriever: title-mention links between passages, and graph
expansion walking them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.eval import engine_retriever, load_multihop
from kredenc.eval.datasets import EvalDoc
from kredenc.eval.engine_retriever import EngineRetriever
from kredenc.ingest.passages import add_passages
from kredenc.testing.embedders import HashEmbedder


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Kredenc]:
    store = Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), durability="none")
    yield store
    store.close()


def _mentions(kb: Kredenc, r: EngineRetriever) -> set[tuple[str, str]]:
    """The 'mentions' edges of the retriever's namespace, as (eval id, eval id)."""
    kb.use_namespace(r.namespace)
    pairs = kb.index.edge_pairs(r.namespace, "mentions")
    return {(_eval_id(kb, a), _eval_id(kb, b)) for a, b in pairs}


def _eval_id(kb: Kredenc, rid: str) -> str:
    return str(kb.get(rid).meta["eval_id"])


def test_passages_that_name_a_title_are_linked(kb: Kredenc, fixtures: Path) -> None:
    d = fixtures / "multihop"
    ds = load_multihop(d / "hotpotqa_questions.json", d / "hotpotqa_corpus.json")
    r = EngineRetriever(kb.store, mention_links=10)
    r.reset()
    r.index(ds.docs)
    # "Rex is a beagle. He lives in Paris." names Beagle and Paris; "(dog)" is dropped
    # from Rex's title, but no passage names Rex.
    assert _mentions(kb, r) == {("Rex (dog)", "Beagle"), ("Rex (dog)", "Paris")}
    assert r.links == 2
    off = EngineRetriever(kb.store)  # the default files no links
    off.reset()
    off.index(ds.docs)
    assert _mentions(kb, off) == set() and off.links == 0


def test_one_hop_lifts_the_passage_the_best_hit_names(kb: Kredenc) -> None:
    docs = [
        EvalDoc(
            "Q", "Quokka Hotel\nThe Quokka Hotel was designed by Ada Lindqvist.", "Quokka Hotel"
        ),
        EvalDoc("A", "Ada Lindqvist\nShe grew up in Tromso.", "Ada Lindqvist"),
        EvalDoc("H1", "Hotel Alpha\nA hotel that was designed well.", "Hotel Alpha"),
        EvalDoc("H2", "Hotel Beta\nA hotel designed by committee.", "Hotel Beta"),
        EvalDoc("H3", "Hotel Gamma\nThe hotel designer.", "Hotel Gamma"),
    ]
    query = "Where was the designer of the Quokka Hotel raised?"
    plain = EngineRetriever(kb.store, mention_links=10, mode="lexical")
    plain.reset()
    plain.index(docs)
    ranked = plain.search(query, 5)
    assert ranked[0] == "Q" and "A" not in ranked[:2]
    walked = EngineRetriever(kb.store, mention_links=10, mode="lexical", hops=1)
    walked.reset()
    walked.index(docs)
    assert walked.search(query, 5)[:2] == ["Q", "A"]


def test_dated_documents_and_a_dated_question_read_its_time(kb: Kredenc) -> None:
    """``dated``: each document filed at its time, each query searched as asked at its
    time, so "two months ago" puts what was filed since first; undated, words are words."""
    day = 86_400.0
    asked = 1_700_000_000.0
    docs = [
        EvalDoc("old", "The museum trip: a museum day.", meta={"time": asked - 150 * day}),
        EvalDoc("new", "I saw a museum alone.", meta={"time": asked - 58 * day}),
    ]
    question = "museum trip two months ago"
    for dated, expected in ((False, ["old", "new"]), (True, ["new", "old"])):
        r = EngineRetriever(kb.store, record_type="turn", dated=dated, mode="lexical")
        r.reset()
        r.index(docs)
        assert r.search(question, 2, asked_at=asked) == expected


def _filed(
    monkeypatch: pytest.MonkeyPatch, r: EngineRetriever, docs: list[EvalDoc]
) -> list[dict[str, str]]:
    """What ``r.index(docs)`` files: each passage's text, title and context."""
    seen: list[dict[str, str]] = []

    def spy(store: object, ns: str, items: list[dict[str, str]], **kw: object) -> list[str]:
        seen.extend(items)
        return add_passages(store, ns, items, **kw)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(engine_retriever, "add_passages", spy)
        r.reset()
        r.index(docs)
    return [{k: i.get(k, "") for k in ("text", "title", "context")} for i in seen]


def test_sentence_units_are_titled_with_their_neighbours_as_context(
    kb: Kredenc, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = EvalDoc("d", "Aspirin\nIt thins blood. It eases pain. It lowers fever.", "Aspirin")
    r = EngineRetriever(kb.store, units="sentences", sentence_size=20)
    assert _filed(monkeypatch, r, [doc]) == [
        {"text": "It thins blood.", "title": "Aspirin", "context": "It eases pain."},
        {
            "text": "It eases pain.",
            "title": "Aspirin",
            "context": "It thins blood. It lowers fever.",
        },
        {"text": "It lowers fever.", "title": "Aspirin", "context": "It eases pain."},
    ]
    # A query that needs a unit and its neighbour finds the document through the context.
    assert r.search("thins pain", 1) == ["d"]


def test_chunks_with_a_window_carry_their_neighbours_and_without_carry_none(
    kb: Kredenc, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = EvalDoc("d", ("First part of the text. " * 10 + "Second part here. " * 10).strip())
    filed = _filed(monkeypatch, EngineRetriever(kb.store, chunk_size=250, window=1), [doc])
    texts = [f["text"] for f in filed]
    assert len(filed) == 3
    assert [f["context"] for f in filed] == [texts[1], f"{texts[0]} {texts[2]}", texts[1]]
    plain = _filed(monkeypatch, EngineRetriever(kb.store, chunk_size=250), [doc])
    assert plain == [{"text": t, "title": "", "context": ""} for t in texts]


def test_units_must_be_known(kb: Kredenc) -> None:
    with pytest.raises(ValueError, match="units"):
        EngineRetriever(kb.store, units="paragraphs")
