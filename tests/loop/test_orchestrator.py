"""The orchestrator on a real store: the pipeline in order, iteration and why it stops,
failed tools in the trace, each tool's namespace on the mind, spans, and the Answer."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, KredencError, MissingExtra
from kredenc.loop.agents import Agent
from kredenc.loop.answer import Answer
from kredenc.loop.mind import Mind
from kredenc.loop.orchestrator import run_agent
from kredenc.loop.tool import Services, Tool, ToolResult

from ._finder import Decide, Generate, Judge, Reflect, Retrieve
from .conftest import Open

PIPELINE = ("decide", "retrieve", "generate", "judge", "reflect")


class Never(Reflect):
    """Never satisfied; asks for ``focus`` (none: the same search again)."""

    focus = ""

    def run(self, mind: Mind, services: Services) -> ToolResult:
        mind.write("reflect.sufficient", False)
        mind.write("reflect.focus", self.focus)
        mind.write("reflect.gaps", ["everything"])
        return ToolResult()


class Boom(Tool):
    name = "judge"

    def run(self, mind: Mind, services: Services) -> ToolResult:
        raise RuntimeError("the judge fell over")


class Trespass(Tool):
    name = "judge"

    def run(self, mind: Mind, services: Services) -> ToolResult:
        mind.write("generate.text", "overwritten")
        return ToolResult()


class Recorder:
    """A tracer: ``span(name, **attrs)`` as a context manager, recording each span."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, dict[str, Any]]] = []
        self.open: list[str] = []

    @contextmanager
    def span(self, name: str, **attrs: Any) -> Iterator[None]:
        self.spans.append((name, attrs))
        self.open.append(name)
        try:
            yield None
        finally:
            self.open.pop()


def answer(
    kb: Kredenc,
    tools: Sequence[Tool],
    question: str = "where does the heron nest",
    *,
    k: int = 1,
    max_iterations: int = 3,
    tracer: Any = None,
) -> Answer:
    agent = Agent(name="finder", tools=tuple(t.name for t in tools))
    services = Services(kb.store, kb.namespace, kb.settings, tracer=tracer, options={"k": k})
    return run_agent(agent, tools, services, question=question, max_iterations=max_iterations)


def default_tools() -> list[Tool]:
    return [Decide(), Retrieve(), Generate(), Judge(), Reflect()]


def test_one_pass_when_the_first_answer_is_sufficient(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, default_tools(), "where was the needle found", k=4)
    assert [s.tool for s in got.trace] == list(PIPELINE)
    assert all(s.status == "ok" and s.iteration == 1 and s.ms >= 0 for s in got.trace)
    assert "needle" in got.text and got.text.endswith("[1]")
    assert got.citations[0].n == 1 and "needle" in got.citations[0].text
    assert got.evaluation is not None and got.evaluation.confidence_score == 90
    assert (got.iterations, got.meta["stopped"], got.mode, got.retrieved) == (
        1,
        "sufficient",
        "hybrid",
        True,
    )
    generate = got.trace[2]
    assert (generate.prompt_tokens, generate.completion_tokens, generate.cost_usd) == (7, 3, 0.001)


def test_an_insufficient_answer_iterates_from_the_retrieval_side(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, default_tools(), k=1)
    # Iteration 1 finds the heron and reflect asks for the needle; the agent has no
    # rewrite, so iteration 2 repeats the whole pipeline, with the focus searched too.
    assert got.iterations == 2 and got.meta["stopped"] == "sufficient"
    assert [s.iteration for s in got.trace] == [1] * 5 + [2] * 5
    assert "needle" in got.text
    assert got.gaps == ()


def test_iteration_repeats_only_the_tools_after_rewrite(open_loop: Open) -> None:
    class Rewrite(Tool):
        name = "rewrite"

        def run(self, mind: Mind, services: Services) -> ToolResult:
            mind.write("rewrite.query", mind.read("ask.question"))
            return ToolResult()

    tools = [Decide(), Rewrite(), Retrieve(), Generate(), Judge(), Reflect()]
    with open_loop() as kb:
        got = answer(kb, tools, k=1)
    again = [s.tool for s in got.trace if s.iteration == 2]
    assert again == ["retrieve", "generate", "judge", "reflect"]
    assert got.standalone_query == "where does the heron nest"


def test_no_progress_stops_the_loop(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate(), Judge(), Never()], k=1)
    # Iteration 2 found no new chunk and no higher confidence.
    assert (got.iterations, got.meta["stopped"]) == (2, "no progress")
    assert got.gaps == ("everything",)


class Wander(Never):
    """Never satisfied; each iteration asks for another passage."""

    foci = ("needle", "lighthouse", "invoices")

    def run(self, mind: Mind, services: Services) -> ToolResult:
        self.focus = self.foci[int(mind.read("loop.iteration", 1)) - 1]
        return super().run(mind, services)


def test_the_budget_stops_the_loop(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate(), Judge(), Wander()], k=1)
        # 1: the heron; 2: the needle too; 3: the lighthouse too (progress each
        # time), the last one allowed.
        assert (got.iterations, got.meta["stopped"]) == (3, "budget")
        assert len(got.trace) == 15
        capped = answer(
            kb, [Decide(), Retrieve(), Generate(), Judge(), Wander()], k=1, max_iterations=2
        )
    assert (capped.iterations, capped.meta["stopped"]) == (2, "budget")


def test_a_repeat_that_retrieves_nothing_new_stops_after_retrieving(open_loop: Open) -> None:
    class Stuck(Never):
        focus = "needle"

    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate(), Judge(), Stuck()], k=1)
    # 1: the heron; 2: the needle too (progress); 3: the same searches, no new chunk:
    # it stops right after retrieve, and iteration 2's answer stands.
    assert (got.iterations, got.meta["stopped"]) == (3, "no progress")
    assert [s.tool for s in got.trace if s.iteration == 3] == ["decide", "retrieve"]
    assert [s.tool for s in got.trace if s.iteration == 2][-1] == "reflect"
    assert "needle" in got.text


def test_a_repeat_with_a_new_focus_runs_whole_though_it_retrieves_nothing_new(
    open_loop: Open,
) -> None:
    class Refocus(Never):
        focus = "heron"  # found by the question already: no new chunk, but a new focus

    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate(), Judge(), Refocus()], k=1)
    # The tools after retrieve read reflect's focus too (grade grades against it from the
    # second iteration on), so iteration 2 runs whole; it then made no progress.
    assert [s.tool for s in got.trace if s.iteration == 2] == list(PIPELINE)
    assert (got.iterations, got.meta["stopped"]) == (2, "no progress")


def test_without_reflect_one_pass(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate()], k=1)
    assert (got.iterations, got.meta["stopped"], got.evaluation) == (1, "no reflection", None)


def test_a_failing_tool_is_a_failed_step_and_the_answer_still_comes(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate(), Boom(), Reflect()], k=4)
    judge = got.trace[3]
    assert (judge.tool, judge.status) == ("judge", "failed")
    assert judge.note == "RuntimeError: the judge fell over"
    assert got.evaluation is None and "needle" in got.text


def test_a_failing_tool_is_one_warning_line_and_its_traceback_only_when_verbose(
    open_loop: Open, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [Decide(), Retrieve(), Generate(), Boom(), Reflect()]
    with open_loop() as kb:
        caplog.set_level(logging.WARNING)
        answer(kb, tools, k=4)
        (record,) = [r for r in caplog.records if r.name == "kredenc.loop.orchestrator"]
        assert record.levelno == logging.WARNING and not record.exc_info
        assert record.getMessage() == "tool judge failed: RuntimeError: the judge fell over"
        caplog.clear()
        caplog.set_level(logging.INFO)  # kredenc -v
        answer(kb, tools, k=4)
        (record,) = [r for r in caplog.records if r.name == "kredenc.loop.orchestrator"]
        assert record.exc_info and record.exc_info[0] is RuntimeError


@pytest.mark.parametrize("error", [InvalidInput("role_x is 'llm' but no LLM is configured"),
                                   MissingExtra("the onnx reranker", "onnx")])  # fmt: skip
def test_a_users_configuration_error_in_a_tool_is_the_asks_error(
    open_loop: Open, error: KredencError
) -> None:
    """A wrong setting is the user's to fix: the ask fails with that one line (the
    CLI's exit 2 for InvalidInput), not with a failed step and a traceback."""

    class Misconfigured(Retrieve):
        def run(self, mind: Mind, services: Services) -> ToolResult:
            raise error

    with open_loop() as kb, pytest.raises(type(error)) as err:
        answer(kb, [Decide(), Misconfigured(), Generate()], k=4)
    assert err.value is error


def test_a_tool_may_write_only_under_its_own_name(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate(), Trespass()], k=4)
    assert got.trace[3].status == "failed"
    assert "wrote 'generate.text'" in got.trace[3].note
    assert got.text != "overwritten"


def test_no_answer_text_fails_with_the_reason_and_a_hint(open_loop: Open) -> None:
    class Broken(Generate):
        def run(self, mind: Mind, services: Services) -> ToolResult:
            raise ValueError("no model")

    with open_loop() as kb, pytest.raises(KredencError) as err:
        answer(kb, [Decide(), Retrieve(), Broken()], k=4)
    assert err.value.message == "the answer could not be built: generate: ValueError: no model"
    assert err.value.hint


def test_a_generator_skipped_for_an_input_no_tool_writes_is_named(open_loop: Open) -> None:
    """No tool failed: the error says which tool skipped, what it lacked, and the fix."""
    from kredenc.loop.roles.generate import Generate as RealGenerate

    with open_loop() as kb, pytest.raises(KredencError) as err:
        answer(kb, [Decide(), Retrieve(), RealGenerate()], k=4)
    assert err.value.message == (
        "the answer could not be built: generate skipped: it needs verify.kept, which no "
        "tool before it writes: add verify before generate"
    )


def test_a_blank_answer_text_is_no_answer(open_loop: Open) -> None:
    class Blank(Generate):
        def run(self, mind: Mind, services: Services) -> ToolResult:
            mind.write("generate.text", " \n ")
            return ToolResult()

    with open_loop() as kb, pytest.raises(KredencError) as err:
        answer(kb, [Decide(), Retrieve(), Blank()], k=4)
    assert err.value.message == "the answer could not be built: generate wrote an empty answer"


def test_promised_keys_that_are_missing_are_named(open_loop: Open) -> None:
    with open_loop() as kb:
        got = answer(kb, [Decide(), Retrieve(), Generate(), Judge()], "hello", k=4)
    # A greeting: nothing retrieved, so retrieve's promises are not kept.
    assert got.retrieved is False and got.mode == "none" and got.text == "Hello!"
    assert got.meta["missing"] == ["retrieve.chunks", "retrieve.mode"]
    assert [s.status for s in got.trace] == ["ok", "skipped", "ok", "ok"]


def test_every_tool_runs_inside_the_ask_span(open_loop: Open) -> None:
    tracer = Recorder()

    class Peek(Judge):
        def run(self, mind: Mind, services: Services) -> ToolResult:
            assert tracer.open == ["ask", "tool.judge"]
            return super().run(mind, services)

    with open_loop() as kb:
        answer(kb, [Decide(), Retrieve(), Generate(), Peek()], k=4, tracer=tracer)
    assert [name for name, _ in tracer.spans] == [
        "ask",
        "tool.decide",
        "tool.retrieve",
        "tool.generate",
        "tool.judge",
    ]
    assert tracer.spans[1][1] == {"tool": "decide", "iteration": 1}
    assert tracer.spans[0][1]["agent"] == "finder"
