"""``AsyncKredenc``: the async twin of every ``Kredenc`` method, on a real store, from
asyncio (``asyncio.run``; no plugin)."""

from __future__ import annotations

import asyncio
import inspect
import io
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import kredenc
from kredenc.aio import AsyncKredenc
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput, NotFound, StoreClosed
from kredenc.testing.embedders import HashEmbedder

PLAIN = {"scoped", "use_namespace"}  # no I/O: plain methods in both classes
OWN_DOCS = {"open", "close", "scoped"}  # by hand: they say what the async side adds


def _public_callables(cls: type) -> dict[str, Any]:
    return {
        name: inspect.getattr_static(cls, name)
        for name in dir(cls)
        if not name.startswith("_") and callable(getattr(cls, name))
    }


async def _open(path: Path, **overrides: Any) -> AsyncKredenc:
    overrides.setdefault("durability", "none")
    return await AsyncKredenc.open(path, embedder=HashEmbedder(), **overrides)


def test_every_public_method_of_kredenc_has_an_async_twin_and_no_more() -> None:
    sync, aio = _public_callables(Kredenc), _public_callables(AsyncKredenc)
    assert set(aio) == set(sync)
    for name in sync:
        want = inspect.signature(getattr(Kredenc, name))
        got = inspect.signature(getattr(AsyncKredenc, name))
        assert list(got.parameters) == list(want.parameters), name
        assert [p.kind for p in got.parameters.values()] == [
            p.kind for p in want.parameters.values()
        ], name
        assert [p.default for p in got.parameters.values()] == [
            p.default for p in want.parameters.values()
        ], name
        coroutine = inspect.iscoroutinefunction(getattr(AsyncKredenc, name))
        assert coroutine is (name not in PLAIN), name
        if name not in OWN_DOCS:
            assert getattr(AsyncKredenc, name).__doc__ == getattr(Kredenc, name).__doc__, name
    assert kredenc.AsyncKredenc is AsyncKredenc


def test_remember_search_recall_ask_forget_from_asyncio(tmp_path: Path) -> None:
    async def main() -> None:
        async with await _open(tmp_path / "s") as kb:
            mid = (await kb.remember("The heron nests by the mill pond every spring.")).id
            await kb.remember("Invoices are due on the first of the month.")
            hits = await kb.search("where does the heron nest", k=2)
            assert hits[0].id == mid
            assert (await kb.get(mid)).text.startswith("The heron")
            got = await kb.recall(
                [{"role": "user", "content": "where does the heron nest?"}], session_id="a"
            )
            assert mid in {item.id for item in got.items}
            answer = await kb.ask("where does the heron nest", session_id="a")
            assert answer.session_id == "a"
            assert (await kb.session_history("a"))[0]["content"] == "where does the heron nest"
            await kb.forget(mid)
            assert mid not in {h.id for h in await kb.search("heron mill pond", k=5)}
            other = kb.scoped("other")
            assert other.namespace == "other" and await other.search("heron", k=5) == []
            await other.close()  # a view closes nothing
            assert await kb.stats() == kb.sync.stats()

    asyncio.run(main())


def test_twenty_searches_and_twenty_remembers_at_once_lose_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with await _open(tmp_path / "s") as kb:
            seed = (await kb.remember("seed note about lighthouses")).id
            texts = [f"note {i} about the keeper's log number {i}" for i in range(20)]
            results = await asyncio.gather(
                *(kb.remember(t) for t in texts),
                *(kb.search("lighthouses", k=3) for _ in range(20)),
            )
            ids = [m.id for m in results[:20]]
            assert len(set(ids)) == 20
            for hits in results[20:]:
                assert seed in {h.id for h in hits}
            got = await asyncio.gather(*(kb.get(i) for i in ids))
            assert [m.text for m in got] == texts
            assert len(await kb.list_memories(limit=100)) == 21

    asyncio.run(main())


def test_errors_propagate_as_the_same_kredenc_error(tmp_path: Path) -> None:
    async def main() -> None:
        kb = await _open(tmp_path / "s")
        with pytest.raises(InvalidInput) as bad:
            await kb.search("x", k=0)
        with pytest.raises(InvalidInput) as sync_bad:
            kb.sync.search("x", k=0)
        assert str(bad.value) == str(sync_bad.value)
        with pytest.raises(NotFound):
            await kb.get("mem_doesnotexist")
        await kb.close()
        with pytest.raises(StoreClosed):
            await kb.search("x")
        await kb.close()  # idempotent

    asyncio.run(main())


def test_close_waits_for_calls_in_flight_and_queued(tmp_path: Path) -> None:
    started = threading.Event()

    def slow(kb: Kredenc) -> str:
        started.set()
        time.sleep(0.3)
        return kb.remember("filed while closing").id

    async def main() -> None:
        kb = await _open(tmp_path / "s")
        running = asyncio.ensure_future(kb._run(slow))
        queued = [asyncio.ensure_future(kb.remember(f"queued {i}")) for i in range(30)]
        await asyncio.to_thread(started.wait, 5)
        await kb.close()
        assert running.done() and all(q.done() for q in queued)
        mid = running.result()
        assert all(q.result().text.startswith("queued") for q in queued)
        with Kredenc.open(tmp_path / "s", embedder=HashEmbedder()) as again:
            assert again.get(mid).text == "filed while closing"
            assert len(again.list_memories(limit=100)) == 31

    asyncio.run(main())


def test_a_cancelled_call_never_leaves_close_waiting(tmp_path: Path) -> None:
    async def main() -> None:
        kb = await _open(tmp_path / "s")
        calls = [asyncio.ensure_future(kb.remember(f"n {i}")) for i in range(40)]
        await asyncio.sleep(0)
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        t0 = time.monotonic()
        await kb.close()
        assert time.monotonic() - t0 < 5

    asyncio.run(main())


def test_ingest_export_and_import_through_the_async_twins(tmp_path: Path) -> None:
    doc = tmp_path / "notes.md"
    doc.write_text("# Mill\n\nThe heron nests by the mill pond every spring.\n", encoding="utf-8")
    seen: list[str] = []

    async def main() -> None:
        async with await _open(tmp_path / "a") as kb:
            report = await kb.ingest(doc, on_progress=lambda source, _: seen.append(source))
            assert not report.failed and seen
            assert await kb.list_documents() == kb.sync.list_documents()
            out = io.StringIO()
            n = await kb.export(out)
            assert n > 1
        async with await _open(tmp_path / "b") as other:
            got = await other.import_lines(out.getvalue().splitlines())
            assert got.records >= 1
            hits = await other.search("heron mill pond", k=1, drawer="documents")
            assert "heron" in hits[0].text

    asyncio.run(main())
