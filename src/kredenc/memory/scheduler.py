"""A throttled, in-process scheduler for the lifecycle jobs.

``Scheduler(store, ns, jobs={name: (interval_s, fn)})``: :meth:`Scheduler.tick` runs the
jobs that are due and returns their names; a tick when nothing is due only reads
the clock (no I/O). :meth:`Scheduler.start` runs ticks on a background thread, at
most one per ``throttle_s``. A failing job is logged at WARNING with its cause and
tried again at its next interval; it never stops the scheduler or the other jobs.

A job runs holding the store's lock ``job:<ns>:<name>`` (``Store.lock``: in Redis
with ``redis_url``, or the job queue's Redis with ``jobs_queue = "rq"``), so it never
runs twice at once across processes: the scheduler skips a job another process is
running (it is due again at its next interval) and :func:`run_jobs` refuses it with
:class:`~kredenc.errors.StoreLocked`.

Once per period: under the lock, the scheduler also claims the job's period
(``Store.claim("period:<ns>:<name>", interval)``, a key that lives ``interval``
seconds). Every server and worker sharing the store may run a scheduler; the first to
come due claims the period and runs the job, the others find the claim and come due
again when it ends, so the job runs once per interval across all of them. A holder
killed mid-run frees the lock after ``lock_ttl_s`` and its claim with the period, and
the next period runs. Without a Redis, a PostgreSQL store claims the period in its own
database (``storage/postgres/claims.py``: every process reaches it) and a SQLite store,
which one process writes, in the process; the lock is then this process's.

``locked=False``: the scheduler only claims, and the job takes its lock itself (a
server's scheduled run goes through ``run_jobs``, in the server or on a worker: see
``interfaces/server/schedule.py``). A read-only store never schedules.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from kredenc.errors import InvalidInput, KredencError, StoreLocked
from kredenc.memory.lifecycle import JobReport
from kredenc.memory.lifecycle.contradictions import run_contradictions
from kredenc.memory.lifecycle.decay import run_decay
from kredenc.memory.lifecycle.episodes import run_episodes
from kredenc.memory.reflect import run_reflect
from kredenc.storage.locks import held

if TYPE_CHECKING:
    from kredenc.storage.store import Store

log = logging.getLogger(__name__)

Job = Callable[..., JobReport]

# The jobs in the order a full run takes them: episodes before reflection, so new
# members are summarised; decay last, so it does not touch what was just filed.
JOBS: dict[str, Job] = {
    "episodes": run_episodes,
    "contradictions": run_contradictions,
    "reflect": run_reflect,
    "decay": run_decay,
}
DEFAULT_INTERVALS: dict[str, float] = {
    "episodes": 600.0,
    "contradictions": 3600.0,
    "reflect": 3600.0,
    "decay": 6 * 3600.0,
}


def run_jobs(
    store: Store, ns: str, names: Sequence[str] = (), *, now: float | None = None
) -> list[JobReport]:
    """Run the named jobs (all when none are named) once on ``ns``, in :data:`JOBS` order."""
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        raise InvalidInput(f"unknown job(s): {', '.join(unknown)}", f"use {', '.join(JOBS)}")
    wanted = set(names) or set(JOBS)
    out = []
    for name, fn in JOBS.items():
        if name in wanted:
            with held(store.lock(f"job:{ns}:{name}"), f"lifecycle job {name} in {ns!r}"):
                out.append(fn(store, ns, now=now))
    return out


def default_jobs(
    intervals: Mapping[str, float] | None = None,
) -> dict[str, tuple[float, Job]]:
    """Every job with its interval (``intervals`` overrides the defaults)."""
    return {name: (interval, JOBS[name]) for name, interval in job_intervals(intervals).items()}


def job_intervals(intervals: Mapping[str, float] | None = None) -> dict[str, float]:
    """Every job's interval: ``intervals`` (e.g. the ``scheduler_intervals`` setting)
    over :data:`DEFAULT_INTERVALS`; an unknown job's name is :class:`InvalidInput`."""
    unknown = [n for n in intervals or {} if n not in JOBS]
    if unknown:
        raise InvalidInput(
            f"scheduler_intervals names unknown job(s): {', '.join(unknown)}",
            f"use {', '.join(JOBS)}",
        )
    return {**DEFAULT_INTERVALS, **(intervals or {})}


class Scheduler:
    def __init__(
        self,
        store: Store,
        ns: str,
        jobs: Mapping[str, tuple[float, Job]] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        initial_delay_s: float = 0.0,
        locked: bool = True,
    ) -> None:
        if store.read_only:
            raise InvalidInput(
                "a read-only store does not run lifecycle jobs", "open it for writing"
            )
        self.store = store
        #: Whether the scheduler holds the job's lock while it runs; False when the job
        #: takes it itself (a server's job goes through ``run_jobs``, here or on a worker).
        self.locked = locked
        self.ns = ns
        self.jobs = dict(default_jobs() if jobs is None else jobs)
        for name, (interval, _fn) in self.jobs.items():
            if not interval > 0:
                raise InvalidInput(f"job {name!r} needs a positive interval, not {interval!r}")
        self.clock = clock
        start = clock() + initial_delay_s
        self._due = dict.fromkeys(self.jobs, start)
        self._next = start
        self._tick_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_reports: dict[str, JobReport] = {}
        self.failures: dict[str, int] = dict.fromkeys(self.jobs, 0)

    def tick(self) -> list[str]:
        """Run the jobs that are due; return their names (in the order they ran)."""
        at = self.clock()
        if at < self._next:
            return []
        ran: list[str] = []
        with self._tick_lock:
            for name, (interval, fn) in self.jobs.items():
                if at < self._due[name]:
                    continue
                self._due[name] = at + interval
                ran.append(name)
                left = self._run(name, fn, interval)
                if left > 0:  # another process has this period: due when its claim ends
                    self._due[name] = self.clock() + left
            self._next = min(self._due.values(), default=float("inf"))
        return ran

    def _run(self, name: str, fn: Job, interval: float) -> float:
        """Run the job once if this period is unclaimed; 0.0, or the seconds left on
        the claim of the process that has this period."""
        try:
            lock = self.store.lock(f"job:{self.ns}:{name}") if self.locked else None
            with held(lock, f"lifecycle job {name}") if lock is not None else nullcontext():
                left = self.store.claim(f"period:{self.ns}:{name}", interval, ns=self.ns)
                if left > 0:
                    log.info("lifecycle job %s ran elsewhere this period (%.0f s left)", name, left)
                    return left
                report = fn(self.store, self.ns)
        except StoreLocked as exc:
            log.info("%s; skipped until its next interval", exc.message)
            return 0.0
        except (KredencError, OSError, ValueError) as exc:
            self.failures[name] += 1
            log.warning("lifecycle job %s failed: %s", name, exc)
            return 0.0
        except Exception as exc:  # one job's failure must not stop the others
            self.failures[name] += 1
            if isinstance(exc, self.store.index.errors):  # the backend's own query error
                log.warning("lifecycle job %s failed: %s", name, exc)
            else:  # a bug: log it loudly, with the traceback
                log.exception("lifecycle job %s failed with an internal error", name)
            return 0.0
        self.last_reports[name] = report
        if report.changed:
            log.info("lifecycle %s", report.summary())
        return 0.0

    def seconds_until_due(self) -> float:
        return max(0.0, self._next - self.clock())

    # -- background thread ----------------------------------------------------
    def start(self, *, throttle_s: float = 60.0) -> None:
        """Tick on a daemon thread, at most once per ``throttle_s`` seconds."""
        if self._thread is not None:
            return
        if not throttle_s > 0:
            raise InvalidInput("throttle_s must be positive")
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(throttle_s,), name="kredenc-lifecycle", daemon=True
        )
        self._thread.start()

    def _loop(self, throttle_s: float) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(max(throttle_s, self.seconds_until_due()))

    def request_stop(self) -> None:
        """Ask the thread to stop after the job it is running; :meth:`stop` waits."""
        self._stop.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the thread after the job it is running (if any) finishes, waiting up to
        ``timeout`` seconds (None: as long as it takes); whether it stopped in time. A
        job still running then goes on, on its daemon thread: the store's close waits
        for it (``Store.close``) and the process's exit ends it."""
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        self._stop.set()
        thread.join(timeout)
        if thread.is_alive():
            log.warning("lifecycle job still running %s s after stop; left to finish", timeout)
            return False
        return True

    @property
    def running(self) -> bool:
        """Whether the background thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
