"""``POST /ask``: a question through an agent, answered as JSON or streamed.

With ``stream: true`` or ``Accept: text/event-stream`` the answer comes as
server-sent events, in this order: ``step`` (each step of the trace as it ends, a
``Step``), ``delta`` (``{"text": ...}``, the answer's text as it is generated; one
event with the whole text when the generator does not stream), then ``answer`` (the
``Answer``) or ``error`` (the one error shape), and the stream ends. The question,
session and agent are checked before the stream starts, so a bad one is a plain 422.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import Field

from kredenc.engine import Kredenc
from kredenc.errors import KredencError
from kredenc.interfaces.server import sse
from kredenc.interfaces.server.deps import KB, State
from kredenc.interfaces.server.limits import check_request
from kredenc.interfaces.server.routes.body import Body
from kredenc.loop.answer import Answer, Step
from kredenc.loop.ask import check_ask
from kredenc.wire import to_wire

log = logging.getLogger("kredenc.server")

router = APIRouter(tags=["ask"])

SSE = "text/event-stream"
#: One event of the stream, as the OpenAPI document describes it (its data is JSON:
#: a Step, {"text"}, the Answer or the error shape, by event).
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["step", "delta", "answer", "error"]},
        "data": {"type": "string", "description": "the event's JSON"},
    },
    "required": ["event", "data"],
}


class AskRequest(Body):
    question: str = Field(min_length=1)
    session_id: str | None = Field(None, min_length=1, max_length=200)
    k: int | None = Field(None, ge=1, le=200)
    agent: str = Field("answer", min_length=1, max_length=200)
    stream: bool = False


#: The last event of a stream cut short because the server shuts down.
SHUTTING_DOWN = sse.event(
    "error",
    {
        "error": {
            "code": "shutting_down",
            "message": "the server is shutting down: the stream ended before the answer",
            "hint": "ask again when the server is back",
        }
    },
)


def error_detail(exc: BaseException) -> dict[str, Any]:
    """The one error shape for a failure inside a stream (internals never named)."""
    if isinstance(exc, KredencError):
        return {"error": exc.to_dict()}
    return {
        "error": {
            "code": "internal_error",
            "message": "the server failed on this request",
            "hint": "the server log has the details; report it if it happens again",
        }
    }


async def stream_answer(kb: Kredenc, body: AskRequest) -> AsyncIterator[bytes]:
    """Run the ask in a worker thread; hand its steps and text on as they come."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    streamed = False

    def put(item: bytes | None) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def on_delta(text: str) -> None:
        nonlocal streamed
        if text:
            streamed = True
            put(sse.event("delta", {"text": text}))

    def on_step(step: Step) -> None:
        put(sse.event("step", to_wire(step)))

    def work() -> None:
        try:
            answer = kb.ask(
                body.question, session_id=body.session_id, k=body.k, agent=body.agent,
                stream=True, on_delta=on_delta, on_step=on_step,
            )  # fmt: skip
            if not streamed and answer.text:
                put(sse.event("delta", {"text": answer.text}))
            put(sse.event("answer", to_wire(answer)))
        except Exception as exc:  # the stream has started: the error is its last event
            if not isinstance(exc, KredencError):
                log.exception("fault in a streamed ask", exc_info=exc)
            put(sse.event("error", error_detail(exc)))
        finally:
            put(None)

    # A client that leaves mid-stream cancels this generator, not the ask: the worker
    # thread runs to its end (and files the session's turns).
    running = asyncio.ensure_future(anyio.to_thread.run_sync(work))
    while (item := await queue.get()) is not None:
        yield item
    await running


@router.post(
    "/ask",
    response_model=Answer,
    responses={
        200: {
            "description": "the Answer, or with stream=true the events step, delta, answer | error",
            "content": {SSE: {"schema": EVENT_SCHEMA}},
        }
    },
)
def ask(body: AskRequest, request: Request, kb: KB, state: State) -> Answer | Response:
    """Answer a question from the caller's documents and memories, with citations."""
    check_request(state.limits, k=body.k, text=body.question, what="question")
    if body.stream or SSE in request.headers.get("accept", ""):
        check_ask(kb.settings, body.question, body.session_id, body.agent)  # before the stream
        return StreamingResponse(
            sse.until_closing(stream_answer(kb, body), state.closing, last=SHUTTING_DOWN),
            media_type=SSE,
            headers=sse.HEADERS,
        )
    return kb.ask(body.question, session_id=body.session_id, k=body.k, agent=body.agent)
