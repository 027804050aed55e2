"""``ask``: one question through an agent, with the session around it.

The entry the facade (``Kredenc.ask``) calls: the agent is found (shipped agents and
``agents_dir``), planned into tools (the ``kredenc.tools`` plugins and ``tools_dir``),
run by the orchestrator on a fresh mind with the session's history, and the
question and answer are filed as the session's next turns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kredenc.checks import check_text
from kredenc.errors import InvalidInput
from kredenc.loop import sessions
from kredenc.loop.agents import library_for
from kredenc.loop.orchestrator import run_agent
from kredenc.loop.registry import registry_for
from kredenc.loop.tool import Services
from kredenc.memory.turns import TurnFiler
from kredenc.records import new_id

if TYPE_CHECKING:
    from kredenc.loop.agents import Agent
    from kredenc.loop.answer import Answer, Step
    from kredenc.loop.tool import Tool
    from kredenc.storage.store import Store

#: The options an ask takes, and what each must be (the roles read them from
#: ``ask.options`` on the mind and ``Services.options``).
OPTIONS: dict[str, str] = {
    "k": "chunks retrieved per query (1-200; default: the ask_k setting)",
    "context_k": "chunks handed to the generator (1-50; default: ask_context_k)",
    "max_iterations": "most iterations (1-10; default: the agent's, else ask_max_iterations)",
    "mode": "search legs: hybrid, lexical or dense",
    "hops": "graph hops of retrieval (0-3)",
    "rerank": "a reranker name ('' for none; default: the rerank setting)",
    "stream": "stream the answer text to on_delta as it is generated",
    "drawer": "search only this drawer",
    "retrieve_mode": "the retrieval mode: hybrid, reranked, graph or iterative (else chosen)",
    "types": "record types retrieve searches (default chunk and memory: not turns)",
}
#: What retrieve searches unless the caller says otherwise: documents' chunks and
#: memories. Not turns: the loop files every question and answer as a turn, and a
#: repeated question would otherwise retrieve (and could cite) its own earlier answer.
DEFAULT_TYPES = ("chunk", "memory")
_TYPES = ("chunk", "memory", "turn")
_RANGES = {"k": (1, 200), "context_k": (1, 50), "max_iterations": (1, 10), "hops": (0, 3)}
_MODES = ("hybrid", "lexical", "dense")
_RETRIEVE_MODES = ("hybrid", "reranked", "graph", "iterative")


def check_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options with defaults left out; a wrong one is InvalidInput naming it."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        if key not in OPTIONS:
            raise InvalidInput(f"unknown ask option {key!r}", f"options: {', '.join(OPTIONS)}")
        if key in _RANGES:
            low, high = _RANGES[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidInput(f"ask option {key} must be a whole number from {low} to {high}")
        elif key == "mode" and value not in _MODES:
            raise InvalidInput(f"ask option mode must be one of {', '.join(_MODES)}")
        elif key == "retrieve_mode" and value not in _RETRIEVE_MODES:
            raise InvalidInput(
                f"ask option retrieve_mode must be one of {', '.join(_RETRIEVE_MODES)}"
            )
        elif key == "stream" and not isinstance(value, bool):
            raise InvalidInput("ask option stream must be true or false")
        elif key == "types":
            if isinstance(value, str) or not all(t in _TYPES for t in value) or not value:
                raise InvalidInput(f"ask option types must be a list of: {', '.join(_TYPES)}")
            out[key] = tuple(value)
            continue
        elif key in ("rerank", "drawer") and not isinstance(value, str):
            raise InvalidInput(f"ask option {key} must be text")
        out[key] = value
    return out


def check_ask(
    settings: Any, question: object, session_id: object, agent: str
) -> tuple[str, str | None, Agent]:
    """The question, session id and agent of an ask, checked (InvalidInput naming
    what is wrong): what a streaming caller checks before its stream starts."""
    if not isinstance(question, str) or not question.strip():
        raise InvalidInput("the question is empty", "ask something")
    question = check_text(question, settings.max_text_chars)
    session = None if session_id is None else sessions.check_session(session_id)
    return question, session, library_for(settings.agents_dir).get(agent)


_PLANS: dict[tuple[int, int, int], tuple[Any, Any, Any, list[Tool]]] = {}
_PLANS_MAX = 64


def _planned(agent: Agent, settings: Any) -> list[Tool]:
    """``agent.plan(registry, settings)``, built once per agent, registry and settings
    object while no tools folder is set (tools are stateless, so one instance serves
    every ask). A changed agent file is a new Agent, new plugins a new registry; a
    tools folder is planned on each ask (its files are re-read when they change)."""
    registry = registry_for(settings.tools_dir)
    if settings.tools_dir is not None:
        return agent.plan(registry, settings)
    key = (id(agent), id(registry), id(settings))
    found = _PLANS.get(key)
    if found is not None and found[0] is agent and found[1] is registry and found[2] is settings:
        return list(found[3])
    tools = agent.plan(registry, settings)
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    _PLANS[key] = (agent, registry, settings, tools)  # held: their ids stay theirs
    return list(tools)


def ask(
    store: Store,
    ns: str,
    question: str,
    *,
    session_id: str | None = None,
    agent: str = "answer",
    llm: Any = None,
    cache: Any = None,
    tracer: Any = None,
    turns: TurnFiler | None = None,
    on_delta: Callable[[str], None] | None = None,
    on_step: Callable[[Step], None] | None = None,
    file: bool = True,
    defer: Callable[..., object] | None = None,
    **options: Any,
) -> Answer:
    """Answer ``question`` with the agent ``agent`` in namespace ``ns``.

    With ``session_id`` the session's last messages are the history the agent sees,
    and the question and answer are filed as its next turns; without one they are
    filed under a one-off session (so memory and recall see them; no later ask reads
    them as history). ``file=False`` (or a read-only store) files nothing. ``turns``
    is the caller's :class:`TurnFiler` (the facade's, so filed turns carry the
    preceding ones as context). ``defer(what, job, into=store)``, when given, takes the
    filing off the answer's path: the turns' ids are made now (``answer.meta["filed"]``)
    and ``job`` makes their payloads later on the caller's filing thread, which writes
    them into ``store`` with the filings queued beside them, in one batch (the
    facade's thread, which a later ask of the same session waits for before it reads
    the history). ``on_delta`` receives the answer's text as it is generated when a
    streaming generator supports it (``stream=True``); ``on_step`` each step of the
    trace as it ends (a live view of the run). The other ``options`` are :data:`OPTIONS`.
    """
    settings = store.settings
    question, session_id, found = check_ask(settings, question, session_id, agent)
    opts = check_options(options)
    tools = _planned(found, settings)
    history = (
        sessions.history(store, ns, session_id, settings.ask_session_turns)
        if session_id is not None and settings.ask_session_turns
        else []
    )
    opts.setdefault("k", settings.ask_k)
    opts.setdefault("context_k", settings.ask_context_k)
    opts.setdefault("types", DEFAULT_TYPES)
    opts.setdefault("max_iterations", found.max_iterations or settings.ask_max_iterations)
    service_options: dict[str, Any] = dict(opts)
    if on_delta is not None:
        service_options["on_delta"] = on_delta
    if on_step is not None:
        service_options["on_step"] = on_step
    if tracer is not None and not getattr(tracer, "enabled", True):
        tracer = None  # tracing off: no span objects at all, per tool or per cached role
    services = Services(
        store=store,
        ns=ns,
        settings=settings,
        llm=llm,
        cache=cache,
        tracer=tracer,
        options=service_options,
    )
    answer = run_agent(
        found,
        tools,
        services,
        question=question,
        session_id=session_id,
        history=history,
        max_iterations=int(opts["max_iterations"]),
    )
    if file and not store.read_only:
        filed_in = session_id or sessions.one_off_session()
        filer = turns or TurnFiler()
        seed = [m["content"] for m in history]
        if defer is None:
            if seed:
                filer.seed(ns, filed_in, seed)
            ids = sessions.record(filer, store, ns, filed_in, question, answer)
        else:
            said = sessions.turns_of(question, answer)
            ids = [new_id("turn") for _ in said]

            def job() -> list[dict[str, Any]]:
                with store.gate:  # a closed store refuses it (a WARNING on the filer)
                    if seed:
                        filer.seed(ns, filed_in, seed)
                    return filer.prepare(store, ns, filed_in, said, drawer=sessions.DRAWER, ids=ids)

            defer(f"ask turns of session {filed_in}", job, into=store)
        answer.meta["filed"] = {"session": filed_in, "ids": ids}
    return answer


__all__ = ["DEFAULT_TYPES", "OPTIONS", "ask", "check_ask", "check_options"]
