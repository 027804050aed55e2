"""Recall before, filing after: ``kredenc.wrap(client, kb)`` for the OpenAI SDK.

``kb`` is what the wrapper recalls from and files into: anything shaped like
:class:`~kredenc.recall.deps.Conversant` (the ``Kredenc`` facade is one). ``wrap``
replaces ``client.chat.completions.create`` on that client (sync ``OpenAI``
or async ``AsyncOpenAI``, or any client shaped like them) and returns the client:

* before the call, ``kb.recall`` (:func:`~kredenc.recall.reflex.recall`) appends one
  message (role ``recall_role``: ``system`` by default) with the memories the newest
  user message calls for, as an envelope of data (:mod:`kredenc.recall.render`);
* after it, the call's user message(s) and the model's reply are filed as ``turn``
  records. With ``stream=True`` the chunks pass through untouched, as they arrive;
  the reply is filed when the stream ends, and only when it ended properly (a
  ``finish_reason``, or the SDK's end of the stream): one closed before that is not
  the answer and is not filed as one (the user's message(s) are), as in the proxy.

Neither step can break the call: recall returns the messages unchanged on any failure,
and a failed filing is a WARNING. The async client runs both steps in a worker thread
so they never block the event loop; both clients share one implementation.

Each call's session is ``session_id``, else the ``kredenc_session_id`` keyword of that
call (taken out before the SDK sees it), else an id derived from the conversation's
opening messages (:func:`~kredenc.recall.conversation.conversation_id`).

Only ``chat.completions.create`` is wrapped: ``with_raw_response``,
``with_streaming_response``, ``parse`` and clients made by ``with_options`` or ``copy``
go straight to the SDK.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kredenc.errors import InvalidInput
from kredenc.recall.budget import Budget
from kredenc.recall.conversation import conversation_id, file_turn, message_field, new_turns
from kredenc.recall.deps import Conversant
from kredenc.recall.reflex import announce, warm_up

log = logging.getLogger("kredenc.recall")

C = TypeVar("C")
SESSION_KEYWORD = "kredenc_session_id"
_MARK = "_kredenc_wrapped"


@dataclass
class _Call:
    """One call between its recall and its filing."""

    session_id: str
    turns: list[dict[str, str]]
    parts: list[str] = field(default_factory=list)
    filed: bool = False
    finished: bool = False  # the stream ended properly: its reply is the answer

    def read(self, chunk: Any) -> None:
        """One streamed chunk: its first choice's text, and whether it finishes."""
        for choice in message_field(chunk, "choices") or []:
            if message_field(choice, "index") in (0, None):
                content = message_field(message_field(choice, "delta"), "content")
                self.parts.append(content if isinstance(content, str) else "")
                if message_field(choice, "finish_reason"):
                    self.finished = True
                return

    def reply(self) -> str | None:
        """What to file as the reply: None for a stream closed before it finished."""
        return "".join(self.parts) if self.finished else None


class _Reflex:
    """The sync core both clients share: ``before`` edits the call, ``after`` files it."""

    def __init__(
        self,
        kb: Conversant,
        session_id: str | None,
        budget: Budget | Mapping[str, Any] | None,
        dry_run: bool | None,
        time_budget_ms: float | None,
        file: bool,
    ) -> None:
        self.kb = kb
        self.session_id = session_id
        self.budget = budget
        self.dry_run = dry_run
        self.time_budget_ms = time_budget_ms
        self.file = file

    def before(self, kwargs: dict[str, Any]) -> _Call:
        session = kwargs.pop(SESSION_KEYWORD, None) or self.session_id
        messages = kwargs.get("messages")
        if not isinstance(messages, list | tuple):
            return _Call(str(session or "unknown"), [])
        session = str(session or conversation_id(messages))
        result = self.kb.recall(
            messages,
            session_id=session,
            budget=self.budget,
            dry_run=self.dry_run,
            time_budget_ms=self.time_budget_ms,
        )
        if result.injected:
            kwargs["messages"] = result.messages
        return _Call(session, new_turns(messages))

    def after(self, call: _Call, reply: str | None) -> None:
        if call.filed or not self.file:
            return
        call.filed = True
        file_turn(self.kb, call.session_id, call.turns, reply)


def wrap(
    client: C,
    kb: Conversant,
    *,
    session_id: str | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    dry_run: bool | None = None,
    time_budget_ms: float | None = None,
    file_turns: bool = True,
    warm: bool = True,
) -> C:
    """Add recall and filing to ``client.chat.completions.create``; returns ``client``.

    ``kb`` is the open store to recall from and file into (``kredenc.wrap`` opens the
    default store when it is left out).
    ``budget``, ``dry_run`` and ``time_budget_ms`` default to the store's settings;
    ``file_turns=False`` recalls without filing. ``warm`` loads the embedding model and
    the vectors now (about a second), so that the first call's recall fits its time
    budget. Wrapping a client twice is refused.
    """
    completions: Any = client.chat.completions  # type: ignore[attr-defined]
    if getattr(completions, _MARK, False):
        raise InvalidInput("this client is already wrapped", "wrap each client once")
    original: Callable[..., Any] = completions.create
    reflex = _Reflex(kb, session_id, budget, dry_run, time_budget_ms, file_turns)
    if _is_async(original):

        async def acreate(*args: Any, **kwargs: Any) -> Any:
            call = await asyncio.to_thread(reflex.before, kwargs)
            response = await original(*args, **kwargs)
            if kwargs.get("stream"):
                return _AsyncFilingStream(response, reflex, call)
            await asyncio.to_thread(reflex.after, call, _reply_text(response))
            return response

        completions.create = acreate
    else:

        def create(*args: Any, **kwargs: Any) -> Any:
            call = reflex.before(kwargs)
            response = original(*args, **kwargs)
            if kwargs.get("stream"):
                return _FilingStream(response, reflex, call)
            reflex.after(call, _reply_text(response))
            return response

        completions.create = create
    setattr(completions, _MARK, reflex)
    if warm:
        warm_up(kb.store)
    announce(kb.store, kb.namespace, budget=budget, dry_run=dry_run, time_budget_ms=time_budget_ms)
    return client


def _is_async(create: Callable[..., Any]) -> bool:
    """Whether ``create`` is a coroutine function (the SDK's decorators hide it)."""
    return inspect.iscoroutinefunction(inspect.unwrap(create)) or type(
        getattr(create, "__self__", None)
    ).__name__.startswith("Async")


def _reply_text(response: Any) -> str | None:
    """The text of the first choice of a chat completion (``None`` without text)."""
    choices = message_field(response, "choices") or []
    for choice in choices:
        if message_field(choice, "index") in (0, None):
            content = message_field(message_field(choice, "message"), "content")
            return content if isinstance(content, str) else None
    return None


class _FilingStream:
    """The SDK's stream, chunk for chunk; files the call when it ends or is closed (the
    reply only when the stream finished)."""

    def __init__(self, stream: Any, reflex: _Reflex, call: _Call) -> None:
        self._stream = stream
        self._reflex = reflex
        self._call = call
        self._iter: Any = None

    def __iter__(self) -> _FilingStream:
        return self

    def __next__(self) -> Any:
        if self._iter is None:
            self._iter = iter(self._stream)
        try:
            chunk = next(self._iter)
        except StopIteration:
            self._call.finished = True
            self._finish()
            raise
        self._call.read(chunk)
        return chunk

    def __enter__(self) -> _FilingStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._finish()

    def _finish(self) -> None:
        self._reflex.after(self._call, self._call.reply())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _AsyncFilingStream:
    """The async SDK stream, chunk for chunk; files the call when it ends or is closed
    (the reply only when the stream finished)."""

    def __init__(self, stream: Any, reflex: _Reflex, call: _Call) -> None:
        self._stream = stream
        self._reflex = reflex
        self._call = call
        self._iter: Any = None

    def __aiter__(self) -> _AsyncFilingStream:
        return self

    async def __anext__(self) -> Any:
        if self._iter is None:
            self._iter = self._stream.__aiter__()
        try:
            chunk = await self._iter.__anext__()
        except StopAsyncIteration:
            self._call.finished = True
            await self._finish()
            raise
        self._call.read(chunk)
        return chunk

    async def __aenter__(self) -> _AsyncFilingStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        try:
            await self._stream.close()
        finally:
            await self._finish()

    async def _finish(self) -> None:
        if not self._call.filed:
            await asyncio.to_thread(self._reflex.after, self._call, self._call.reply())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
