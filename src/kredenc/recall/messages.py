"""Chat messages as the reflex reads them, and the filing of a turn after the call.

Messages are OpenAI-style: dicts (or SDK objects) with a ``role`` and a ``content``
that is a string or a list of parts (only ``text`` parts are read).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kredenc.engine import Kredenc

log = logging.getLogger("kredenc.recall")


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


def file_turn(
    kb: Kredenc, session_id: str, turns: Sequence[Mapping[str, Any]], reply: str | None
) -> list[str]:
    """File this call's user message(s) and the model's reply as ``turn`` records
    (through the housekeeper, like every write). Never raises: filing happens after
    the model answered, and a turn that was answered must not fail for it."""
    items = [dict(t) for t in turns]
    if reply is not None and reply.strip():
        items.append({"role": "assistant", "content": reply})
    if not items:
        return []
    try:
        return kb.file_turns(session_id, items)
    except Exception as exc:  # noqa: BLE001 - filing must never break a turn that was answered
        log.warning(
            "filing the turn of session %s failed; it is not remembered: %s: %s",
            session_id,
            type(exc).__name__,
            exc,
        )
        return []
