"""The rerank step: hits rescored by a rerank model, reordered, provenance kept.

The model here is a scripted one at the provider seam (its score is the number of
query words the text holds); the real cross-encoder is tested in
tests/providers/rerank/test_rerank.py."""

from __future__ import annotations

from collections.abc import Sequence

from kredenc.providers.rerank import Reranker
from kredenc.records import Hit, LegScore
from kredenc.retrieve.rerank import rerank


class WordCount(Reranker):
    name = "word-count"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.seen += passages
        words = set(query.lower().split())
        return [float(sum(w in words for w in p.lower().split())) for p in passages]


def _hit(i: int, text: str, title: str = "") -> Hit:
    return Hit(
        id=f"c{i}", text=text, score=1.0 - i / 10, kind="", drawer="d", type="chunk",
        legs={"lexical": LegScore(i + 1, 5.0 - i)}, fused=1.0 - i / 10, title=title,
    )  # fmt: skip


def test_hits_are_reordered_by_the_model_and_keep_their_provenance() -> None:
    model = WordCount()
    hits = [
        _hit(0, "budget review"),
        _hit(1, "the kestrel nests on the tower", title="Kestrel survey"),
        _hit(2, "kestrel"),
    ]
    out = rerank("kestrel survey tower", hits, model)
    assert [h.id for h in out] == ["c1", "c2", "c0"]
    assert [h.rerank for h in out] == [4.0, 1.0, 0.0]  # "survey" from the title counts
    assert all(h.score == h.rerank for h in out)
    assert out[0].fused == 0.9 and out[0].legs["lexical"].rank == 2  # what fusion said
    assert model.seen[1] == "Kestrel survey\nthe kestrel nests on the tower"


def test_no_hits_asks_the_model_nothing() -> None:
    model = WordCount()
    assert rerank("anything", [], model) == []
    assert model.seen == []


def test_a_mix_below_one_blends_the_fused_order_with_the_models() -> None:
    def hits() -> list[Hit]:
        return [
            _hit(0, "budget review"),  # fused best, no query word
            _hit(1, "kestrel"),
            _hit(2, "kestrel survey tower"),  # fused worst, every query word
        ]

    alone = rerank("kestrel survey tower", hits(), WordCount(), mix=1.0)
    assert [h.id for h in alone] == ["c2", "c1", "c0"]
    # Scaled fused 1, .5, 0 and model 0, 1/3, 1: at 0.25 the fused order holds.
    light = rerank("kestrel survey tower", hits(), WordCount(), mix=0.25)
    assert [h.id for h in light] == ["c0", "c1", "c2"]
    assert light[0].score == 0.75 and light[0].rerank == 0.0  # the model's own score kept
    heavy = rerank("kestrel survey tower", hits(), WordCount(), mix=0.75)
    assert [h.id for h in heavy] == ["c2", "c1", "c0"]
    assert heavy[0].score == 0.75
