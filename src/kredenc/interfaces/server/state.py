"""What every route of the server shares: the owner handle, one view per tenant, limits."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kredenc.engine import Kredenc
from kredenc.interfaces.auth import KeyRing
from kredenc.interfaces.guard import Gate
from kredenc.interfaces.server.jobs import UPLOADS, IngestJobs, Jobs
from kredenc.interfaces.server.rq_jobs import RqJobs

if TYPE_CHECKING:
    from kredenc.interfaces.server.schedule import Clock


@dataclass
class ServerConfig:
    """How ``kredenc serve`` runs. Fields left ``None`` come from the store's settings
    (``server_*``, and the front door's ``proxy_allowed_hosts`` / ``proxy_max_body_bytes``)."""

    host: str = "127.0.0.1"
    port: int = 8765
    upstream: str | None = None  # the /v1 proxy's upstream; None: server_upstream
    roots: list[Path] | None = None  # ingest-by-path roots; None: server_roots
    allowed_hosts: list[str] = field(default_factory=list)
    rate_per_minute: int | None = None
    max_body_bytes: int | None = None
    web: bool = True  # serve the page at /
    mcp: bool = True  # serve MCP (streamable HTTP) at /mcp
    # Run the lifecycle jobs on a schedule (server/schedule.py). Off for a server made in
    # code (tests, benchmarks); kredenc serve turns it on from the scheduler setting.
    scheduler: bool = False
    proxy_transport: Any = field(default=None, repr=False)  # tests: the upstream's transport


@dataclass
class Limits:
    """What one request may ask (422 beyond); from the ``server_*`` settings."""

    max_k: int
    max_query_chars: int
    max_hops: int
    max_fanout: int
    rate_per_minute: int
    max_body_bytes: int


class ServerState:
    """Held on ``app.state.kredenc``. The owner handle ``kb`` is the one open store;
    each tenant (the namespace an API key is bound to, or the store's namespace when it
    holds no keys) gets one ``kb.scoped`` view, made on first use."""

    def __init__(self, kb: Kredenc, config: ServerConfig) -> None:
        s = kb.settings
        self.kb = kb
        self.config = config
        self.keys = KeyRing(kb.home)
        self.limits = Limits(
            max_k=s.server_max_k,
            max_query_chars=s.server_max_query_chars,
            max_hops=s.server_max_hops,
            max_fanout=s.server_max_fanout,
            rate_per_minute=(
                config.rate_per_minute
                if config.rate_per_minute is not None
                else s.server_rate_per_minute
            ),
            max_body_bytes=config.max_body_bytes or s.proxy_max_body_bytes,
        )
        self.gate = Gate(
            self.keys,
            kb.namespace,
            config.host,
            [*s.proxy_allowed_hosts, *config.allowed_hosts],
            self.limits.max_body_bytes,
        )
        roots = config.roots if config.roots is not None else [Path(r) for r in s.server_roots]
        self.roots = [Path(r).expanduser().resolve() for r in roots]
        self.upstream = config.upstream if config.upstream is not None else s.server_upstream
        # POST /ingest's queue and every tenant's jobs: the server's thread (uploads a
        # crash left, removed; not where other servers share the store: the folder holds
        # their uploads too), or RQ workers with the jobs' records in Redis.
        self.jobs: Jobs
        if s.jobs_queue == "rq":
            self.jobs = RqJobs(s)
        else:
            self.jobs = IngestJobs(None if kb.read_only or kb.store.shared else kb.home / UPLOADS)
        self._views: dict[str, Kredenc] = {kb.namespace: kb}
        #: Set as the server begins to shut down: open event streams end (sse.py).
        self.closing = threading.Event()
        self._lock = threading.Lock()
        # The last run of each lifecycle job per namespace: (finished at, report).
        self._job_runs: dict[str, dict[str, tuple[float, dict[str, Any]]]] = {}
        #: The lifecycle schedulers (:meth:`start_clock`), or None when not scheduling.
        self.clock: Clock | None = None

    def run_lifecycle(self, kb: Kredenc, names: list[str]) -> list[dict[str, Any]]:
        """Run lifecycle jobs in ``kb``'s namespace (``POST /jobs/run`` and the
        scheduler): here, or on a worker with ``jobs_queue = "rq"``; their reports, kept
        for ``GET /jobs``."""
        if isinstance(self.jobs, RqJobs):  # a worker runs them
            reports = self.jobs.run_lifecycle(kb.namespace, names)
        else:
            reports = [r.to_json() for r in kb.run_jobs(names)]
        self.note_jobs(kb.namespace, reports)
        return reports

    def start_clock(self) -> None:
        """Start the lifecycle schedulers (``ServerConfig.scheduler``; never on a
        read-only store): the store's namespace and every namespace an active API key
        is bound to, as the keys stand now."""
        from kredenc.interfaces.server.schedule import Clock

        if not self.config.scheduler or self.kb.read_only:
            return
        s = self.kb.settings
        namespaces = dict.fromkeys([self.kb.namespace, *(k.namespace for k in self.keys.active())])
        self.clock = Clock(
            [self.view(ns) for ns in namespaces],
            self.run_lifecycle,
            intervals=s.scheduler_intervals,
            throttle_s=s.scheduler_throttle_s,
        )
        self.clock.start()

    def note_jobs(self, namespace: str, reports: list[dict[str, Any]]) -> None:
        """Keep the reports of jobs just run for the namespace (``GET /jobs``)."""
        at = time.time()
        with self._lock:
            runs = self._job_runs.setdefault(namespace, {})
            for report in reports:
                runs[str(report["job"])] = (at, report)

    def job_runs(self, namespace: str) -> dict[str, tuple[float, dict[str, Any]]]:
        with self._lock:
            return dict(self._job_runs.get(namespace, {}))

    def view(self, namespace: str) -> Kredenc:
        """The tenant's view of the store (made once, kept for the server's life)."""
        with self._lock:
            found = self._views.get(namespace)
            if found is None:
                found = self._views[namespace] = self.kb.scoped(namespace)
            return found

    def close(self) -> None:
        """Stop the schedulers (a running job gets ``schedule.STOP_WAIT_S``) and the
        ingest jobs (the running one at its next page), then flush what the views hold
        (the owner handle is closed by whoever opened it)."""
        if self.clock is not None:
            self.clock.stop()
        self.jobs.close()
        with self._lock:
            for view in self._views.values():
                if view is not self.kb:
                    view.flush_access()
