"""``kredenc worker``: an RQ worker for the ingest jobs and lifecycle runs that
``kredenc serve`` queues with ``jobs_queue = "rq"`` (docs/workers.md).

One worker process runs one job at a time, in its own process (RQ's ``SimpleWorker``:
no fork per job, so the store is opened and the embedding model loaded once, not per
job). Run as many processes as there are cores to spare, on any machine that reaches
the store's PostgreSQL and the queue's Redis.

Each worker writes the store through its own store directory (a temporary folder,
``kredenc-worker-<pid>-*``, removed when it stops): the PostgreSQL log and index are
shared by every process, and what a store directory holds beside them (the writer's
lock, the operation cache's file, uploads) belongs to one process. A worker killed
with SIGKILL cannot remove its folder; the next worker to start on the machine removes
the folders whose pid no process has (:func:`remove_stale_folders`). The SQLite store
has one writer process, so a worker refuses it.

Dead workers: a thread beats every ``jobs_heartbeat_s`` while a job runs; a job whose
worker stays silent for three beats is abandoned, and the next worker to clean RQ's
registries (every three beats, and at start) queues it again while it has retries
(``jobs_retries``), else records it as failed.

``kredenc worker --scheduler``: the worker also keeps the lifecycle clock
(:func:`worker_scheduler`), so a deployment chooses where it lives (servers, workers,
or both: each job still runs once per interval across all of them).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

from kredenc.config import Settings
from kredenc.engine import make_default_embedder
from kredenc.errors import MissingExtra
from kredenc.interfaces.server import tasks
from kredenc.interfaces.server.advert import pid_alive
from kredenc.interfaces.server.jobbook import JobBook
from kredenc.interfaces.server.rq_jobs import connect, require_shared_store, rq_queue
from kredenc.interfaces.server.schedule import STOP_WAIT_S
from kredenc.memory.lifecycle import JobReport
from kredenc.memory.scheduler import JOBS, Job, Scheduler, job_intervals
from kredenc.providers.embed.base import Embedder

log = logging.getLogger("kredenc.worker")

#: A worker's folder is ``<tmp>/kredenc-worker-<pid>-<random>``.
FOLDER_PREFIX = "kredenc-worker-"


def remove_stale_folders(base: Path | None = None) -> list[Path]:
    """Remove the folders of workers that died without removing theirs (SIGKILL):
    ``kredenc-worker-<pid>-*`` under ``base`` (the temporary directory) whose pid no
    process on this machine has. A live pid's folder, and one whose name carries no
    pid, are left. The folders removed."""
    base = Path(tempfile.gettempdir()) if base is None else base
    gone: list[Path] = []
    for folder in base.glob(FOLDER_PREFIX + "*"):
        pid = folder.name.removeprefix(FOLDER_PREFIX).split("-", 1)[0]
        if not folder.is_dir() or not pid.isdigit() or pid_alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            gone.append(folder)
            log.info("removed %s, left by worker %s (no longer running)", folder, pid)
    return gone


def worker_class() -> type[Any]:
    """RQ's ``SimpleWorker`` with heartbeats while a job runs (RQ beats only between
    jobs in a worker that does not fork)."""
    try:
        from rq.serializers import JSONSerializer
        from rq.worker import SimpleWorker, WorkerStatus
    except ImportError:
        raise MissingExtra("kredenc worker", "workers") from None

    class KredencWorker(SimpleWorker):
        heartbeat_s = 10

        def __init__(self, *args: Any, heartbeat_s: int = 10, **kwargs: Any) -> None:
            self.heartbeat_s = heartbeat_s
            kwargs.setdefault("serializer", JSONSerializer)
            # The idle loop wakes (and cleans registries when due) every few beats.
            kwargs.setdefault("worker_ttl", heartbeat_s * 3 + 15)
            kwargs.setdefault("maintenance_interval", heartbeat_s * 3)
            kwargs.setdefault("job_monitoring_interval", heartbeat_s)
            super().__init__(*args, **kwargs)

        def get_heartbeat_ttl(self, job: Any, working_time: float = 0.0) -> int:
            return int(self.heartbeat_s * 3)

        def execute_job(self, job: Any, queue: Any) -> None:
            execution = self.prepare_execution(job)
            stop = threading.Event()
            beat = threading.Thread(
                target=self._beat,
                args=(job, execution, stop),
                name="kredenc-heartbeat",
                daemon=True,
            )
            beat.start()
            try:
                self.perform_job(job, queue, execution)
            finally:
                stop.set()
                beat.join()
            self.set_state(WorkerStatus.IDLE)

        def _beat(self, job: Any, execution: Any, stop: threading.Event) -> None:
            while not stop.wait(self.heartbeat_s):
                try:
                    self.maintain_heartbeats(job, execution)
                except Exception as exc:  # noqa: BLE001 - a missed beat is retried next time
                    log.warning("heartbeat failed: %s", exc)

    return KredencWorker


def worker_scheduler(context: tasks.WorkerContext) -> Scheduler:
    """A scheduler of the lifecycle jobs in the worker's namespace (``namespace``),
    every ``scheduler_intervals``. It claims each period (``Store.claim``: the store's
    Redis, else its PostgreSQL ``claims``) and runs the job as a queued lifecycle run
    does, through ``run_jobs`` on the worker's current store (which holds the job's
    lock; a store reopened after a failure is the one the next run uses)."""
    s = context.settings
    kb = context.store()
    every = job_intervals(s.scheduler_intervals)

    def job(name: str) -> Job:
        def scheduled(_store: Any, ns: str, **_kw: Any) -> JobReport:
            [report] = context.store().scoped(ns).run_jobs([name])
            return report

        return scheduled

    return Scheduler(
        kb.store,
        kb.namespace,
        {name: (every[name], job(name)) for name in JOBS},
        initial_delay_s=s.scheduler_throttle_s,
        locked=False,
    )


def run_worker(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    burst: bool = False,
    name: str | None = None,
    on_ready: Any = None,
    scheduler: bool = False,
) -> bool:
    """Run jobs until stopped (SIGTERM or Ctrl-C: the running job finishes first; a
    second one stops at once), or with ``burst`` until the queue is empty. Whether any
    job ran. Bad settings and an unreachable Redis or store raise one KredencError.

    With ``scheduler`` the worker also runs the lifecycle jobs of its namespace on a
    schedule (:func:`worker_scheduler`), stopped before the store closes."""
    require_shared_store(settings, "kredenc worker")
    client, where = connect(settings)
    cls = worker_class()
    remove_stale_folders()
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
    context = tasks.WorkerContext(
        settings=settings.model_copy(
            update={"home": folder / "store", "recall_warm_at_open": False}
        ),
        embedder=embedder or make_default_embedder(settings),
        book=JobBook(client, settings.jobs_redis_prefix, where=where),
        folder=folder,
    )
    clock: Scheduler | None = None
    try:
        context.store()  # the store and the model now: a bad DSN fails before any job
        tasks.install(context)
        if scheduler:
            clock = worker_scheduler(context)
            clock.start(throttle_s=settings.scheduler_throttle_s)
        worker = cls(
            [rq_queue(client, settings.jobs_redis_prefix)],
            connection=client,
            name=name or f"kredenc-{socket.gethostname()}-{os.getpid()}",
            heartbeat_s=settings.jobs_heartbeat_s,
        )
        if on_ready is not None:
            on_ready(worker.name, where)
        return bool(worker.work(burst=burst, logging_level="WARNING"))
    finally:
        if clock is not None:
            clock.stop(STOP_WAIT_S)
        tasks.install(None)
        context.close()
        client.close()
        shutil.rmtree(folder, ignore_errors=True)
