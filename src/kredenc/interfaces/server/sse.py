"""Server-sent events: one event as the bytes of a ``text/event-stream`` response."""

from __future__ import annotations

import json
from typing import Any

#: Headers of every event stream: never cached, never buffered by a reverse proxy.
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(name: str, data: Any, event_id: int | None = None) -> bytes:
    """``event: name`` with ``data`` as one line of JSON (and an ``id`` to resume from)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}event: {name}\ndata: {body}\n\n".encode()
