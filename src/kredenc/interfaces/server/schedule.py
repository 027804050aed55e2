"""The server's lifecycle clock: one :class:`~kredenc.memory.scheduler.Scheduler` per
namespace the server serves, on threads of their own, so a tick never holds up a
request.

A scheduled run takes the path ``POST /jobs/run`` takes (:meth:`ServerState.run_lifecycle`):
with ``jobs_queue = "thread"`` the job runs here, through ``run_jobs`` (which holds its
lock); with ``jobs_queue = "rq"`` it is queued for a worker and its report awaited on
the scheduler's thread. Either way the scheduler only claims the period
(``Store.claim``: Redis, else the PostgreSQL store's ``claims``, else this process), so
with every server of a store scheduling, each job runs once per interval. ``GET /jobs``
shows the run as the last one, like a run asked for.

The first look at the clock comes one ``scheduler_throttle_s`` after the server starts
(the warm-up and the sample data go first); a read-only server never schedules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kredenc.memory.lifecycle import JobReport
from kredenc.memory.scheduler import JOBS, Job, Scheduler, job_intervals

if TYPE_CHECKING:
    from kredenc.engine import Kredenc

log = logging.getLogger("kredenc.server")

#: How long shutdown waits for a scheduled job that is running (seconds); past it the
#: job is left to finish on its daemon thread while the store closes (which waits for it).
STOP_WAIT_S = 10.0

RunLifecycle = Callable[["Kredenc", list[str]], list[dict[str, Any]]]


def report_of(payload: dict[str, Any]) -> JobReport:
    """A job's report from its JSON (``JobReport.to_json``), as a worker returns it."""
    return JobReport(
        job=str(payload.get("job", "")),
        examined=int(payload.get("examined", 0)),
        changed=int(payload.get("changed", 0)),
        records=int(payload.get("records", 0)),
        details=list(payload.get("details", [])),
        seconds=float(payload.get("seconds", 0.0)),
    )


class Clock:
    """The schedulers of the namespaces ``views`` (their owner or scoped handles)."""

    def __init__(
        self,
        views: list[Kredenc],
        run: RunLifecycle,
        *,
        intervals: dict[str, float],
        throttle_s: float,
    ) -> None:
        self.throttle_s = throttle_s
        every = job_intervals(intervals)
        self.schedulers = [
            Scheduler(
                view.store,
                view.namespace,
                {name: (every[name], _job(view, name, run)) for name in JOBS},
                initial_delay_s=throttle_s,
                locked=False,  # run_jobs (here or on a worker) takes the job's lock
            )
            for view in views
        ]

    def start(self) -> None:
        for scheduler in self.schedulers:
            scheduler.start(throttle_s=self.throttle_s)
        if self.schedulers:
            log.info(
                "lifecycle scheduler running in %s",
                ", ".join(repr(s.ns) for s in self.schedulers),
            )

    def stop(self, timeout: float | None = None) -> bool:
        """Stop every scheduler (each after its running job, if any, waiting up to
        ``timeout`` seconds, default :data:`STOP_WAIT_S`); whether all stopped in time."""
        timeout = STOP_WAIT_S if timeout is None else timeout
        for scheduler in self.schedulers:
            scheduler.request_stop()  # all stop together, not one after the other
        return all([scheduler.stop(timeout) for scheduler in self.schedulers])


def _job(view: Kredenc, name: str, run: RunLifecycle) -> Job:
    def scheduled(_store: Any, _ns: str, **_kw: Any) -> JobReport:
        reports = [r for r in run(view, [name]) if r.get("job") == name]
        return report_of(reports[0] if reports else {"job": name})

    return scheduled
