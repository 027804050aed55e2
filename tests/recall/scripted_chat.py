"""Scripted chat-completions routes for :class:`kredenc.testing.openai_server.LoopbackServer`.

``chat_route(reply)`` answers ``POST /v1/chat/completions`` in OpenAI's shape: a
``chat.completion`` object, or with ``"stream": true`` server-sent events of
``chat.completion.chunk`` objects (one per piece of ``reply``) and ``data: [DONE]``.
``models_route()`` answers ``GET /v1/models``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kredenc.testing.openai_server import Reply, Request, Route

CREATED = 1_700_000_000


def completion(text: str, model: str = "scripted") -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def chunk(delta: dict[str, Any], finish: str | None = None, model: str = "scripted") -> bytes:
    event = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def sse_body(pieces: Sequence[str]) -> bytes:
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": p}) for p in pieces]
    events += [chunk({}, finish="stop"), b"data: [DONE]\n\n"]
    return b"".join(events)


def chat_route(reply: str = "Noted.", pieces: Sequence[str] | None = None) -> Route:
    """Answer with ``reply`` (streamed as ``pieces``, default: word by word)."""
    parts = list(pieces) if pieces is not None else [w + " " for w in reply.split()]

    def handle(request: Request) -> Reply:
        body = request.json()
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return Reply.error(400, "'messages' is required", "invalid_request_error")
        if body.get("stream"):
            return Reply.raw(sse_body(parts), content_type="text/event-stream")
        return Reply.json(completion(reply, str(body.get("model", "scripted"))))

    return handle


def models_route() -> Route:
    def handle(_request: Request) -> Reply:
        return Reply.json(
            {
                "object": "list",
                "data": [
                    {"id": "scripted", "object": "model", "created": CREATED, "owned_by": "me"}
                ],
            }
        )

    return handle


def sent_messages(request: Request) -> list[dict[str, Any]]:
    """The ``messages`` of a chat request the server received."""
    messages: list[dict[str, Any]] = request.json()["messages"]
    return messages
