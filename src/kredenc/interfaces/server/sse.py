"""Server-sent events: one event as the bytes of a ``text/event-stream`` response, and
the end of every open stream when the server shuts down."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

#: Headers of every event stream: never cached, never buffered by a reverse proxy.
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

#: How often a stream waiting for its next event looks whether the server is closing.
CLOSING_POLL_S = 0.1


def event(name: str, data: Any, event_id: int | None = None) -> bytes:
    """``event: name`` with ``data`` as one line of JSON (and an ``id`` to resume from)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}event: {name}\ndata: {body}\n\n".encode()


async def until_closing(
    events: AsyncIterator[bytes], closing: threading.Event, *, last: bytes | None = None
) -> AsyncIterator[bytes]:
    """``events`` until they end or ``closing`` is set, whichever comes first; on
    ``closing`` the wait for the next event is cancelled and ``last`` (if any) ends the
    stream. The server sets ``closing`` as it shuts down: it waits for every open
    response to finish, so a stream waiting on its next event would hold it open."""
    source = aiter(events)
    following: asyncio.Future[bytes] | None = None
    try:
        while not closing.is_set():
            following = asyncio.ensure_future(anext(source))
            while not following.done():
                await asyncio.wait({following}, timeout=CLOSING_POLL_S)
                if closing.is_set() and not following.done():
                    following.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await following
                    break
            if following.cancelled():
                break
            try:
                item = following.result()
            except StopAsyncIteration:
                return
            yield item
        if last is not None:
            yield last
    finally:
        # A client that left cancels this generator while the wait for the next event
        # still runs the source: stop that wait first, or closing the source raises
        # "aclose(): asynchronous generator is already running".
        if following is not None and not following.done():
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await following
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
