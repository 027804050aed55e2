"""What every blackboard backend (:class:`~kredenc.loop.mind.Mind`) must do.

Subclass :class:`MindConformance` as ``TestMyMind`` and implement ``make_mind()``: a
fresh, empty mind of one run (the suite calls :meth:`MindConformance.done` with it at
the end; override it to let go of what the mind holds). ``tests/loop/test_mind.py``
runs it against :class:`~kredenc.loop.mind.LocalMind` and
:class:`~kredenc.loop.mind.RedisMind`.

It covers keys (``tool.data`` only; a bad key is refused and nothing is written),
values coming back equal and of the same types (plain JSON values, tuples, and the
loop's result types: hits with their legs, verdicts, citations, an evaluation with
its sentences), replacement, ``read`` of a missing key (``KeyError``, or the default,
``None`` included), ``list_keys`` (sorted, by prefix), two runs never seeing each
other's keys, and threads writing and reading at once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kredenc.errors import InvalidInput
from kredenc.grounding.base import Evaluation, SentenceSupport
from kredenc.loop.answer import ChunkVerdict, Citation
from kredenc.loop.mind import Mind
from kredenc.records import Hit, LegScore

__all__ = ["MindConformance", "sample_values"]


def sample_values() -> dict[str, Any]:
    """One value of each kind the loop's tools write, by the key it goes under."""
    hit = Hit(
        id="c1",
        text="The Transformer uses h = 8 heads.",
        score=1.0,
        kind="fact",
        drawer="docs",
        type="chunk",
        legs={"lexical": LegScore(1, 3.5), "dense": LegScore(2, 0.71)},
        meta={"nested": {"a": [1, 2.5, None]}, "$odd": True},
        tags=("attention", "heads"),
        title="Attention Is All You Need",
        page=5,
        relevance=0.93,
    )
    evaluation = Evaluation(
        context_sufficient=True,
        confidence_score=91,
        hallucination_detected=False,
        hallucination_reason="",
        evaluation_summary="supported",
        sentences=(SentenceSupport("h = 8 [1]", 0, 9, 0.9, True, context=0, evidence="c1"),),
    )
    return {
        "ask.question": "How many heads? (naïve 日本語 🙂)",
        "ask.session_id": None,
        "ask.options": {"k": 12, "types": ("chunk", "memory"), "stream": False},
        "ask.history": [{"role": "user", "content": "hi"}],
        "loop.iteration": 2,
        "reflect.completeness": 0.75,
        "reflect.gaps": [],
        "retrieve.chunks": [hit],
        "grade.verdicts": [ChunkVerdict("c1", "CORRECT", 0.93, "relevant", None)],
        "generate.citations": [Citation(1, "c1", hit.text, 1.0, title=hit.title, page=5)],
        "judge.evaluation": evaluation,
        "decide.retrieve": True,
        "rewrite.query": "",
    }


class MindConformance:
    """Keys, typed round trips, replacement, missing keys, listing, isolation, threads."""

    def make_mind(self) -> Mind:
        """A fresh, empty mind of one run."""
        raise NotImplementedError

    def done(self, mind: Mind) -> None:
        """Let go of ``mind`` (the run is over)."""
        close = getattr(mind, "close", None)
        if callable(close):
            close()

    def _fresh(self) -> Mind:
        mind = self.make_mind()
        self._made = [*getattr(self, "_made", []), mind]
        return mind

    @pytest.fixture(autouse=True)
    def _let_go(self) -> Any:
        yield
        for mind in getattr(self, "_made", []):
            self.done(mind)
        self._made = []

    def test_values_come_back_equal_and_of_the_same_types(self) -> None:
        mind = self._fresh()
        values = sample_values()
        for key, value in values.items():
            mind.write(key, value)
        for key, value in values.items():
            got = mind.read(key)
            assert got == value, key
            assert type(got) is type(value), key
        (hit,) = mind.read("retrieve.chunks")
        assert isinstance(hit, Hit) and isinstance(hit.legs["dense"], LegScore)
        assert hit.tags == ("attention", "heads")
        assert isinstance(mind.read("ask.options")["types"], tuple)
        ev = mind.read("judge.evaluation")
        assert isinstance(ev, Evaluation) and isinstance(ev.sentences[0], SentenceSupport)

    def test_a_write_replaces(self) -> None:
        mind = self._fresh()
        mind.write("grade.verdicts", [1])
        mind.write("grade.verdicts", {"a": "b"})
        assert mind.read("grade.verdicts") == {"a": "b"}
        assert mind.list_keys() == ["grade.verdicts"]

    def test_a_missing_key_is_a_key_error_or_the_default(self) -> None:
        mind = self._fresh()
        with pytest.raises(KeyError):
            mind.read("retrieve.chunks")
        assert mind.read("retrieve.chunks", None) is None
        assert mind.read("retrieve.chunks", []) == []
        mind.write("decide.retrieve", False)
        assert mind.read("decide.retrieve", True) is False  # a falsy value is a value
        mind.write("rewrite.query", None)
        assert mind.read("rewrite.query", "default") is None

    @pytest.mark.parametrize(
        "key", ["", "nodot", "Tool.data", "tool.", ".data", "tool data.x", "tool.da-ta", 7]
    )
    def test_a_key_that_is_not_tool_data_is_refused(self, key: Any) -> None:
        mind = self._fresh()
        with pytest.raises(InvalidInput):
            mind.write(key, 1)
        assert mind.list_keys() == []

    def test_list_keys_is_sorted_and_by_prefix(self) -> None:
        mind = self._fresh()
        for key in ("retrieve.mode", "grade.verdicts", "retrieve.chunks", "retrieval.x"):
            mind.write(key, 1)
        assert mind.list_keys() == [
            "grade.verdicts",
            "retrieval.x",
            "retrieve.chunks",
            "retrieve.mode",
        ]
        assert mind.list_keys("retrieve.") == ["retrieve.chunks", "retrieve.mode"]
        assert mind.list_keys("none.") == []

    def test_two_runs_never_see_each_others_keys(self) -> None:
        one, two = self._fresh(), self._fresh()
        one.write("retrieve.mode", "graph")
        two.write("retrieve.mode", "hybrid")
        two.write("judge.score", 3)
        assert one.read("retrieve.mode") == "graph" and two.read("retrieve.mode") == "hybrid"
        assert one.list_keys() == ["retrieve.mode"]
        assert one.read("judge.score", None) is None

    def test_threads_write_and_read_at_once(self) -> None:
        mind = self._fresh()

        def work(n: int) -> list[Any]:
            got = []
            for i in range(30):
                mind.write(f"t{n}.k{i}", [n, i])
                got.append(mind.read(f"t{n}.k{i}"))
            return got

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(work, range(4)))
        for n, got in enumerate(results):
            assert got == [[n, i] for i in range(30)]
        assert len(mind.list_keys()) == 120
