"""Scripted chat-completion routes for :class:`~kredenc.testing.openai_server.LoopbackServer`:
the real OpenAI protocol on loopback, with replies a test chooses.

:func:`chat_completions_route` answers ``POST /v1/chat/completions`` from a script:
a ``chat.completion`` object with ``usage``, or with ``"stream": true`` server-sent
events of ``chat.completion.chunk`` objects (word by word), a usage chunk when
``stream_options.include_usage`` asks for it, and ``data: [DONE]``. It honours
``response_format`` as OpenAI does (``json_object`` needs the word "JSON" in the
messages; ``json_schema`` is refused with 400 by a server made with
``json_schema=False``), and a script item may be a :class:`Reply` (an error status,
a ``Retry-After``) for retry tests. :func:`chat_route` is the one-reply form,
:func:`models_route` answers ``GET /v1/models``::

    with LoopbackServer() as server:
        server.route("POST", "/v1/chat/completions", chat_completions_route(
            [Reply.error(429, "slow down", headers={"Retry-After": "0"}), {"ok": True}]))
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kredenc.providers.llm.structured import estimate_prompt_tokens, estimate_tokens
from kredenc.testing.openai_server import Reply, Request, Route

CREATED = 1_700_000_000
PATH = "/v1/chat/completions"

#: One scripted reply: text, a JSON object (sent as its JSON text), or a whole Reply.
ScriptItem = str | dict[str, Any] | list[Any] | Reply
#: A script: one reply for every request (text or an object), replies in turn (a
#: list), or a function of the request body.
Script = str | dict[str, Any] | Sequence[ScriptItem] | Callable[[dict[str, Any]], ScriptItem]


def completion(
    text: str,
    model: str = "scripted",
    usage: dict[str, int] | None = None,
    finish: str = "stop",
) -> dict[str, Any]:
    """A ``chat.completion`` object holding ``text``."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        ],
        **({"usage": usage} if usage is not None else {}),
    }


def chunk(delta: dict[str, Any], finish: str | None = None, model: str = "scripted") -> bytes:
    """One server-sent event holding a ``chat.completion.chunk``."""
    return event(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def event(obj: Any) -> bytes:
    """``obj`` as one ``data:`` event."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def words(text: str) -> list[str]:
    """``text`` cut into words with their following spaces; joined, they are ``text``."""
    return re.findall(r"\s+|\S+\s*", text) if text else []


def sse_body(
    pieces: Sequence[str],
    model: str = "scripted",
    usage: dict[str, int] | None = None,
    finish: str = "stop",
) -> bytes:
    """The events of a streamed reply: role, ``pieces``, finish, usage (if given), DONE."""
    events = [chunk({"role": "assistant", "content": ""}, model=model)]
    events += [chunk({"content": p}, model=model) for p in pieces]
    events.append(chunk({}, finish=finish, model=model))
    if usage is not None:
        events.append(
            event(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion.chunk",
                    "created": CREATED,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        )
    events.append(b"data: [DONE]\n\n")
    return b"".join(events)


def chat_completions_route(
    script: Script,
    *,
    json_schema: bool = True,
    usage: bool = True,
    model: str | None = None,
) -> Route:
    """``POST /v1/chat/completions`` answered from ``script``.

    ``script``: a string or an object (the reply to every request), a list (one item per
    request, in turn; past its end a 500 "script exhausted"), or a function of the
    request body. An item is text, a JSON object or array (sent as its JSON text), or
    a :class:`Reply` sent as it is. ``usage``: send token counts (estimated from the
    texts like :mod:`kredenc.providers.llm.structured`), or leave them out as some
    servers do. ``json_schema=False``: refuse ``response_format`` of type
    ``json_schema`` with 400, as a server without structured output does. ``model``:
    the model the replies name (default: the request's).
    """
    always: ScriptItem | None = script if isinstance(script, str | dict) else None
    items = list(script) if always is None and isinstance(script, Sequence) else None
    lock = threading.Lock()

    def next_item(body: dict[str, Any]) -> ScriptItem | None:
        if always is not None:
            return always
        if items is not None:
            with lock:
                return items.pop(0) if items else None
        assert callable(script)
        return script(body)

    def handle(request: Request) -> Reply:
        try:
            body = request.json()
        except ValueError:
            return Reply.error(400, "request body is not JSON", "invalid_request_error")
        problem = _check_request(body, json_schema)
        if problem:
            return Reply.error(400, problem, "invalid_request_error")
        item = next_item(body)
        if item is None:
            return Reply.error(500, "the scripted server has no reply left", "script_exhausted")
        if isinstance(item, Reply):
            return item
        text = item if isinstance(item, str) else json.dumps(item)
        named = model or str(body.get("model") or "scripted")
        counts = None
        if usage:
            prompt = estimate_prompt_tokens(body["messages"])
            written = estimate_tokens(text)
            counts = {
                "prompt_tokens": prompt,
                "completion_tokens": written,
                "total_tokens": prompt + written,
            }
        if body.get("stream"):
            options = body.get("stream_options") or {}
            wanted = counts if isinstance(options, dict) and options.get("include_usage") else None
            return Reply.raw(sse_body(words(text), named, wanted), content_type="text/event-stream")
        return Reply.json(completion(text, named, counts))

    return handle


def chat_route(reply: str = "Noted.", pieces: Sequence[str] | None = None) -> Route:
    """Answer every request with ``reply`` (streamed as ``pieces``, default word by
    word), with no usage: the simplest upstream, for proxy and wrap tests."""
    parts = list(pieces) if pieces is not None else [w + " " for w in reply.split()]

    def handle(request: Request) -> Reply:
        body = request.json()
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return Reply.error(400, "'messages' is required", "invalid_request_error")
        if body.get("stream"):
            return Reply.raw(sse_body(parts), content_type="text/event-stream")
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return Reply.json(completion(reply, str(body.get("model", "scripted")), usage))

    return handle


def models_route(ids: Sequence[str] = ("scripted",)) -> Route:
    """``GET /v1/models`` listing ``ids``."""

    def handle(_request: Request) -> Reply:
        return Reply.json(
            {
                "object": "list",
                "data": [
                    {"id": i, "object": "model", "created": CREATED, "owned_by": "me"} for i in ids
                ],
            }
        )

    return handle


def sent_messages(request: Request) -> list[dict[str, Any]]:
    """The ``messages`` of a chat request the server received."""
    messages: list[dict[str, Any]] = request.json()["messages"]
    return messages


def _check_request(body: Any, json_schema: bool) -> str:
    """What a real server would refuse in ``body``, or ''."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' is required"
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return "each message needs a 'role'"
    fmt = body.get("response_format")
    if fmt is None:
        return ""
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "json_object":
        said = " ".join(str(m.get("content", "")) for m in messages).lower()
        if "json" not in said:
            return (
                "'messages' must contain the word 'json' in some form, to use "
                "'response_format' of type 'json_object'."
            )
        return ""
    if kind == "json_schema":
        if not json_schema:
            return "'response_format' of type 'json_schema' is not supported with this model"
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            return "'response_format.json_schema.schema' is required"
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(spec.get("name", ""))):
            return "'response_format.json_schema.name' must match ^[a-zA-Z0-9_-]{1,64}$"
        return ""
    if kind == "text":
        return ""
    return f"invalid 'response_format.type': {kind!r}"


__all__ = [
    "CREATED",
    "PATH",
    "Script",
    "ScriptItem",
    "chat_completions_route",
    "chat_route",
    "chunk",
    "completion",
    "event",
    "models_route",
    "sent_messages",
    "sse_body",
    "words",
]
