"""Ingest jobs: ``POST /ingest`` queues one; a single worker thread runs them in turn.

One worker, because ingest is write-heavy (every chunk embedded, every document one
batch through the store's one writer): two runs at once would only contend for the
same CPU and writer, and a queue keeps each job's progress meaningful.

A job records what happens to it as events (``progress`` per page of a long file,
``file`` per document or failed source, then ``done`` or ``failed`` with the job), so a
client that connects late replays what happened so far and then follows live. Jobs
belong to the tenant whose key queued them: another tenant asking for one gets the
same ``NotFound`` as for an id that never existed.

A job is ``failed`` when the run itself could not finish (the store closed, the
server stopped, a fault); a source that cannot be read is not a failed job but a
``failed`` file outcome in its report, as with ``kredenc ingest``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kredenc.engine import Kredenc
from kredenc.errors import KredencError, NotFound, StoreClosed
from kredenc.ingest.loaders.base import page_progress
from kredenc.ingest.pipeline import IngestReport
from kredenc.ingest.redact import redact_url
from kredenc.wire import to_wire

log = logging.getLogger("kredenc.server")

#: Finished jobs kept per tenant (the oldest are dropped): a job holds its events (one
#: per page read) and a server that runs for months must not grow without bound, while
#: a page or client that polls still finds the jobs of the last hours.
MAX_FINISHED = 50
#: Jobs one tenant may have waiting or running: one tenant cannot fill the queue that
#: every tenant shares.
MAX_WAITING = 20
#: How long closing waits for the running job to stop (it stops at its next page).
CLOSE_TIMEOUT_S = 60.0

#: The folder of the store where uploads wait for their job (removed once it is over).
UPLOADS = "uploads"

INTERNAL = {
    "code": "internal_error",
    "message": "the ingest failed inside the server",
    "hint": "the server log has the details; report it if it happens again",
}
CANCELLED = {
    "code": "cancelled",
    "message": "the server stopped before this job finished",
    "hint": "start the server again and ingest what is missing (unchanged files are skipped)",
}


class Refused(KredencError):
    """A request refused with its own status and code (a job that cannot be queued now,
    a path outside the roots): the route answers ``status`` with the one shape, MCP a
    tool error with ``code``."""

    def __init__(self, status: int, code: str, message: str, hint: str) -> None:
        super().__init__(message, hint)
        self.status, self.code = status, code


class _Cancelled(Exception):
    """Raised from the progress callbacks to stop the running job at a page boundary
    (a document is filed whole or not at all, so stopping there is clean)."""


@dataclass
class Event:
    name: str  # progress | file | done | failed
    data: dict[str, Any]


@dataclass
class Job:
    """One queued ingest; ``inputs`` (what is read) and ``names`` stay on the server."""

    id: str
    namespace: str
    sources: list[str]  # as the client sees them (upload names, URLs without passwords)
    inputs: list[str]
    names: dict[str, str]  # an upload's saved path -> its name
    drawer: str
    cleanup: list[Path]  # files removed once the job is over (saved uploads)
    state: str = "queued"
    progress: dict[str, dict[str, Any]] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    def public(self) -> dict[str, Any]:
        """The job's wire form (the REST contract's Job)."""
        return {
            "id": self.id,
            "state": self.state,
            "sources": list(self.sources),
            "progress": {k: dict(v) for k, v in self.progress.items()},
            "report": self.report,
            "error": self.error,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
        }

    def shown(self, source: str) -> str:
        return redact_url(self.names.get(source, source))


class Jobs(Protocol):
    """What the routes call on a job queue: the server's own thread (:class:`IngestJobs`,
    ``jobs_queue = "thread"``) or RQ workers (``rq_jobs.RqJobs``, ``"rq"``). Every
    method is scoped by the tenant's namespace: another tenant's job is ``NotFound``."""

    def submit(
        self,
        kb: Kredenc,
        *,
        sources: Sequence[str],
        inputs: Sequence[str],
        names: dict[str, str] | None = None,
        drawer: str = "documents",
        cleanup: Sequence[Path] = (),
    ) -> dict[str, Any]:
        """Queue an ingest of ``inputs`` into ``kb``'s namespace; the job's wire form
        (``Refused`` 429 when too many of the tenant's jobs wait)."""
        ...

    def listing(self, namespace: str) -> list[dict[str, Any]]:
        """The tenant's jobs, the newest first."""
        ...

    def get(self, namespace: str, job_id: str) -> dict[str, Any]:
        """One of the tenant's jobs, its wire form."""
        ...

    def events(self, namespace: str, job_id: str, after: int) -> tuple[list[Event], bool]:
        """The job's events from index ``after`` on, and whether it has finished."""
        ...

    def close(self, timeout: float = ...) -> None:
        """Stop taking jobs."""
        ...


class IngestJobs:
    """The server's ingest queue and the jobs of every tenant (thread-safe)."""

    def __init__(
        self,
        uploads: Path | None = None,
        max_finished: int = MAX_FINISHED,
        max_waiting: int = MAX_WAITING,
    ) -> None:
        if uploads is not None and uploads.is_dir():
            # Uploads a crashed server left: no job will read them, and the store's
            # purge (compact --purge) does not look there.
            remove_files([p for p in uploads.iterdir() if p.is_file()])
        self.max_finished = max_finished
        self.max_waiting = max_waiting
        self._lock = threading.Lock()
        self._jobs: dict[str, dict[str, Job]] = {}  # namespace -> id -> job, oldest first
        self._queue: queue.Queue[tuple[Job, Kredenc] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._stopping = False

    # -- what the routes call ----------------------------------------------------
    def submit(
        self,
        kb: Kredenc,
        *,
        sources: Sequence[str],
        inputs: Sequence[str],
        names: dict[str, str] | None = None,
        drawer: str = "documents",
        cleanup: Sequence[Path] = (),
    ) -> dict[str, Any]:
        """Queue an ingest of ``inputs`` into ``kb``'s namespace; the job's wire form."""
        job = Job(
            id=f"job_{uuid.uuid4().hex}",
            namespace=kb.namespace,
            sources=[redact_url(s) for s in sources],
            inputs=list(inputs),
            names=dict(names or {}),
            drawer=drawer,
            cleanup=list(cleanup),
        )
        with self._lock:
            if self._stopping:
                raise StoreClosed("the server is stopping", "try again once it is back")
            mine = self._jobs.setdefault(job.namespace, {})
            waiting = sum(1 for j in mine.values() if not j.finished)
            if waiting >= self.max_waiting:
                raise Refused(
                    429,
                    "too_many_jobs",
                    f"{waiting} ingest jobs of this key are waiting or running",
                    "wait for them to finish (GET /ingest/jobs), then send the rest",
                )
            mine[job.id] = job
            self._queue.put((job, kb))
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._run, name="kredenc-ingest", daemon=True
                )
                self._worker.start()
            return job.public()

    def listing(self, namespace: str) -> list[dict[str, Any]]:
        """The tenant's jobs, the newest first."""
        with self._lock:
            return [j.public() for j in reversed(self._jobs.get(namespace, {}).values())]

    def get(self, namespace: str, job_id: str) -> dict[str, Any]:
        with self._lock:
            return self._job(namespace, job_id).public()

    def events(self, namespace: str, job_id: str, after: int) -> tuple[list[Event], bool]:
        """The job's events from index ``after`` on, and whether the job has finished
        (its last event is then among them)."""
        with self._lock:
            job = self._job(namespace, job_id)
            return job.events[after:], job.finished

    def _job(self, namespace: str, job_id: str) -> Job:
        job = self._jobs.get(namespace, {}).get(job_id)
        if job is None:
            raise NotFound(f"no ingest job {job_id!r}", "list the jobs with GET /ingest/jobs")
        return job

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Stop: waiting jobs fail as cancelled, the running one stops at its next page
        or file (what it filed stays), and the worker is waited for."""
        with self._lock:
            self._stopping = True
            worker = self._worker
            for mine in self._jobs.values():
                for job in mine.values():
                    if job.state == "queued":
                        self._fail(job, CANCELLED)
                        remove_files(job.cleanup)
        self._queue.put(None)
        if worker is not None:
            worker.join(timeout)
            if worker.is_alive():
                log.warning("the ingest job did not stop within %.0f s", timeout)

    # -- the worker ----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            job, kb = item
            with self._lock:
                if job.state != "queued":  # cancelled while it waited
                    continue
                job.state = "running"
            try:
                self._execute(job, kb)
            finally:
                remove_files(job.cleanup)

    def _execute(self, job: Job, kb: Kredenc) -> None:
        outcome = run_ingest(kb, job, _ThreadSink(self, job))
        with self._lock:
            if outcome.error is not None:
                self._fail(job, outcome.error)
                return
            job.report = outcome.report
            job.state = "done"
            job.finished_at = time.time()
            self._emit(job, "done", job.public())
            self._prune(job.namespace)

    def _fail(self, job: Job, error: dict[str, str]) -> None:
        job.error = dict(error)
        job.state = "failed"
        job.finished_at = time.time()
        self._emit(job, "failed", job.public())
        self._prune(job.namespace)

    def _emit(self, job: Job, name: str, data: dict[str, Any]) -> None:
        job.events.append(Event(name, data))

    def _prune(self, namespace: str) -> None:
        mine = self._jobs.get(namespace, {})
        finished = [jid for jid, j in mine.items() if j.finished]
        for jid in finished[: max(0, len(finished) - self.max_finished)]:
            del mine[jid]


class Sink(Protocol):
    """Where a running ingest reports (the thread queue's jobs in memory, or an RQ
    job's record in Redis): called from the ingest's own thread."""

    def progress(self, shown: str, page: int, pages: int) -> None:
        """A page of ``shown`` was read (``progress`` event)."""

    def source_done(self, shown: str, outcomes: list[dict[str, Any]]) -> None:
        """``shown`` is done; ``outcomes`` are the file outcomes it added (``file`` events)."""

    def stopping(self) -> bool:
        """Whether the run should stop at this page boundary."""


@dataclass
class Outcome:
    """How one ingest run ended: its report's wire form, or the job's error."""

    report: dict[str, Any] | None = None
    error: dict[str, str] | None = None


def run_ingest(
    kb: Kredenc, job: Job, sink: Sink, *, reraise: tuple[type[Exception], ...] = ()
) -> Outcome:
    """Ingest ``job.inputs`` into ``kb`` (the job's namespace), reporting to ``sink``;
    stops at the next page or file once ``sink.stopping()``. Exceptions of ``reraise``
    propagate (an RQ worker retries a job whose store failed); any other failure is
    the returned error."""
    reported = 0  # the report's file outcomes already sent

    def on_page(source: str, page: int, pages: int) -> None:
        if sink.stopping():
            raise _Cancelled
        sink.progress(job.shown(source), page, pages)

    def on_source(source: str, report: IngestReport) -> None:
        nonlocal reported
        outcomes = [to_wire(o) for o in report.files[reported:]]
        reported = len(report.files)
        sink.source_done(job.shown(source), outcomes)
        if sink.stopping():
            raise _Cancelled

    try:
        with page_progress(on_page):
            report = kb.ingest(
                job.inputs, drawer=job.drawer, names=job.names, on_progress=on_source
            )
    except _Cancelled:
        return Outcome(error=dict(CANCELLED))
    except reraise:
        raise
    except KredencError as exc:
        return Outcome(error={"code": exc.code, "message": exc.message, "hint": exc.hint})
    except Exception:
        log.exception("ingest job %s failed", job.id)
        return Outcome(error=dict(INTERNAL))
    return Outcome(report=to_wire(report))


class _ThreadSink:
    """The thread queue's sink: the job in memory, under the queue's lock."""

    def __init__(self, jobs: IngestJobs, job: Job) -> None:
        self.jobs, self.job = jobs, job

    def progress(self, shown: str, page: int, pages: int) -> None:
        with self.jobs._lock:
            self.job.progress[shown] = {"page": page, "pages": pages, "done": False}
            self.jobs._emit(self.job, "progress", {"source": shown, "page": page, "pages": pages})

    def source_done(self, shown: str, outcomes: list[dict[str, Any]]) -> None:
        with self.jobs._lock:
            mark_done(self.job.progress, shown)
            for outcome in outcomes:
                self.jobs._emit(self.job, "file", outcome)

    def stopping(self) -> bool:
        with self.jobs._lock:
            return self.jobs._stopping


def mark_done(progress: dict[str, dict[str, Any]], shown: str) -> None:
    """A source's progress once it is done (its page count kept)."""
    before = progress.get(shown, {})
    progress[shown] = {"page": before.get("page"), "pages": before.get("pages"), "done": True}


def remove_files(paths: Sequence[Path]) -> None:
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # the job is over either way; the file is only clutter
            log.warning("could not remove the upload %s: %s", path, exc)
