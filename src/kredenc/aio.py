"""The asyncio facade: :class:`AsyncKredenc`, a thin wrapper over :class:`Kredenc`.

There is one core, the sync facade (STYLE.md habit 11). Each async method runs its
sync twin with :func:`asyncio.to_thread`, so the event loop never waits on SQLite,
the embedder or an LLM; the store is thread-safe (one writer thread, a reader per
thread, and the call gate that close() waits on: ``storage/gate.py``). The twins are
made from the sync methods by one table (:func:`_twin`), so they keep their names,
documentation and signatures; ``tests/test_aio.py`` keeps the two classes equal.

Callbacks handed to a call (``on_delta``, ``on_progress``, ``on_step``) run in the
worker thread: use ``loop.call_soon_threadsafe`` to reach the loop from them.
Cancelling an awaiting call before its thread starts drops it; once started, the sync
call finishes in its thread (close() waits for it) and its result is discarded.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import StoreClosed
from kredenc.providers.embed.base import Embedder
from kredenc.storage.store import CLOSE_TIMEOUT

P = ParamSpec("P")
R = TypeVar("R")


class _Calls:
    """The async calls of one opened store (its handle and every scoped view): how
    many are queued or running, so close() waits for them, including those still
    waiting for a worker thread; once closing, new calls are refused."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._closing = False

    def enter(self) -> None:
        with self._cond:
            if self._closing:
                raise StoreClosed()
            self._active += 1

    def exit(self) -> None:
        with self._cond:
            self._active -= 1
            if self._active == 0:
                self._cond.notify_all()

    def shut(self, timeout: float) -> None:
        """Refuse new calls, then wait (up to ``timeout`` s) for those in flight."""
        with self._cond:
            self._closing = True
            self._cond.wait_for(lambda: self._active == 0, timeout)


class _Run:
    """One sync call on its way to a worker thread. It leaves the count exactly once:
    in the thread when it ran, or in the awaiting task when that was cancelled before
    the thread started (the thread then skips the call)."""

    def __init__(self, calls: _Calls) -> None:
        self._calls = calls
        self._lock = threading.Lock()
        self._state = "queued"  # -> "running" -> "done", or -> "dropped"

    def call(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R | None:
        with self._lock:
            if self._state == "dropped":
                return None
            self._state = "running"
        try:
            return fn(*args, **kwargs)
        finally:
            with self._lock:
                self._state = "done"
            self._calls.exit()

    def drop(self) -> None:
        with self._lock:
            if self._state != "queued":
                return
            self._state = "dropped"
        self._calls.exit()


def _twin(
    fn: Callable[Concatenate[Kredenc, P], R],
) -> Callable[Concatenate[AsyncKredenc, P], Coroutine[Any, Any, R]]:
    """The async twin of the sync method ``fn``: the same name, documentation and
    signature (``__wrapped__``), run on a worker thread."""

    @functools.wraps(fn)
    async def method(self: AsyncKredenc, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(fn, *args, **kwargs)

    return method


class AsyncKredenc:
    """An open store seen through one namespace, for asyncio applications:
    ``kb = await AsyncKredenc.open(path)`` (or ``async with await
    AsyncKredenc.open(path) as kb:``), then ``await kb.search(...)``. Every method of
    :class:`~kredenc.Kredenc` has a twin here taking the same arguments: the ones that
    touch the store are coroutines; :meth:`scoped` and :meth:`use_namespace` (no I/O)
    are plain methods. ``sync`` is the :class:`Kredenc` underneath."""

    def __init__(self, kb: Kredenc, *, _calls: _Calls | None = None) -> None:
        #: The sync facade every call runs on (its ``index``, ``haystack``, ``store``).
        self.sync = kb
        self._calls = _Calls() if _calls is None else _calls

    @classmethod
    async def open(
        cls,
        path: str | Path | None = None,
        namespace: str | None = None,
        *,
        embedder: Embedder | None = None,
        read_only: bool = False,
        **overrides: Any,
    ) -> AsyncKredenc:
        """Open (creating if needed) the store at ``path`` in a worker thread:
        :meth:`Kredenc.open`, the same arguments."""
        kb = await asyncio.to_thread(
            Kredenc.open, path, namespace, embedder=embedder, read_only=read_only, **overrides
        )
        return cls(kb)

    def scoped(self, namespace: str) -> AsyncKredenc:
        """A view of this open store for ``namespace`` (:meth:`Kredenc.scoped`): the
        same store, and the same calls close() waits for; closing it does nothing."""
        return AsyncKredenc(self.sync.scoped(namespace), _calls=self._calls)

    def use_namespace(self, namespace: str) -> None:
        """Switch this handle to another namespace of the same store."""
        self.sync.use_namespace(namespace)

    @property
    def namespace(self) -> str:
        return self.sync.namespace

    @property
    def settings(self) -> Settings:
        return self.sync.settings

    async def __aenter__(self) -> AsyncKredenc:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Refuse new calls, wait for the calls in flight (queued for a thread or
        running, up to ``CLOSE_TIMEOUT``, 30 s), then :meth:`Kredenc.close`.
        Idempotent; a :meth:`scoped` view leaves the store open."""
        if self.sync._owner:
            await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self._calls.shut(CLOSE_TIMEOUT)
        self.sync.close()

    async def _run(
        self, fn: Callable[Concatenate[Kredenc, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        self._calls.enter()
        run = _Run(self._calls)
        try:
            result = await asyncio.to_thread(run.call, fn, self.sync, *args, **kwargs)
        except asyncio.CancelledError:
            run.drop()
            raise
        return result  # type: ignore[return-value]  # None only for a dropped call

    # -- the twins: one table, each the sync method run on a worker thread ---------
    remember = _twin(Kredenc.remember)
    remember_many = _twin(Kredenc.remember_many)
    score = _twin(Kredenc.score)
    forget = _twin(Kredenc.forget)
    delete_document = _twin(Kredenc.delete_document)
    relate = _twin(Kredenc.relate)
    list_relationships = _twin(Kredenc.list_relationships)
    relationships_of = _twin(Kredenc.relationships_of)
    memory_history = _twin(Kredenc.memory_history)
    get = _twin(Kredenc.get)
    add_passages = _twin(Kredenc.add_passages)
    search = _twin(Kredenc.search)
    context_graph = _twin(Kredenc.context_graph)
    list_memories = _twin(Kredenc.list_memories)
    list_documents = _twin(Kredenc.list_documents)
    read_document = _twin(Kredenc.read_document)
    list_sessions = _twin(Kredenc.list_sessions)
    provenance = _twin(Kredenc.provenance)
    export = _twin(Kredenc.export)
    import_lines = _twin(Kredenc.import_lines)
    import_mem0 = _twin(Kredenc.import_mem0)
    file_turns = _twin(Kredenc.file_turns)
    prepare_turns = _twin(Kredenc.prepare_turns)
    ingest = _twin(Kredenc.ingest)
    recall = _twin(Kredenc.recall)
    ask = _twin(Kredenc.ask)
    session_history = _twin(Kredenc.session_history)
    clear_session = _twin(Kredenc.clear_session)
    note_access = _twin(Kredenc.note_access)
    flush_access = _twin(Kredenc.flush_access)
    stats = _twin(Kredenc.stats)
    check = _twin(Kredenc.check)
    run_jobs = _twin(Kredenc.run_jobs)
    rebuild = _twin(Kredenc.rebuild)
    compact = _twin(Kredenc.compact)
