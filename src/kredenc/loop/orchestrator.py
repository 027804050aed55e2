"""The orchestrator: an agent's pipeline of tools run on a fresh mind, then the Answer.

**observe**: the question, session, history and options are written on a fresh mind
of the configured backend (``mind_backend``: :func:`~kredenc.loop.mind.open_mind`,
in the process or in Redis; ``ask.*`` keys, the loop contract), deleted when the run
ends.
**execute**: the pipeline's tools run in order, each inside a tracing span when a
tracer is set, each timed into a :class:`~kredenc.loop.answer.Step`. A tool that
raises becomes a ``failed`` step (the tools after it see its outputs missing and
skip), one WARNING line (the traceback with INFO on: ``kredenc -v``), except for
``InvalidInput`` and ``MissingExtra``, a user's setting to fix, which fail the ask as
they are; a tool may write only under its own name (a write elsewhere fails it).
**iterate**: after the last tool, when ``reflect.sufficient`` was written False this
iteration, iterations are left and progress was made (new chunks in
``retrieve.chunks`` or a higher ``judge.evaluation`` confidence), the tools from the
agent's :meth:`~kredenc.loop.agents.Agent.repeat_from` on run again; otherwise the
loop stops and records why (``sufficient``, ``no progress``, ``budget``, ``no
reflection``). A repeat stops as soon as its tool that writes ``retrieve.chunks``
added none while ``reflect.focus`` is the one the previous iteration read (``no
progress``): the tools after it would only read again what they read before, and the
previous iteration's answer stands. The orchestrator knows no
tool by name: it reads the pipeline and the contract's keys.
**validate**: every key the pipeline's tools declare in ``writes`` should be on the
mind (a missing one is named in ``Answer.meta["missing"]``); without an answer text
(``generate.text``, blank counting as missing) the answer cannot be built, and the
ask fails with the failed steps' notes in the message.
**communicate**: the :class:`~kredenc.loop.answer.Answer` from the contract's keys.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from kredenc.errors import InvalidInput, KredencError, MissingExtra
from kredenc.loop.agents import Agent
from kredenc.loop.answer import Answer, ChunkVerdict, Citation, Step
from kredenc.loop.cache import Tally, counting, one_ask
from kredenc.loop.mind import LocalMind, Mind, check_key, open_mind
from kredenc.loop.tool import MISSING_INPUT, Services, Tool, ToolResult

log = logging.getLogger(__name__)

#: The contract's keys the orchestrator reads (docs/loop.md has the whole contract).
TEXT = "generate.text"
SUFFICIENT = "reflect.sufficient"
CHUNKS = "retrieve.chunks"
FOCUS = "reflect.focus"
EVALUATION = "judge.evaluation"


class ToolMind:
    """The mind as one tool sees it: writes only under ``<tool>.``, and each key
    written is noted (so the orchestrator knows what this iteration produced)."""

    def __init__(self, mind: Mind, tool: str, written: set[str]) -> None:
        self._mind = mind
        self._prefix = f"{tool}."
        self._tool = tool
        self._written = written
        self.read = mind.read  # reads are the mind's own (an ask makes ~60)

    def write(self, key: str, value: Any) -> None:
        if not check_key(key).startswith(self._prefix):
            raise PermissionError(
                f"tool {self._tool!r} wrote {key!r}: a tool writes only under its own name"
            )
        self._mind.write(key, value)
        self._written.add(key)

    def list_keys(self, prefix: str = "") -> list[str]:
        return self._mind.list_keys(prefix)


@dataclass
class Run:
    """What one ask's execution left: the mind, the steps, iterations and why it stopped."""

    mind: Mind
    steps: list[Step] = field(default_factory=list)
    iterations: int = 0
    stopped: str = ""
    failures: list[str] = field(default_factory=list)


def observe(
    question: str,
    *,
    session_id: str | None,
    history: Sequence[dict[str, str]],
    options: dict[str, Any],
    agent: Agent,
    mind: Mind | None = None,
) -> Mind:
    """``mind`` (a fresh :class:`LocalMind` when None) holding what the caller asked
    (the contract's ``ask.*`` keys)."""
    target: Mind = LocalMind() if mind is None else mind
    for key, value in {
        "ask.question": question,
        "ask.session_id": session_id,
        "ask.history": [dict(m) for m in history],
        "ask.options": dict(options),
        "ask.agent": agent.name,
        "ask.instructions": agent.instructions,
        "ask.model": agent.model,
        "loop.iteration": 1,
    }.items():
        target.write(key, value)
    return target


def _span(services: Services, name: str, **attrs: Any) -> AbstractContextManager[Any]:
    tracer = services.tracer
    return tracer.span(name, **attrs) if tracer is not None else nullcontext()


def _run_tool(
    tool: Tool, mind: Mind, services: Services, iteration: int, tally: Tally
) -> tuple[Step, set[str]]:
    written: set[str] = set()
    started = time.perf_counter()
    if services.tracer is None:  # tracing off: no span at all (the common, repeated path)
        result = _tool_result(tool, mind, services, written, tally)
    else:
        with services.tracer.span(f"tool.{tool.name}", tool=tool.name, iteration=iteration) as span:
            result = _tool_result(tool, mind, services, written, tally)
            if span is not None and hasattr(span, "set"):
                span.set(status=result.status, note=result.note)
    ms = result.ms or (time.perf_counter() - started) * 1000
    step = Step(
        tool=tool.name,
        status=result.status,
        ms=round(ms, 3),
        iteration=iteration,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost_usd=result.cost_usd,
        cache_hits=result.cache_hits,
        note=result.note,
        cache_misses=result.cache_misses,
    )
    return step, written


def _tool_result(
    tool: Tool, mind: Mind, services: Services, written: set[str], tally: Tally
) -> ToolResult:
    """The tool's run on its view of the mind, with the cache's hits and misses it
    made (what ``tally``, the run's count, gained meanwhile). ``InvalidInput`` and
    ``MissingExtra`` (a wrong setting, an extra not installed) pass through: the ask
    fails with that one line. Whatever else it raises is a ``failed`` result."""
    hits, misses = tally.hits, tally.misses
    try:
        result = tool.run(ToolMind(mind, tool.name, written), services)
        if not isinstance(result, ToolResult):
            raise TypeError(f"run() returned {type(result).__name__}, not a ToolResult")
        result.cache_hits += tally.hits - hits
        result.cache_misses += tally.misses - misses
    except (InvalidInput, MissingExtra):
        raise  # the user's to fix (a setting, an extra to install): the ask's own error
    # A tool is plugin code: whatever else it raises becomes a failed step in the trace
    # (one WARNING line; its traceback with -v), and the ask goes on without its outputs.
    except Exception as exc:
        log.warning(
            "tool %s failed: %s: %s",
            tool.name,
            type(exc).__name__,
            " ".join(str(exc).split()),
            exc_info=log.isEnabledFor(logging.INFO),
        )
        note = exc.message if isinstance(exc, KredencError) else f"{type(exc).__name__}: {exc}"
        result = ToolResult(status="failed", note=" ".join(str(note).split()))
    return result


def _barren(mind: Mind, chunks: set[str], focus: Any, now_focus: Any) -> bool:
    """A repeat that can change nothing: its retrieval added no chunk, and the focus
    reflect left for it is the one the previous iteration read (grade grades against
    the focus too), so the tools after retrieve would read what they read last time."""
    return not _chunk_ids(mind) - chunks and now_focus == focus


def _chunk_ids(mind: Mind) -> set[str]:
    chunks = mind.read(CHUNKS, None) or []
    return {str(getattr(c, "id", c)) for c in chunks}


def _confidence(mind: Mind) -> int | None:
    evaluation = mind.read(EVALUATION, None)
    score = getattr(evaluation, "confidence_score", None)
    return int(score) if isinstance(score, int | float) else None


def execute(
    agent: Agent,
    tools: Sequence[Tool],
    services: Services,
    mind: Mind,
    *,
    max_iterations: int,
) -> Run:
    """Run the pipeline on ``mind``, iterating as the module describes; the caller's
    ``on_step`` (``Services.options``, set by ``ask``) sees each step as it ends."""
    run = Run(mind)
    with counting() as tally:  # the cache's hits and misses; each tool's are its part
        _iterate(agent, tools, services, run, tally, max_iterations=max_iterations)
    return run


def _iterate(
    agent: Agent,
    tools: Sequence[Tool],
    services: Services,
    run: Run,
    tally: Tally,
    *,
    max_iterations: int,
) -> None:
    mind = run.mind
    on_step = services.options.get("on_step")
    start = 0
    chunks: set[str] = set()
    confidence: int | None = None
    focus: Any = None  # the focus the previous iteration's tools read
    for iteration in range(1, max_iterations + 1):
        mind.write("loop.iteration", iteration)
        run.iterations = iteration
        written: set[str] = set()
        barren = False
        now_focus = mind.read(FOCUS, None)
        for tool in tools[start:]:
            step, wrote = _run_tool(tool, mind, services, iteration, tally)
            run.steps.append(step)
            if on_step is not None:
                on_step(step)
            written |= wrote
            if step.status == "failed":
                run.failures.append(f"{tool.name}: {step.note}")
            if iteration > 1 and CHUNKS in wrote and _barren(mind, chunks, focus, now_focus):
                barren = True
                break
        focus = now_focus
        if barren:
            run.stopped = "no progress"
            break
        now_chunks, now_confidence = _chunk_ids(mind), _confidence(mind)
        progress = bool(now_chunks - chunks) or (
            now_confidence is not None and (confidence is None or now_confidence > confidence)
        )
        chunks, confidence = now_chunks, now_confidence
        if SUFFICIENT not in written:
            run.stopped = "no reflection"
            break
        if mind.read(SUFFICIENT) is not False:
            run.stopped = "sufficient"
            break
        if iteration == max_iterations:
            run.stopped = "budget"
            break
        if not progress:
            run.stopped = "no progress"
            break
        start = agent.repeat_from()


def validate(tools: Sequence[Tool], run: Run) -> list[str]:
    """The keys the pipeline's tools promise (``Tool.writes``) that are not on the mind;
    raises when the answer text is missing or blank (the answer cannot be built)."""
    present = set(run.mind.list_keys())
    missing = [k for tool in tools for k in tool.writes if k not in present]
    text = run.mind.read(TEXT, None)
    if not isinstance(text, str) or not text.strip():  # a blank answer is none
        if isinstance(text, str):
            why = f"{TEXT.partition('.')[0]} wrote an empty answer"
        else:
            why = (
                "; ".join(run.failures)
                or _skipped(tools, run)
                or f"no tool of the pipeline wrote {TEXT!r}"
            )
        raise KredencError(
            f"the answer could not be built: {why}",
            "see the log for the failed tool (kredenc -v), or check the agent's pipeline",
        )
    return missing


def _skipped(tools: Sequence[Tool], run: Run) -> str:
    """Why the tool that writes the answer text skipped, when it did: the inputs it
    lacked (its note, :data:`~kredenc.loop.tool.MISSING_INPUT`), and for an input no
    tool before it in the pipeline writes, which tool to add ('' when none skipped)."""
    names = [t.name for t in tools]
    writers = {t.name for t in tools if TEXT in t.writes}
    step = next(
        (s for s in reversed(run.steps) if s.status == "skipped" and s.tool in writers), None
    )
    if step is None:
        return ""
    if not step.note.startswith(MISSING_INPUT):
        return f"{step.tool} skipped: {step.note}"
    before = tools[: names.index(step.tool)]
    parts = []
    for key in step.note[len(MISSING_INPUT) :].split(", "):
        if any(key in t.writes for t in before):
            parts.append(f"it needs {key}, which the tools before it did not write")
        else:
            parts.append(
                f"it needs {key}, which no tool before it writes: add "
                f"{key.partition('.')[0]} before {step.tool}"
            )
    return f"{step.tool} skipped: {'; '.join(parts)}"


def communicate(
    agent: Agent, run: Run, *, question: str, session_id: str | None, missing: list[str]
) -> Answer:
    """The Answer from the contract's keys on the mind."""
    m = run.mind
    retrieved = m.read("decide.retrieve", None)
    if retrieved is None:
        retrieved = CHUNKS in m.list_keys()
    verdicts = m.read("verify.verdicts", None) or m.read("grade.verdicts", None) or []
    citations = m.read("generate.citations", None) or []
    return Answer(
        question=question,
        text=m.read(TEXT),
        citations=tuple(c for c in citations if isinstance(c, Citation)),
        verdicts=tuple(v for v in verdicts if isinstance(v, ChunkVerdict)),
        evaluation=m.read(EVALUATION, None),
        iterations=run.iterations,
        mode=str(m.read("retrieve.mode", "none")) if retrieved else "none",
        retrieved=bool(retrieved),
        standalone_query=str(m.read("rewrite.query", question)),
        session_id=session_id,
        trace=tuple(run.steps),
        gaps=tuple(str(g) for g in m.read("reflect.gaps", None) or ()),
        meta={
            "agent": agent.name,
            "stopped": run.stopped,
            "missing": missing,
            "completeness": m.read("reflect.completeness", None),
            "ms": round(sum(s.ms for s in run.steps), 3),
        },
    )


def run_agent(
    agent: Agent,
    tools: Sequence[Tool],
    services: Services,
    *,
    question: str,
    session_id: str | None = None,
    history: Sequence[dict[str, str]] = (),
    max_iterations: int = 3,
) -> Answer:
    """observe → execute → validate → communicate, inside an ``ask`` span."""
    options = {k: v for k, v in services.options.items() if not callable(v)}
    with (
        _span(services, "ask", agent=agent.name, ns=services.ns, session=session_id or ""),
        open_mind(services.settings) as fresh,
    ):
        mind = observe(
            question,
            session_id=session_id,
            history=history,
            options=options,
            agent=agent,
            mind=fresh,
        )
        with one_ask():  # text digests and generations, once per ask
            run = execute(agent, tools, services, mind, max_iterations=max_iterations)
        missing = validate(tools, run)
        return communicate(agent, run, question=question, session_id=session_id, missing=missing)


__all__ = ["Run", "ToolMind", "communicate", "execute", "observe", "run_agent", "validate"]
