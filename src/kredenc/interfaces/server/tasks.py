"""What a ``kredenc worker`` runs: the RQ job functions, by name (``rq_jobs.INGEST_TASK``,
``LIFECYCLE_TASK``, ``ON_FAILURE``), over the store the worker opened once
(:func:`install`).

An ingest runs exactly as on the server's thread (``jobs.run_ingest``), reporting into
the job's record in Redis as it goes. Each document is one batch through the store's
writer, so a worker that dies leaves every document whole or absent; RQ runs the job
again (``jobs_retries``): what the dead attempt filed is ``unchanged`` the second
time, the rest is filed, and the report is the last attempt's. A store that fails
under a job (the database connection cut, the server restarted) is reopened (new
connections; the index caught up with the log) and the job retried the same way.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import KredencError, StoreError
from kredenc.interfaces.server.jobbook import FINISHED, JobBook, public
from kredenc.interfaces.server.jobs import (
    MAX_FINISHED,
    Event,
    Job,
    Outcome,
    mark_done,
    remove_files,
    run_ingest,
)
from kredenc.providers.embed.base import Embedder

log = logging.getLogger("kredenc.worker")

LOST = {
    "code": "worker_lost",
    "message": "the job's worker stopped before it finished, on every try",
    "hint": "see the workers' logs; ingest the sources again (unchanged files are skipped)",
}


class Retrying(Exception):
    """Raised out of a job so that RQ runs it again (its store failed under it)."""


@dataclass
class WorkerContext:
    """What one worker process holds for its jobs: the store (opened once, the model
    loaded once), the job records, and a folder for uploads."""

    settings: Settings
    embedder: Embedder
    book: JobBook
    folder: Path
    kb: Kredenc | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def store(self) -> Kredenc:
        with self.lock:
            if self.kb is None:
                self.kb = Kredenc(self.settings, self.embedder, namespace=self.settings.namespace)
            return self.kb

    def reopen(self) -> None:
        """Close the store that failed; the next job opens it again (new connections,
        and the index catches up with what the log holds)."""
        with self.lock:
            kb, self.kb = self.kb, None
        if kb is not None:
            try:
                kb.close()
            except Exception as exc:  # noqa: BLE001 - it failed already; closing is best effort
                log.warning("closing the failed store: %s", exc)

    def close(self) -> None:
        self.reopen()


#: The process's worker context (one at most): the job functions run over it.
_installed: list[WorkerContext] = []


def install(context: WorkerContext | None) -> None:
    """Set (or clear, with None) the process's worker context."""
    _installed.clear()
    if context is not None:
        _installed.append(context)


def _current() -> WorkerContext:
    if not _installed:
        raise RuntimeError("no worker context: these functions run inside 'kredenc worker'")
    return _installed[0]


class _RedisSink:
    """``jobs.Sink`` over the job's record in Redis (one writer: this worker)."""

    def __init__(self, book: JobBook, record: dict[str, Any]) -> None:
        self.book, self.record = book, record

    def progress(self, shown: str, page: int, pages: int) -> None:
        self.record["progress"][shown] = {"page": page, "pages": pages, "done": False}
        self.book.save(
            self.record, Event("progress", {"source": shown, "page": page, "pages": pages})
        )

    def source_done(self, shown: str, outcomes: list[dict[str, Any]]) -> None:
        mark_done(self.record["progress"], shown)
        if not outcomes:
            self.book.save(self.record)
        for outcome in outcomes:
            self.book.save(self.record, Event("file", outcome))

    def stopping(self) -> bool:
        return False  # a worker stopping (SIGTERM) finishes its job first


def ingest(job_id: str) -> dict[str, Any]:
    """Run the ingest job ``job_id`` (its record in Redis) in its namespace."""
    ctx = _current()
    record = ctx.book.load(job_id)
    if record is None:
        log.warning("ingest job %s has no record (expired?); nothing to do", job_id)
        return {"state": "gone"}
    if record["state"] in FINISHED:  # delivered again after it finished
        return {"state": record["state"]}
    record["state"] = "running"
    record["attempts"] = int(record.get("attempts", 0)) + 1
    ctx.book.save(record)
    folder = Path(tempfile.mkdtemp(prefix=f"{job_id}-", dir=ctx.folder))
    saved: list[Path] = []
    try:
        job = _job_of(ctx, record, folder, saved)
        try:
            outcome = run_ingest(
                ctx.store().scoped(record["namespace"]),
                job,
                _RedisSink(ctx.book, record),
                reraise=(StoreError,),
            )
        except StoreError as exc:
            ctx.reopen()
            if _retries_left() > 0:
                log.warning("ingest job %s: the store failed (%s); retrying", job_id, exc.message)
                record["state"] = "queued"
                ctx.book.save(record)
                raise Retrying(exc.message) from None
            outcome = Outcome(error={"code": exc.code, "message": exc.message, "hint": exc.hint})
    finally:
        remove_files(saved)
        folder.rmdir()
    finish(ctx.book, record, outcome)
    return {"state": record["state"]}


def _job_of(ctx: WorkerContext, record: dict[str, Any], folder: Path, saved: list[Path]) -> Job:
    """The thread queue's Job for the record, its uploads written into ``folder``."""
    names: dict[str, str] = {}
    inputs = list(record["inputs"])
    for n, (name, suffix) in enumerate(record["names"]):
        data = ctx.book.upload(record["id"], n)
        if data is None:  # expired before a worker took the job: a failed file
            inputs.append(name)
            continue
        path = folder / f"upload-{n}{suffix}"
        path.write_bytes(data)
        saved.append(path)
        names[str(path)] = name
        inputs.append(str(path))
    return Job(
        id=record["id"],
        namespace=record["namespace"],
        sources=record["sources"],
        inputs=inputs,
        names=names,
        drawer=record["drawer"],
        cleanup=[],
    )


def finish(book: JobBook, record: dict[str, Any], outcome: Outcome) -> None:
    """Record how the job ended: ``done`` with its report or ``failed`` with the error."""
    record["finished_at"] = time.time()
    if outcome.error is None:
        record["state"], record["report"], record["error"] = "done", outcome.report, None
    else:
        record["state"], record["error"] = "failed", dict(outcome.error)
    book.finish(record, Event(record["state"], public(record)), max_finished=MAX_FINISHED)


def lifecycle(namespace: str, names: list[str]) -> dict[str, Any]:
    """Run lifecycle jobs on ``namespace``: their reports, or the refusal as an error."""
    ctx = _current()
    try:
        reports = ctx.store().scoped(namespace).run_jobs(names)
    except StoreError:
        ctx.reopen()
        if _retries_left() > 0:
            raise Retrying("the store failed under a lifecycle run") from None
        raise
    except KredencError as exc:
        return {"error": {"code": exc.code, "message": exc.message, "hint": exc.hint}}
    return {"reports": [r.to_json() for r in reports]}


def on_failure(job: Any, connection: Any, *_exc: Any) -> None:
    """RQ's failure callback: a job that will not run again (its retries spent, after
    its worker died or its store kept failing) is recorded as failed."""
    if job.retries_left:
        return  # RQ queues it again
    if not str(job.func_name).endswith(".ingest"):
        return
    book = JobBook(connection, job.origin)
    record = book.load(str(job.args[0]))
    if record is None or record["state"] in FINISHED:
        return
    finish(book, record, Outcome(error=dict(LOST)))


def _retries_left() -> int:
    from rq import get_current_job

    job = get_current_job()
    return int(job.retries_left or 0) if job is not None else 0
