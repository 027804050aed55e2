"""The Kredenc facade: one object to open a store, file, find and forget.

It holds the open :class:`~kredenc.storage.store.Store` and a namespace, and hands
each call to the layer that does the work: ``memory.writes``, ``ingest``,
``memory.turns``, ``retrieve.query``, ``recall`` and ``loop`` (ask, sessions).
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TextIO, TypeVar

from kredenc.checks import check_name
from kredenc.config import Settings, load_settings
from kredenc.errors import StoreClosed
from kredenc.ingest import passages
from kredenc.memory import history, listing, transfer, writes
from kredenc.memory.turns import TurnFiler
from kredenc.providers.embed.base import Embedder
from kredenc.retrieve import query as queries
from kredenc.storage import layout
from kredenc.storage.base import Index, Log
from kredenc.storage.store import Store

if TYPE_CHECKING:
    from kredenc.ingest.pipeline import IngestReport
    from kredenc.loop.answer import Answer, Step
    from kredenc.memory.lifecycle import JobReport
    from kredenc.recall.budget import Budget
    from kredenc.recall.reflex import RecallResult


def make_default_embedder(settings: Settings) -> Embedder:
    from kredenc import plugins

    return plugins.build(plugins.EMBEDDERS, settings.embed_provider, settings, Embedder)


#: Seconds ``close`` waits for the warm-up at open to end (a model load in flight; the
#: warm-up's index reads stop at the close): the thread holds the store until it ends.
WARM_UP_JOIN = 30.0

P = ParamSpec("P")
R = TypeVar("R")


def _in_namespace(fn: Callable[Concatenate[Store, str, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A facade method calling ``fn(store, namespace, ...)`` with the handle's store and
    current namespace, through the store's gate (a closed store raises ``StoreClosed``;
    close() waits for the call); it keeps ``fn``'s name, documentation and (less those
    two) signature."""

    @functools.wraps(fn)
    def method(self: Kredenc, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._settle()
        store = self.store
        with store.gate:
            return fn(store, self.namespace, *args, **kwargs)

    params = list(inspect.signature(fn).parameters.values())[2:]
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = inspect.signature(fn).replace(  # type: ignore[attr-defined]
        parameters=[self_param, *params]
    )
    return method


def _optional(module: str, attr: str, arg: Any) -> Any:
    """``module.attr(arg)``, or None when this build has no such module."""
    try:
        found = import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module.startswith(exc.name):
            raise
        return None
    return getattr(found, attr)(arg)


class _Closed:
    """A closed store as recall sees it: any use raises the ``StoreClosed`` that
    refused the call, which the reflex turns into a skipped recall (it never raises)."""

    def __init__(self, exc: StoreClosed) -> None:
        self._exc = exc

    def __getattr__(self, name: str) -> Any:
        raise self._exc


class Kredenc:
    """An open store seen through one namespace. Use :meth:`open`; close it (or use
    ``with``) when done. :meth:`scoped` gives a view for another namespace."""

    _warming: threading.Thread | None  # the owner's warm-up at open (close waits for it)

    def __init__(
        self, settings: Settings, embedder: Embedder, *, namespace: str, read_only: bool = False
    ) -> None:
        namespace = check_name("namespace", namespace)
        self._attach(Store.open(settings, embedder, read_only), embedder, namespace, owner=True)
        if settings.recall_warm_at_open:
            # The first recall of a fresh process finds the query model loaded (or
            # queues behind its loading within its time budget), not words only.
            from kredenc.recall.reflex import warm_in_background

            self._warming = warm_in_background(self.store, gate=self.store.gate)

    def _attach(self, store: Store, embedder: Embedder, namespace: str, *, owner: bool) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = store.settings
        self.home = store.home
        self.meta = store.meta
        self.read_only = store.read_only
        self.embed_query = store.embed_query  # a query's vector, cached
        self.namespace = namespace
        self._owner = owner  # a scoped() view closes nothing
        self._turns = TurnFiler()  # the last turns filed per session, by this handle
        self._loop_services: tuple[Any, Any, Any] | None = None  # (llm, cache, tracer)
        self._loop_owner: Kredenc | None = None  # a scoped() view uses its handle's
        self._ask_filer: Any = None  # the owner's recall.filing.TurnFiler, made at first ask
        self._warming = None

    # -- opening and closing --------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        namespace: str | None = None,
        *,
        embedder: Embedder | None = None,
        read_only: bool = False,
        **overrides: Any,
    ) -> Kredenc:
        """Open (creating if needed) the store at ``path`` (default ``KREDENC_HOME``)."""
        settings = load_settings(path, namespace=namespace, **overrides)
        layout.check_directory(settings.home)
        return cls(
            settings,
            embedder or make_default_embedder(settings),
            namespace=settings.namespace,
            read_only=read_only,
        )

    def scoped(self, namespace: str) -> Kredenc:
        """A view of this open store for ``namespace``: the same files, index, writer
        and embedder (no second open), its own turn context; closing it does nothing
        (close the handle it came from)."""
        view = object.__new__(type(self))
        view._attach(self.store, self.embedder, check_name("namespace", namespace), owner=False)
        view._loop_owner = self._loop_owner or self  # one LLM per opened store
        return view

    def use_namespace(self, namespace: str) -> None:
        """Switch this handle to another namespace of the same store."""
        self.namespace = check_name("namespace", namespace)

    def __enter__(self) -> Kredenc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Wait for calls in flight (up to ``storage.store.CLOSE_TIMEOUT``, 30 s), then
        flush, stop the writer, close files and release the lock; later calls raise
        :class:`~kredenc.errors.StoreClosed`. Idempotent and thread-safe; a
        :meth:`scoped` view leaves the store open."""
        if self._owner:
            if self._ask_filer is not None:
                self._ask_filer.close()  # the asks' turns filed before the store closes
            self.store.close()
            if self._warming is not None:
                # Its index reads stop at the close (StoreClosed); a model load in
                # flight is waited for, so nothing keeps the closed store alive after.
                self._warming.join(WARM_UP_JOIN)

    @property
    def index(self) -> Index:
        return self.store.index

    @property
    def haystack(self) -> Log:
        return self.store.haystack

    def rebuild(self, *, fresh_cache: bool = False) -> dict[str, int]:
        """Drop the index and rebuild it from the log (embeddings come from the cache;
        an unreadable index or cache is set aside first, any cache with ``fresh_cache``)."""
        self._settle()
        return self.store.rebuild(fresh_cache=fresh_cache)

    def compact(
        self, *, purge: bool = False, on_step: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Merge the card index; with ``purge``, erase the text of forgotten records from
        every file under the store (a new log generation; see docs/storage.md)."""
        self._settle()
        return self.store.compact(purge=purge, on_step=on_step)

    # -- calls handed on as they are, in this handle's namespace ----------------
    remember = _in_namespace(writes.remember)
    remember_many = _in_namespace(writes.remember_many)
    score = _in_namespace(writes.score)
    forget = _in_namespace(writes.forget)
    delete_document = _in_namespace(writes.delete_document)
    relate = _in_namespace(writes.relate)
    get = _in_namespace(writes.get)
    add_passages = _in_namespace(passages.add_passages)
    search = _in_namespace(queries.search)
    context_graph = _in_namespace(queries.context_graph)

    list_memories = _in_namespace(listing.list_memories)
    list_documents = _in_namespace(listing.list_documents)
    read_document = _in_namespace(listing.read_document)
    list_sessions = _in_namespace(listing.list_sessions)
    list_relationships = _in_namespace(listing.list_relationships)
    relationships_of = _in_namespace(listing.relationships_of)
    memory_history = _in_namespace(history.memory_history)
    provenance = _in_namespace(listing.provenance)

    def run_jobs(self, names: Sequence[str] = (), *, now: float | None = None) -> list[JobReport]:
        """Run the named lifecycle jobs (all when none are named) once on this
        namespace, in ``memory.scheduler.JOBS`` order; their reports."""
        from kredenc.memory.scheduler import run_jobs

        with self.store.gate:
            return run_jobs(self.store, self.namespace, names, now=now)

    def check(self, *, full: bool = False) -> dict[str, Any]:
        """``kredenc check``'s report on this open store (read-only: ``sound``,
        ``findings``, ``faults``), the embedder checked against ``store.json``.
        The CLI calls ``storage.verify`` itself: it must also judge a store that
        cannot be opened."""
        from kredenc.storage import repair
        from kredenc.storage.verify import verify_store

        with self.store.gate:
            return verify_store(
                self.home,
                model_id=self.embedder.model_id,
                dim=self.embedder.dim,
                cache=repair.cache_path_of(self.home, self.settings.embed_cache),
                full=full,
                embed=self.embedder.embed,
                live=True,
                settings=self.settings,
            )

    def export(self, out: TextIO, namespaces: Sequence[str] | None = None) -> int:
        """Write the export of ``namespaces`` (every namespace with a live record when
        None) to ``out`` as JSON lines, the header first (docs/export.md); how many
        lines."""
        self._settle()
        n = 0
        with self.store.gate:
            for line in transfer.export_lines(self.store, namespaces):
                out.write(line + "\n")
                n += 1
        return n

    def import_lines(
        self,
        lines: Iterable[str],
        *,
        skip_existing: bool = False,
        name: str = "input",
        own_namespace: bool = False,
    ) -> transfer.ImportReport:
        """File an export (``kredenc export`` lines) into this store, ids and
        namespaces kept (with ``own_namespace``, every record goes into this handle's
        namespace instead): every line is checked first (a bad one raises
        ``InvalidInput`` naming it and nothing is written), then records go in
        all-or-nothing batches and are embedded with this store's model."""
        with self.store.gate:
            into = self.namespace if own_namespace else None
            header, items = transfer.parse_lines(lines, name=name, namespace=into)
            report = transfer.import_items(self.store, items, skip_existing=skip_existing)
            report.embedding_model = header.get("embedding_model")
            return report

    def import_mem0(self, data: Any, *, skip_existing: bool = False) -> transfer.ImportReport:
        """File mem0's ``get_all`` JSON (parsed) as memories of this namespace."""
        with self.store.gate:
            items = transfer.from_mem0(data, self.namespace, now=self.store.now())
            return transfer.import_items(self.store, items, skip_existing=skip_existing)

    def file_turns(
        self,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        *,
        drawer: str = "turns",
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> list[str]:
        """File conversation turns (``role``, ``content``) of a session as one batch.

        Each becomes a ``turn`` record whose index card carries the session, the
        speaker and the turns just before it as context, and tags naming the session,
        the speaker and its extracted terms (see ``memory.turns``), so recall can find
        it by words and meaning. ``user_id``, ``agent_id`` and ``run_id`` are filed
        with every turn (a recall scoped to a user finds only that user's turns). A
        turn's ``at`` (Unix seconds or ISO 8601), for a conversation filed after it
        took place, is when it was said: the record's time, which recall reads for
        "two months ago" (``retrieve.when``); without it, the time of filing.
        """
        payloads = self.prepare_turns(
            session_id, turns, drawer=drawer, user_id=user_id, agent_id=agent_id, run_id=run_id
        )
        if payloads:
            passages.write_payloads(self.store, payloads)
        return [str(p["id"]) for p in payloads]

    def prepare_turns(
        self,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        *,
        drawer: str = "turns",
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """What :meth:`file_turns` writes, as log payloads not yet written (the
        session's context moves on as if they were): for a filer that writes the turns
        of several sessions as one batch (``ingest.passages.write_payloads``: one
        embedding call, one log append, one index transaction)."""
        self._settle()
        scope = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        with self.store.gate:
            return self._turns.prepare(
                self.store, self.namespace, session_id, turns, drawer=drawer, scope=scope
            )

    def ingest(
        self,
        sources: Sequence[str | Path] | str | Path,
        *,
        drawer: str = "documents",
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        on_progress: Callable[[str, IngestReport], None] | None = None,
        follow_symlinks: bool = False,
        names: Mapping[str, str] | None = None,
    ) -> IngestReport:
        """Load files, folders and URLs; file each document as one batch.

        One bad source never stops the rest: its error lands in ``report.failed``.
        Unchanged sources are skipped; changed ones replace their old version.
        A file in a folder whose symlink leads out of the folder lands in
        ``report.skipped`` unless ``follow_symlinks``. ``names`` files a source (its
        resolved path) under another name: an upload saved under a generated one.
        """
        from kredenc.ingest.filing import ingest  # loads the loaders: only when used

        with self.store.gate:
            return ingest(
                self.store, self.namespace, sources, drawer=drawer, include=include,
                exclude=exclude, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                on_progress=on_progress, follow_symlinks=follow_symlinks, names=names,
            )  # fmt: skip

    def recall(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session_id: str,
        budget: Budget | Mapping[str, Any] | None = None,
        dry_run: bool | None = None,
        time_budget_ms: float | None = None,
        session_start: float | None = None,
        mode: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> RecallResult:
        """The recall reflex: the messages with one system message of memories
        appended at the tail (never raises; see ``kredenc.recall.reflex``). ``user_id``,
        ``agent_id`` and ``run_id`` recall only records filed with those ids (default:
        the ``recall_user_id``, ``recall_agent_id`` and ``recall_run_id`` settings)."""
        self._settle()
        from kredenc.recall.reflex import recall

        store: Any = self.store
        with ExitStack() as calling:
            try:
                calling.enter_context(store.gate)
            except StoreClosed as exc:
                store = _Closed(exc)  # recall's one broad except makes it a skipped recall
            return recall(
                store,
                self.namespace,
                messages,
                session_id=session_id,
                budget=budget,
                dry_run=dry_run,
                time_budget_ms=time_budget_ms,
                session_start=session_start,
                mode=mode,
                user_id=user_id,
                agent_id=agent_id,
                run_id=run_id,
            )

    # -- the answer loop ---------------------------------------------------------
    def _services(self) -> tuple[Any, Any, Any]:
        """The LLM, operation cache and tracer of this handle's asks, made once.

        Each comes from its own module, imported here on first use (an ask loads the
        LLM provider, nothing else does); a module this build lacks means none."""
        if self._loop_owner is not None:
            return self._loop_owner._services()
        if self._loop_services is None:
            llm = _optional("kredenc.providers.llm.factory", "make_llm", self.settings)
            cache = _optional("kredenc.loop.cache", "cache_for", self.store)
            tracer = _optional("kredenc.loop.tracing", "tracer_for", self.settings)
            self._loop_services = (llm, cache, tracer)
        return self._loop_services

    # -- the asks' turns, filed off the answer's path -------------------------------
    def _defer(self, what: str, job: Callable[[], object], *, into: Any = None) -> object:
        """Queue an ask's filing on the owner's filing thread (one per opened store):
        with ``into`` (the store), ``job`` returns its payloads, written in one batch
        with the filings queued beside it (``recall.filing``)."""
        owner = self._loop_owner or self
        if owner._ask_filer is None:
            from kredenc.recall.filing import TurnFiler as BackgroundFiler

            owner._ask_filer = BackgroundFiler(owner)
        return owner._ask_filer.submit_call(what, job, into=into)

    def _settle(self) -> None:
        """Wait until the asks' turns queued so far are filed: every other call of this
        store (and its views) reads what an earlier ask filed."""
        owner = self._loop_owner or self
        if owner._ask_filer is not None and owner._ask_filer.pending > 0:
            owner._ask_filer.flush()

    def ask(
        self,
        /,
        question: str,
        *,
        session_id: str | None = None,
        k: int | None = None,
        stream: bool = False,
        agent: str = "answer",
        on_delta: Callable[[str], None] | None = None,
        on_step: Callable[[Step], None] | None = None,
        **options: Any,
    ) -> Answer:
        """Answer ``question`` from this namespace's documents and memories.

        The agent (default ``answer``, a markdown file: docs/loop.md) runs its tools:
        decide, rewrite, retrieve, grade, verify, generate, judge, reflect. The
        :class:`~kredenc.loop.answer.Answer` has the text with ``[n]`` citations, the
        sources, each chunk's verdict, the judge's evaluation, the iterations, the
        retrieval mode and a trace. With ``session_id`` the session's last messages
        are the context, and the question and answer are filed as its next turns
        (:meth:`session_history`). ``stream`` hands the text to ``on_delta`` as it is
        generated; ``on_step`` receives each step of the trace as it ends. Other
        options: ``context_k``, ``max_iterations``, ``mode``, ``hops``, ``rerank``,
        ``drawer`` (``kredenc.loop.ask.OPTIONS``).
        """
        from kredenc.loop.ask import ask

        if session_id is not None:
            self._settle()  # the session's history includes its last ask
        llm, cache, tracer = self._services()
        defer = self._defer if self.settings.ask_file_in_background else None
        with self.store.gate:
            return ask(
                self.store, self.namespace, question, session_id=session_id, agent=agent,
                llm=llm, cache=cache, tracer=tracer, turns=self._turns, on_delta=on_delta,
                on_step=on_step, k=k, stream=stream or None, defer=defer, **options,
            )  # fmt: skip

    def session_history(self, session_id: str, *, limit: int | None = None) -> list[dict[str, str]]:
        """The session's last messages (``ask_session_turns``, 20), oldest first, each
        ``{"role": "user" | "assistant", "content": ...}``: its turns in the store."""
        self._settle()
        from kredenc.loop.sessions import history

        with self.store.gate:
            n = self.settings.ask_session_turns if limit is None else limit
            return history(self.store, self.namespace, session_id, n)

    def clear_session(self, session_id: str) -> int:
        """Forget every turn of the session (tombstones: gone from the history, search
        and recall; the text leaves the log with ``compact --purge``); how many."""
        self._settle()
        from kredenc.loop.sessions import clear

        with self.store.gate:
            return clear(self.store, self.namespace, session_id, self._turns)

    def note_access(self, ids: Sequence[str]) -> None:
        """Count a recall of ``ids``; counts reach the log in batched ``access`` records."""
        self.store.note_access(self.namespace, ids)

    def flush_access(self) -> None:
        """Hand pending access counts to the housekeeper (without waiting)."""
        self.store.flush_access()

    def stats(self) -> dict[str, Any]:
        self._settle()
        return self.store.stats(self.namespace)
