"""The conversation side of the reflex: messages, sessions, and filing a turn.

Messages are OpenAI-style: dicts (or SDK objects) with a ``role`` and a ``content``
that is a string or a list of parts (only ``text`` parts are read). A session's start
is what the caller says, else when this process first saw it (:data:`SESSIONS`).
After the model answered, :func:`file_turn` files the call's user message(s) and the
reply as ``turn`` records.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kredenc.recall.deps import TurnSink

log = logging.getLogger("kredenc.recall")


class SessionClock:
    """When each session began, as first seen by this process.

    Bounded: past ``max_sessions`` the least recently seen session is forgotten (it
    would then start again at its next recall, which only widens what it may recall
    to its own earlier turns filed before that moment).
    """

    def __init__(self, max_sessions: int = 10_000) -> None:
        self.max_sessions = max_sessions
        self._starts: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, session_id: str, at: float | None = None) -> float:
        """The session's start: ``at`` when given (and remembered), else first seen."""
        with self._lock:
            if at is not None:
                self._starts[session_id] = float(at)
            elif session_id not in self._starts:
                self._starts[session_id] = time.time()
            self._starts.move_to_end(session_id)
            while len(self._starts) > self.max_sessions:
                self._starts.popitem(last=False)
            return self._starts[session_id]

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._starts.pop(session_id, None)


SESSIONS = SessionClock()


def message_field(message: Any, key: str) -> Any:
    """A message (or part) field, from a dict or an SDK object."""
    if isinstance(message, Mapping):
        return message.get(key)
    return getattr(message, key, None)


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, bytes | Mapping):
        parts = []
        for part in content:
            if message_field(part, "type") == "text" and isinstance(
                message_field(part, "text"), str
            ):
                parts.append(message_field(part, "text"))
        return "\n".join(parts)
    return ""


def newest_user_text(messages: Sequence[Any]) -> str:
    """The text of the last message whose role is ``user`` ("" when there is none)."""
    for message in reversed(messages):
        if message_field(message, "role") == "user":
            return content_text(message_field(message, "content"))
    return ""


def new_turns(messages: Sequence[Any]) -> list[dict[str, str]]:
    """The user messages after the last assistant message: what this call adds to the
    conversation (clients resend the whole history every call)."""
    out: list[dict[str, str]] = []
    for message in reversed(messages):
        role = message_field(message, "role")
        if role == "assistant":
            break
        if role == "user":
            text = content_text(message_field(message, "content"))
            if text.strip():
                out.append({"role": "user", "content": text})
    out.reverse()
    return out


def conversation_id(messages: Sequence[Any]) -> str:
    """A session id for a conversation that names none: a hash of its opening (the
    first system and the first user message), which every later call resends."""
    opening = []
    for role in ("system", "user"):
        for message in messages:
            if message_field(message, "role") == role:
                opening.append([role, content_text(message_field(message, "content"))])
                break
    digest = hashlib.sha256(json.dumps(opening, ensure_ascii=False).encode("utf-8"))
    return "conv-" + digest.hexdigest()[:16]


def turn_items(turns: Sequence[Mapping[str, Any]], reply: str | None) -> list[dict[str, Any]]:
    """What filing a call's turn files: its user message(s), then the model's reply
    (left out when it has no text)."""
    items = [dict(t) for t in turns]
    if reply is not None and reply.strip():
        items.append({"role": "assistant", "content": reply})
    return items


def file_turn(
    sink: TurnSink, session_id: str, turns: Sequence[Mapping[str, Any]], reply: str | None
) -> list[str]:
    """File this call's user message(s) and the model's reply as ``turn`` records into
    ``sink`` (the facade files them through the housekeeper, like every write). Never
    raises: filing happens after the model answered, and a turn that was answered must
    not fail for it."""
    items = turn_items(turns, reply)
    if not items:
        return []
    try:
        return sink.file_turns(session_id, items)
    except Exception as exc:  # noqa: BLE001 - filing must never break a turn that was answered
        log.warning(
            "filing the turn of session %s failed; it is not remembered: %s: %s",
            session_id,
            type(exc).__name__,
            exc,
        )
        return []
