"""Event streams and the server's shutdown (interfaces/server/sse.py): a stream a client
holds open (an ask's, a job's progress) ends when the server stops, so the server exits
at once instead of waiting for the stream; an ask's stream says why it ended."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from kredenc.engine import Kredenc
from kredenc.interfaces.server import sse
from kredenc.interfaces.server.jobs import Event
from kredenc.interfaces.server.run import ServerThread
from kredenc.interfaces.server.state import ServerConfig
from kredenc.loop.answer import Step
from kredenc.testing.embedders import HashEmbedder


async def _ticks(n: int, gap_s: float) -> AsyncIterator[bytes]:
    for i in range(n):
        yield sse.event("tick", {"i": i})
        await asyncio.sleep(gap_s)


def test_a_stream_runs_to_its_end_unless_closing_is_set() -> None:
    async def collect(gap_s: float, close_after_s: float | None) -> list[bytes]:
        closing = threading.Event()
        if close_after_s is not None:
            asyncio.get_running_loop().call_later(close_after_s, closing.set)
        cut = sse.until_closing(_ticks(3, gap_s), closing, last=b"end")
        return [item async for item in cut]

    assert len(asyncio.run(collect(0.01, None))) == 3  # it ended by itself: no ``last``
    started = time.monotonic()
    cut = asyncio.run(collect(10.0, 0.2))  # the wait for the second tick is cut
    assert cut == [sse.event("tick", {"i": 0}), b"end"]
    assert time.monotonic() - started < 2.0


def test_a_client_that_leaves_mid_stream_closes_it_cleanly() -> None:
    """A day-one audit: leaving a streamed /ask early logged "aclose(): asynchronous
    generator is already running" as a fault. Cancelling the consumer while it waits
    for the next event (what the server does when the client goes) closes the source
    once, without an error."""
    closed: list[str] = []

    async def source() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            await asyncio.sleep(30)  # the ask still working
            yield b"never"
        finally:
            closed.append("source")

    async def leave() -> list[bytes]:
        got: list[bytes] = []
        cut = sse.until_closing(source(), threading.Event(), last=b"end")

        async def consume() -> None:
            async for item in cut:
                got.append(item)

        reader = asyncio.ensure_future(consume())
        await asyncio.sleep(0.2)  # the first event is out; the next is awaited
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        await cut.aclose()
        return got

    assert asyncio.run(leave()) == [b"first"]
    assert closed == ["source"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerThread, str]]:
    with Kredenc.open(tmp_path / "store", embedder=HashEmbedder(), durability="none") as kb:
        thread = ServerThread(kb, ServerConfig(mcp=False, web=False))
        url = thread.__enter__()
        try:
            yield thread, url
        finally:
            thread.__exit__(None, None, None)


def _read_stream(
    url: str, method: str, path: str, **request: Any
) -> tuple[threading.Thread, list[str], threading.Event]:
    """Read a stream in a thread: its ``event:`` names, and an event set at the first."""
    names: list[str] = []
    first = threading.Event()

    def read() -> None:
        with (
            httpx.Client(base_url=url, timeout=30) as client,
            client.stream(method, path, **request) as response,
        ):
            for line in response.iter_lines():
                if line.startswith("event: "):
                    names.append(line.removeprefix("event: "))
                    first.set()
                elif line.startswith("data: ") and names[-1] == "error":
                    names.append(json.loads(line.removeprefix("data: "))["error"]["code"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, names, first


def _stopped_within(thread: ServerThread, limit_s: float) -> float:
    started = time.monotonic()
    thread.__exit__(None, None, None)
    elapsed = time.monotonic() - started
    assert thread._thread is not None and not thread._thread.is_alive()
    assert elapsed < limit_s, f"the server took {elapsed:.1f} s to stop"
    return elapsed


def test_an_open_ask_stream_ends_with_shutting_down_and_the_server_stops_at_once(
    server: tuple[ServerThread, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    thread, url = server
    release = threading.Event()

    def thinking(self: Kredenc, question: str, **options: Any) -> Any:
        options["on_step"](Step(tool="decide", status="ok", ms=1.0))
        release.wait(30)  # the model is still working when the server is stopped
        raise RuntimeError("released")

    monkeypatch.setattr(Kredenc, "ask", thinking)
    try:
        reader, names, first = _read_stream(
            url, "POST", "/ask", json={"question": "what is the kettle?", "stream": True}
        )
        assert first.wait(30)
        _stopped_within(thread, 2.0)
        reader.join(5)
        assert not reader.is_alive() and names == ["step", "error", "shutting_down"]
    finally:
        release.set()


def test_an_open_job_progress_stream_ends_and_the_server_stops_at_once(
    server: tuple[ServerThread, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    thread, url = server
    jobs = thread.app.state.kredenc.jobs

    def running(namespace: str, job_id: str, after: int) -> tuple[list[Event], bool]:
        return (
            [Event("progress", {"source": "a.pdf", "page": 1, "pages": 9})] if after == 0 else []
        ), False

    monkeypatch.setattr(jobs, "events", running)
    reader, names, first = _read_stream(url, "GET", "/ingest/jobs/j1/events")
    assert first.wait(30)
    _stopped_within(thread, 2.0)
    reader.join(5)
    assert not reader.is_alive() and names == ["progress"]  # it just ends: resume by id
