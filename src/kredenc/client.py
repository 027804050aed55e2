"""``kredenc.Client``: the facade's methods over HTTP, against a running ``kredenc serve``.

A program (or the CLI with ``--url``) that cannot or should not open the store itself,
because a server holds it or lives on another machine, uses the same calls it would
make on :class:`~kredenc.engine.Kredenc`: the same names, arguments and defaults, the
same dataclasses back (decoded by :func:`kredenc.wire.from_wire`), the same exceptions
(the JSON error body's ``code`` mapped back to its :mod:`kredenc.errors` class, message
and hint kept). The namespace is the API key's, chosen by the server, never by the
client. Routes: the REST table of docs/server.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO, TypeVar
from urllib.parse import quote

import httpx

from kredenc import errors
from kredenc.records import ContextGraph, GraphEdge, Hit, Hits, Memory
from kredenc.wire import from_wire, to_wire

if TYPE_CHECKING:
    from kredenc.ingest.pipeline import IngestReport
    from kredenc.loop.answer import Answer, Step
    from kredenc.memory.history import HistoryEntry
    from kredenc.memory.lifecycle import JobReport
    from kredenc.memory.listing import DocumentEntry, SessionEntry
    from kredenc.memory.transfer import ImportReport
    from kredenc.recall.budget import Budget
    from kredenc.recall.result import RecallResult

T = TypeVar("T")

#: Seconds between polls of an ingest job when its event stream breaks off.
POLL_S = 0.5
#: While a job is queued, the client looks at it after 0.1 s, then twice as long each
#: time up to this (a job the server's thread starts at once costs no wait; one left
#: queued for minutes costs a request every few seconds, well inside the rate limit).
QUEUED_POLL_MAX_S = 3.0
#: Seconds a job may wait for a worker before the client says so, once (a log WARNING,
#: which the CLI prints on stderr).
QUEUED_NOTICE_S = 5.0
#: How long :meth:`Client.ingest` waits for a worker to take a queued job by default.
QUEUED_TIMEOUT_S = 600.0

log = logging.getLogger("kredenc.client")


#: The fields ``POST /memories`` and ``PATCH /memories/{id}`` take beside the text and
#: ``reason`` (the facade takes a few more: refused here, not dropped).
REMEMBER_FIELDS = frozenset(
    {"importance", "confidence", "stability", "status", "valid_from", "valid_to", "episode_id"}
    | {"user_id", "agent_id", "run_id"}
)
SCORE_FIELDS = frozenset({"importance", "confidence", "stability", "status", "valid_to"})


class ServerUnreachable(errors.ProviderError):
    """No kredenc server answered at the client's URL (refused, timed out, not HTTP)."""

    code = "server_unreachable"


def _error_classes() -> dict[str, type[errors.KredencError]]:
    """Every error class by its ``code``; the first class to claim a code keeps it (a
    subclass that inherits its parent's code is not what the server meant)."""
    found: dict[str, type[errors.KredencError]] = {}
    pending: list[type[errors.KredencError]] = [errors.KredencError]
    while pending:
        cls = pending.pop(0)
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


#: The class of an error code the tree does not name, by HTTP status.
_BY_STATUS: dict[int, type[errors.KredencError]] = {
    404: errors.NotFound,
    409: errors.ReadOnlyRecord,
    413: errors.InvalidInput,
    422: errors.InvalidInput,
    502: errors.ProviderError,
    503: errors.StoreError,
    504: errors.DeadlineExceeded,
}


def error_from_body(status: int, body: Any) -> errors.KredencError:
    """The exception a server's error answer stands for: the class of its ``code``
    (else of its status), with its message, hint and code kept as sent."""
    detail = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(detail, Mapping):
        detail = {}
    code = str(detail.get("code") or "http_error")
    message = str(detail.get("message") or f"the server answered HTTP {status}")
    hint = str(detail.get("hint") or "")
    cls = _error_classes().get(code) or _BY_STATUS.get(status, errors.KredencError)
    exc = cls.__new__(cls)  # some classes build their own message: keep the server's
    errors.KredencError.__init__(exc, message, hint)
    if isinstance(exc, errors.CorruptLog):
        exc.offset = -1
    exc.code = code
    if cls is errors.KredencError or code in ("invalid_request", "payload_too_large"):
        exc.exit_code = 2 if status in (400, 413, 422) else 1
    return exc


class Client:
    """The facade over a running server: ``Client("http://127.0.0.1:8765", api_key)``.

    Use it as a context manager or :meth:`close` it. ``queued_timeout_s`` bounds how
    long :meth:`ingest` waits for a queued job to be taken (by the server's thread, or
    with ``jobs_queue = "rq"`` by a ``kredenc worker``), not how long it may then run.
    ``transport`` (an ``httpx.BaseTransport``) replaces the network, for tests."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        queued_timeout_s: float = QUEUED_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise errors.InvalidInput(
                f"server URL {url!r} is not an http(s) URL", "pass e.g. http://127.0.0.1:8765"
            )
        try:
            parsed = httpx.URL(url)
            fine = bool(parsed.host) and (parsed.port is None or 0 < parsed.port < 65536)
        except (httpx.InvalidURL, ValueError):
            fine = False
        if not fine:
            raise errors.InvalidInput(
                f"{errors.shown(url, 80)} is not a server URL (a host, and a port 1-65535)",
                "pass e.g. http://127.0.0.1:8765",
            )
        if not 0 < queued_timeout_s < float("inf"):
            raise errors.InvalidInput(
                f"queued_timeout_s must be a positive number of seconds, not {queued_timeout_s!r}",
                f"e.g. {QUEUED_TIMEOUT_S:.0f}",
            )
        self.url = url.rstrip("/")
        self.queued_timeout_s = queued_timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    # -- the plumbing ------------------------------------------------------------
    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def _unreachable(self, exc: httpx.HTTPError) -> ServerUnreachable:
        return ServerUnreachable(
            f"cannot reach the kredenc server at {self.url} ({str(exc) or type(exc).__name__})",
            f"check that 'kredenc serve' runs there, or pass the right --url (now {self.url})",
        )

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        _raise_for(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise errors.ProviderError(
                f"the server at {self.url} answered {path} with something other than JSON",
                "check that --url names a kredenc server",
            ) from None

    @contextmanager
    def _stream(self, method: str, path: str, **kwargs: Any) -> Iterator[Iterator[tuple[str, Any]]]:
        """The server-sent events of a request, as ``(event, data)`` with data parsed;
        the connection closes when the block ends, read to the end or not."""
        try:
            with self._http.stream(method, path, **kwargs) as response:
                if response.is_error:
                    response.read()
                    _raise_for(response)
                yield _sse(response.iter_lines())
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None

    # -- memories ----------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        kind: str = "note",
        drawer: str = "memories",
        tags: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Memory:
        """File a memory (``fields``: importance, confidence, stability, status, …)."""
        _served_only("remember", _beyond(fields, REMEMBER_FIELDS))
        body: dict[str, Any] = {"text": text, "kind": kind, "drawer": drawer, "tags": list(tags)}
        body |= {"meta": dict(meta or {}), **fields}
        return from_wire(Memory, self._json("POST", "/memories", json=to_wire(body)))

    def get(self, record_id: str) -> Memory:
        return from_wire(Memory, self._json("GET", f"/memories/{_seg(record_id)}"))

    def provenance(self, record_id: str) -> dict[str, Any] | None:
        """A chunk's document, file and page (None for a memory)."""
        found: dict[str, Any] | None = self._json("GET", f"/records/{_seg(record_id)}").get(
            "provenance"
        )
        return found

    def score(self, record_id: str, *, reason: str | None = None, **fields: Any) -> Memory:
        _served_only("score", _beyond(fields, SCORE_FIELDS))
        body = {**fields, **({"reason": reason} if reason is not None else {})}
        data = self._json("PATCH", f"/memories/{_seg(record_id)}", json=to_wire(body))
        return from_wire(Memory, data)

    def forget(self, record_id: str) -> None:
        self._json("DELETE", f"/memories/{_seg(record_id)}")

    def relate(
        self, src: str, dst: str, rel: str, *, weight: float = 1.0, remove: bool = False
    ) -> None:
        body = {"src": src, "dst": dst, "rel": rel, "weight": weight, "remove": remove}
        self._json("POST", "/relationships", json=body)

    def relationships_of(self, record_id: str) -> list[GraphEdge]:
        """The typed edges from or to ``record_id``."""
        data = self._json("GET", f"/relationships/{_seg(record_id)}")
        return [from_wire(GraphEdge, e) for e in data["items"]]

    def memory_history(
        self, record_id: str, *, limit: int = 100, offset: int = 0
    ) -> list[HistoryEntry]:
        """Every change to memory ``record_id``, oldest first, page by page."""
        from kredenc.memory.history import HistoryEntry

        found = self._page(
            f"/memories/{_seg(record_id)}/history", _params(limit=limit, offset=offset)
        )
        return [from_wire(HistoryEntry, e) for e in found]

    def list_relationships(self, *, limit: int = 50, offset: int = 0) -> list[GraphEdge]:
        """The namespace's edges in the order written, page by page."""
        found = self._page("/relationships", _params(limit=limit, offset=offset))
        return [from_wire(GraphEdge, e) for e in found]

    def list_memories(
        self,
        *,
        kinds: Sequence[str] = (),
        statuses: Sequence[str] = (),
        tags: Sequence[str] = (),
        drawer: str | None = None,
        since: Any = None,
        until: Any = None,
        limit: int = 50,
        offset: int = 0,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Memory]:
        params = _params(
            kind=list(kinds), status=list(statuses), tag=list(tags), drawer=drawer,
            since=since, until=until, limit=limit, offset=offset, user_id=user_id,
            agent_id=agent_id, run_id=run_id,
        )  # fmt: skip
        return [from_wire(Memory, m) for m in self._page("/memories", params)]

    def _page(self, path: str, params: list[tuple[str, Any]]) -> list[Any]:
        items: list[Any] = self._json("GET", path, params=params)["items"]
        return items

    # -- finding -----------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        k: int = 10,
        mode: str = "hybrid",
        drawer: str | None = None,
        kinds: Sequence[str] = (),
        include_deprecated: bool = False,
        hops: int = 0,
        rerank: str | None = None,
        loaders: Sequence[str] = (),
        source: str | None = None,
        pages: tuple[int, int] | None = None,
        per_document: bool = False,
        since: float | str | None = None,
        until: float | str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        tags: Sequence[str] = (),
        where: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        iterative: bool = False,
        asked_at: float | str | None = None,
    ) -> Hits:
        body = {
            "query": query, "k": k, "mode": mode, "drawer": drawer, "kind": list(kinds),
            "include_deprecated": include_deprecated, "hops": hops, "rerank": rerank,
            "loader": list(loaders), "source": source, "per_document": per_document,
            "pages": f"{pages[0]}-{pages[1]}" if pages else None,
            "since": None if since is None else str(since),
            "until": None if until is None else str(until),
            "user_id": user_id, "agent_id": agent_id, "run_id": run_id, "tags": list(tags),
            "where": dict(where) if where else None, "min_score": min_score,
            "iterative": iterative or None,
            "asked_at": None if asked_at is None else str(asked_at),
        }  # fmt: skip
        clean = {key: v for key, v in body.items() if v is not None}
        data = self._json("POST", "/search", json=clean)
        return Hits((from_wire(Hit, h) for h in data["hits"]), data.get("corrections"))

    def context_graph(
        self,
        query: str,
        *,
        hops: int = 2,
        neighbors_max: int = 40,
        seed_ids: Sequence[str] | None = None,
        k: int = 10,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> ContextGraph:
        params = _params(
            query=query, max_hops=hops, neighbors_max=neighbors_max, k=k,
            seed_ids=",".join(seed_ids) if seed_ids else None, user_id=user_id,
            agent_id=agent_id, run_id=run_id,
        )  # fmt: skip
        return from_wire(ContextGraph, self._json("GET", "/context_graph", params=params))

    def recall(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session_id: str,
        budget: Budget | Mapping[str, Any] | None = None,
        dry_run: bool | None = None,
        time_budget_ms: float | None = None,
        mode: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> RecallResult:
        from kredenc.recall.result import RecallResult

        _served_only("recall", {"time_budget_ms": time_budget_ms} if time_budget_ms else {})
        if budget is not None and not isinstance(budget, Mapping):
            budget = budget.to_dict()
        body = {
            "messages": [dict(m) for m in messages], "session_id": session_id,
            "budget": dict(budget) if budget is not None else None, "dry_run": dry_run,
            "mode": mode, "user_id": user_id, "agent_id": agent_id, "run_id": run_id,
        }  # fmt: skip
        clean = {key: v for key, v in body.items() if v is not None}
        return from_wire(RecallResult, self._json("POST", "/recall", json=to_wire(clean)))

    # -- the answer loop ---------------------------------------------------------
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
        """The cited answer; with ``stream`` (or ``on_step``) it comes as server-sent
        events: the text to ``on_delta`` as the server generates it, each step of the
        trace to ``on_step`` as it ends, the answer at the end."""
        from kredenc.loop.answer import Answer, Step

        _served_only("ask", {key: v for key, v in options.items() if v is not None})
        body = {"question": question, "session_id": session_id, "k": k, "agent": agent}
        body = {key: v for key, v in body.items() if v is not None}
        if not stream and on_step is None:
            return from_wire(Answer, self._json("POST", "/ask", json=to_wire(body)))
        headers = {"Accept": "text/event-stream"}
        request = {"json": {**body, "stream": True}, "headers": headers}
        with self._stream("POST", "/ask", **request) as events:
            for event, data in events:
                if event == "delta" and on_delta is not None:
                    on_delta(str(data.get("text", "")))
                elif event == "step" and on_step is not None:
                    on_step(from_wire(Step, data))
                elif event == "answer":
                    return from_wire(Answer, data)
                elif event == "error":
                    raise error_from_body(500, data)
        raise errors.ProviderError(
            f"the server at {self.url} ended the answer stream without an answer",
            "ask again; the server log says why",
        )

    def session_history(self, session_id: str, *, limit: int | None = None) -> list[dict[str, str]]:
        data = self._json("GET", f"/sessions/{_seg(session_id)}", params=_params(limit=limit))
        messages: list[dict[str, str]] = data["messages"]
        return messages

    def clear_session(self, session_id: str) -> int:
        return int(self._json("DELETE", f"/sessions/{_seg(session_id)}")["cleared"])

    def list_sessions(self, *, limit: int = 50, offset: int = 0) -> list[SessionEntry]:
        from kredenc.memory.listing import SessionEntry

        found = self._page("/sessions", _params(limit=limit, offset=offset))
        return [from_wire(SessionEntry, s) for s in found]

    # -- documents and ingestion -------------------------------------------------
    def list_documents(
        self,
        *,
        loaders: Sequence[str] = (),
        source: str | None = None,
        drawer: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[DocumentEntry]:
        from kredenc.memory.listing import DocumentEntry

        params = _params(
            loader=list(loaders), source=source, drawer=drawer, limit=limit, offset=offset
        )
        return [from_wire(DocumentEntry, d) for d in self._page("/documents", params)]

    def read_document(self, doc_id: str) -> tuple[DocumentEntry, list[Memory]]:
        """A document and its chunks in order."""
        from kredenc.memory.listing import DocumentEntry

        data = self._json("GET", f"/documents/{_seg(doc_id)}")
        chunks = [from_wire(Memory, m) for m in data["chunks"]]
        return from_wire(DocumentEntry, data["document"]), chunks

    def delete_document(self, doc_id: str) -> None:
        self._json("DELETE", f"/documents/{_seg(doc_id)}")

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
    ) -> IngestReport:
        """Upload local files (folders walked here, as a local ingest walks them) and
        hand URLs to the server's fetcher; wait for the job(s) and return one report.
        ``on_progress`` is called as each source is done, as locally; pages read inside
        a long file reach :func:`kredenc.ingest.loaders.base.page_progress` hooks."""
        from kredenc.ingest.loaders.base import is_url, symlink_policy
        from kredenc.ingest.pipeline import FileOutcome, IngestReport
        from kredenc.ingest.sources import iter_sources

        if isinstance(sources, str | Path):
            sources = [sources]
        urls = [str(s) for s in sources if is_url(str(s))]
        local = [s for s in sources if not is_url(str(s))]
        with symlink_policy(follow=follow_symlinks):
            files = list(iter_sources(local, list(include or []), list(exclude or [])))
        sizes = {"chunk_size": chunk_size, "chunk_overlap": chunk_overlap}
        _served_only("ingest", {key: v for key, v in sizes.items() if v is not None})
        options = {"drawer": drawer}
        total = IngestReport()
        missing = [f for f in files if not Path(f).is_file()]
        for path in missing:
            reason = (
                f"{path}: not a file that can be uploaded"
                if Path(path).exists()
                else (f"{path}: no such file")
            )
            total.failed.append((path, reason))
            total.files.append(FileOutcome(path, "failed", error=reason))
        # The server files an upload under its file name (a later upload of that name
        # is a new version of it): a second file of the same name here would replace
        # the first, so it fails instead, and the report names local paths again.
        names: dict[str, str] = {}
        for path in (f for f in files if f not in missing):
            first = names.setdefault(Path(path).name, path)
            if first != path:
                reason = (
                    f"{path}: the server files uploads by file name, and {first} has the "
                    "same name; ingest it in another call or rename it"
                )
                total.failed.append((path, reason))
                total.files.append(FileOutcome(path, "failed", error=reason))
        jobs: list[tuple[dict[str, Any], dict[str, str]]] = []
        if names:
            jobs.append((self._upload(list(names.values()), options), names))
        if urls:
            jobs.append((self._json("POST", "/ingest", json={"urls": urls, **options})["job"], {}))
        for job, names in jobs:
            _merge(total, self._wait(job, total, on_progress, names))
        return total

    def _upload(self, paths: list[str], options: Mapping[str, Any]) -> dict[str, Any]:
        with ExitStack() as files:
            parts: list[tuple[str, tuple[str, IO[bytes]]]] = [
                ("files", (Path(p).name, files.enter_context(open(p, "rb")))) for p in paths
            ]
            data = {key: str(v) for key, v in options.items()}
            job: dict[str, Any] = self._json("POST", "/ingest", files=parts, data=data)["job"]
            return job

    def _wait(
        self,
        job: Mapping[str, Any],
        so_far: IngestReport,
        on_progress: Callable[[str, IngestReport], None] | None,
        names: Mapping[str, str],
    ) -> IngestReport:
        """Follow a job's events to its end; its report, uploads named by their local
        paths (``names``); a failed job raises."""
        from dataclasses import replace

        from kredenc.ingest.loaders.base import report_page
        from kredenc.ingest.pipeline import FileOutcome, IngestReport

        def local(source: str) -> str:
            return names.get(source, source)

        path = f"/ingest/jobs/{_seg(str(job['id']))}"
        if job.get("state") == "queued":
            # Then its events from the first (the stream replays them): a job that ran
            # to its end while the record was asked still tells each file's outcome.
            self._until_taken(str(job["id"]), path)
        final: Any = job if job.get("state") in ("done", "failed") else None
        if final is None:
            with self._stream("GET", path + "/events") as events:
                for event, data in events:
                    if event == "progress":
                        report_page(
                            local(str(data["source"])), int(data["page"]), int(data["pages"])
                        )
                    elif event == "file" and on_progress is not None:
                        outcome = from_wire(FileOutcome, data)
                        outcome = replace(outcome, source=local(outcome.source))
                        so_far.files.append(outcome)
                        on_progress(outcome.source, so_far)
                        so_far.files.pop()
                    elif event in ("done", "failed"):
                        final = data
                        break
        if final is None:  # the stream broke off: ask until the job ends
            final = self._json("GET", path)
            while final.get("state") not in ("done", "failed"):
                time.sleep(POLL_S)
                final = self._json("GET", path)
                if final.get("state") == "queued":  # queued again for a retry
                    final = self._until_taken(str(job["id"]), path)
        if final.get("state") == "failed" or final.get("report") is None:
            raise error_from_body(422, {"error": final.get("error") or {}})
        report = from_wire(IngestReport, final["report"])
        report.files = [replace(f, source=local(f.source)) for f in report.files]
        report.failed = [(local(src), why) for src, why in report.failed]
        report.skipped = [(local(src), why) for src, why in report.skipped]
        report.doc_ids = {local(src): doc for src, doc in report.doc_ids.items()}
        return report

    def _until_taken(self, job_id: str, path: str) -> Mapping[str, Any]:
        """The job's record once it is no longer queued. Its event stream says nothing
        while it waits, so the record is asked instead: after
        :data:`QUEUED_NOTICE_S`, one WARNING that it waits for a worker; after
        ``queued_timeout_s``, :class:`~kredenc.errors.DeadlineExceeded` with its id
        (the job stays queued on the server)."""
        start = time.monotonic()
        pause, told = 0.1, False
        while True:
            record: Mapping[str, Any] = self._json("GET", path)
            if record.get("state") != "queued":
                return record
            waited = time.monotonic() - start
            if waited >= self.queued_timeout_s:
                raise errors.DeadlineExceeded(
                    f"ingest job {job_id} is still queued after {self.queued_timeout_s:g} s: "
                    "no worker has taken it",
                    "is a 'kredenc worker' running for this server's store (jobs_queue = "
                    f"'rq')? The job stays queued: see it later at GET /ingest/jobs/{job_id}",
                )
            if not told and waited >= QUEUED_NOTICE_S:
                log.warning(
                    "ingest job %s is queued and no worker has taken it yet (a server with "
                    "jobs_queue = 'rq' needs a running 'kredenc worker'); waiting up to %g s",
                    job_id,
                    self.queued_timeout_s,
                )
                told = True
            time.sleep(min(pause, max(0.0, self.queued_timeout_s - waited)))
            pause = min(pause * 2, QUEUED_POLL_MAX_S)

    # -- the store ---------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        found: dict[str, Any] = self._json("GET", "/stats")
        return found

    def check(self, *, full: bool = False) -> dict[str, Any]:
        """The store check report (``kredenc check``'s JSON) of the server's store."""
        found: dict[str, Any] = self._json("GET", "/check", params={"full": _flag(full)})
        return found

    def run_jobs(self, names: Sequence[str] = ()) -> list[JobReport]:
        """Run lifecycle jobs now (all when none are named) in the caller's namespace."""
        from kredenc.memory.lifecycle import JobReport

        data = self._json("POST", "/jobs/run", json={"names": list(names)})
        return [from_wire(JobReport, r) for r in data["reports"]]

    def export(self, out: TextIO, namespaces: Sequence[str] | None = None) -> int:
        """Write the export of the caller's namespace (the key's; ``namespaces`` may
        name it, nothing else) to ``out`` as JSON lines; how many lines."""
        if namespaces is not None and set(namespaces) != {self.stats()["namespace"]}:
            raise errors.InvalidInput(
                f"over a server, export writes the key's namespace only, not {list(namespaces)}",
                "leave out the namespaces, or export each with a key bound to it",
            )
        n = 0
        try:
            with self._http.stream("GET", "/export") as response:
                if response.is_error:
                    response.read()
                    _raise_for(response)
                for line in response.iter_lines():
                    if line:
                        out.write(line + "\n")
                        n += 1
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        return n

    def import_lines(
        self, lines: Iterable[str], *, skip_existing: bool = False, name: str = "input"
    ) -> ImportReport:
        """File an export's lines (``kredenc export``) through the server."""
        from kredenc.memory.transfer import ImportReport

        body = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        data = self._json(
            "POST",
            "/import",
            content=body.encode("utf-8"),
            params={"skip_existing": _flag(skip_existing)},
            headers={"Content-Type": "application/x-ndjson"},
        )
        return from_wire(ImportReport, data)

    def import_mem0(self, data: Any, *, skip_existing: bool = False) -> ImportReport:
        """File mem0's ``get_all`` JSON (parsed) as memories of the caller's namespace."""
        from kredenc.memory.transfer import ImportReport

        found = self._json(
            "POST",
            "/import",
            content=json.dumps(data).encode("utf-8"),
            params={"format": "mem0", "skip_existing": _flag(skip_existing)},
            headers={"Content-Type": "application/json"},
        )
        return from_wire(ImportReport, found)


def _served_only(call: str, options: Mapping[str, Any]) -> None:
    """Refuse options the server's route does not take (rather than drop them)."""
    if options:
        raise errors.InvalidInput(
            f"over a server, {call} does not take {', '.join(sorted(options))}",
            f"leave {'it' if len(options) == 1 else 'them'} out, or run {call} on a local store",
        )


def _beyond(fields: Mapping[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in allowed and v is not None}


def _raise_for(response: httpx.Response) -> None:
    if not response.is_error:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    raise error_from_body(response.status_code, body)


def _sse(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """Server-sent events from their lines: ``(event, parsed data)`` per blank line."""
    event, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                text = "\n".join(data)
                try:
                    yield event, json.loads(text)
                except ValueError:
                    yield event, text
            event, data = "message", list[str]()
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    if data:
        yield event, json.loads("\n".join(data))


def _merge(total: IngestReport, part: IngestReport) -> None:
    for name in ("documents", "chunks", "unchanged", "replaced", "links", "mentions"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.failed += part.failed
    total.skipped += part.skipped
    total.doc_ids.update(part.doc_ids)
    total.files += part.files
    total.seconds += part.seconds


def _params(**values: Any) -> list[tuple[str, Any]]:
    """Query parameters: lists repeated, ``None`` left out, booleans as true/false."""
    out: list[tuple[str, Any]] = []
    for key, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                out.append((key, _flag(item) if isinstance(item, bool) else item))
    return out


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _seg(value: str) -> str:
    """``value`` as one path segment (``/`` and the like escaped)."""
    return quote(value, safe="")
