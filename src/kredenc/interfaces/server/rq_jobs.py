"""The server's side of ``jobs_queue = "rq"``: ingest jobs and lifecycle runs go to RQ,
and ``kredenc worker`` processes run them (:mod:`~kredenc.interfaces.server.worker`).

:class:`RqJobs` has the thread queue's methods (``submit``, ``listing``, ``get``,
``events``, ``close``), so the routes do not know which one they have: a job's record
and events live in Redis (:mod:`~kredenc.interfaces.server.jobbook`), written by the
worker as it runs, read by whichever server a client asks. Tenants are kept apart as
on the thread queue: another tenant's job id is the same ``NotFound`` as one that
never existed.

Uploads reach the worker through Redis: the bytes the server received (at most the
body limit, ``proxy_max_body_bytes``) go into the job's upload keys and the server's
copy is removed at once. A worker may run on another machine (it shares only Redis
and PostgreSQL with the server), so a shared folder would be one more thing to mount.
Paths (``{"paths": ...}``) are resolved and checked against the server's roots by the
server; the worker reads the same path, so it must see the same files.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kredenc.config import Settings
from kredenc.engine import Kredenc
from kredenc.errors import (
    DeadlineExceeded,
    InvalidInput,
    KredencError,
    MissingExtra,
    NotFound,
    StoreClosed,
)
from kredenc.ingest.redact import redact_url
from kredenc.interfaces.server.jobbook import FINISHED, JobBook, public, redis_error
from kredenc.interfaces.server.jobs import (
    MAX_FINISHED,
    MAX_WAITING,
    Event,
    Refused,
    remove_files,
)
from kredenc.memory.scheduler import JOBS
from kredenc.storage.opcache_redis import redacted

#: Where the worker finds the functions it runs (by name: RQ imports them).
INGEST_TASK = "kredenc.interfaces.server.tasks.ingest"
LIFECYCLE_TASK = "kredenc.interfaces.server.tasks.lifecycle"
ON_FAILURE = "kredenc.interfaces.server.tasks.on_failure"
#: How long ``POST /jobs/run`` waits for a worker to run the lifecycle jobs (seconds).
LIFECYCLE_WAIT_S = 120.0
_POLL_S = 0.1
CONNECT_TIMEOUT_S = 2.0


def redis_url(settings: Settings) -> str:
    """The job queue's Redis URL: ``jobs_redis_url``, else ``redis_url``, else
    ``opcache_redis_url``."""
    url = (
        settings.jobs_redis_url.get_secret_value()
        or settings.redis_url.get_secret_value()
        or settings.opcache_redis_url.get_secret_value()
    )
    if not url:
        raise InvalidInput(
            "jobs_queue = 'rq' needs a Redis: jobs_redis_url, redis_url and opcache_redis_url "
            "are empty",
            "set KREDENC_JOBS_REDIS_URL=redis://HOST:6379/0 (or jobs_redis_url in kredenc.toml)",
        )
    return url


def require_shared_store(settings: Settings, what: str) -> None:
    """RQ workers are other processes writing the store: only a PostgreSQL store has
    room for several writers (the SQLite store has one writer process, its lock)."""
    if settings.backend != "postgres":
        raise InvalidInput(
            f"{what} needs backend = 'postgres' (this store's backend is {settings.backend!r}, "
            "which has one writer process)",
            "use jobs_queue = 'thread' with a SQLite store, or move the store to PostgreSQL "
            "(docs/postgres.md, kredenc export / import)",
        )


def connect(settings: Settings) -> tuple[Any, str]:
    """A redis-py client for the job queue, checked with a PING; and where it points
    (the URL without its password, for messages)."""
    url = redis_url(settings)
    where = redacted(url)
    try:
        import redis
    except ImportError:
        raise MissingExtra("jobs_queue = 'rq'", "workers") from None
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT_S, health_check_interval=30
        )
        client.ping()
    except Exception as exc:  # noqa: BLE001 - RedisError, OSError; ValueError: a bad URL
        raise redis_error(where, exc) from None
    return client, where


def rq_queue(client: Any, prefix: str) -> Any:
    """The deployment's RQ queue (named by ``jobs_redis_prefix``; JSON payloads, so a
    job holds no pickled objects)."""
    try:
        from rq import Queue
        from rq.serializers import JSONSerializer
    except ImportError:
        raise MissingExtra("jobs_queue = 'rq'", "workers") from None
    return Queue(prefix, connection=client, serializer=JSONSerializer)


class RqJobs:
    """Ingest jobs queued to RQ, their records and events in Redis (thread-safe: one
    redis-py client with its connection pool)."""

    def __init__(
        self,
        settings: Settings,
        *,
        max_finished: int = MAX_FINISHED,
        max_waiting: int = MAX_WAITING,
    ) -> None:
        require_shared_store(settings, "jobs_queue = 'rq'")
        self.settings = settings
        self.client, self.where = connect(settings)
        self.book = JobBook(self.client, settings.jobs_redis_prefix, where=self.where)
        self.queue = rq_queue(self.client, settings.jobs_redis_prefix)
        self.max_finished = max_finished
        self.max_waiting = max_waiting
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
        """Queue an ingest of ``inputs`` into ``kb``'s namespace for a worker; the job's
        wire form. Uploads (the inputs ``names`` names) travel as bytes in Redis."""
        if self._stopping:
            raise StoreClosed("the server is stopping", "try again once it is back")
        names = dict(names or {})
        try:
            waiting = sum(1 for r in self._tenant(kb.namespace) if r["state"] not in FINISHED)
            if waiting >= self.max_waiting:
                raise Refused(
                    429,
                    "too_many_jobs",
                    f"{waiting} ingest jobs of this key are waiting or running",
                    "wait for them to finish (GET /ingest/jobs), then send the rest",
                )
            record: dict[str, Any] = {
                "id": f"job_{uuid.uuid4().hex}",
                "namespace": kb.namespace,
                "sources": [redact_url(s) for s in sources],
                "inputs": [i for i in inputs if i not in names],
                "names": [],  # the uploads' names, in upload order
                "drawer": drawer,
                "state": "queued",
                "progress": {},
                "report": None,
                "error": None,
                "created_at": time.time(),
                "finished_at": None,
                "attempts": 0,
            }
            uploads: list[bytes] = []
            for saved in (i for i in inputs if i in names):
                path = Path(saved)
                uploads.append(path.read_bytes())
                record["names"].append([names[saved], path.suffix])
            record["uploads"] = len(uploads)
            self.book.create(record, uploads)
            self.queue.enqueue(
                INGEST_TASK,
                record["id"],
                job_id=record["id"],
                job_timeout=self.settings.jobs_timeout_s,
                retry=_retry(self.settings.jobs_retries),
                on_failure=_on_failure(),
                result_ttl=3600,
                failure_ttl=7 * 86400,
                description=f"ingest {len(record['sources'])} source(s)",
            )
        except KredencError:
            raise
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            raise redis_error(self.where, exc) from None
        finally:
            remove_files(cleanup)  # the bytes are in Redis now (or the job was refused)
        return public(record)

    def listing(self, namespace: str) -> list[dict[str, Any]]:
        """The tenant's jobs, the newest first."""
        return [public(r) for r in self._tenant(namespace)]

    def get(self, namespace: str, job_id: str) -> dict[str, Any]:
        return public(self._job(namespace, job_id))

    def events(self, namespace: str, job_id: str, after: int) -> tuple[list[Event], bool]:
        """The job's events from index ``after`` on, and whether the job has finished
        (its last event is then among them)."""
        record = self._job(namespace, job_id)
        try:
            events = self.book.events(job_id, after)
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            raise redis_error(self.where, exc) from None
        # Read after the record: a record that says finished has its last event listed.
        return events, record["state"] in FINISHED

    def run_lifecycle(self, namespace: str, names: Sequence[str]) -> list[dict[str, Any]]:
        """Run lifecycle jobs on a worker and wait for their reports (up to
        :data:`LIFECYCLE_WAIT_S`)."""
        unknown = [n for n in names if n not in JOBS]
        if unknown:
            raise InvalidInput(f"unknown job(s): {', '.join(unknown)}", f"use {', '.join(JOBS)}")
        try:
            job = self.queue.enqueue(
                LIFECYCLE_TASK,
                namespace,
                list(names),
                job_timeout=self.settings.jobs_timeout_s,
                retry=_retry(self.settings.jobs_retries),
                result_ttl=600,
                description=f"lifecycle {','.join(names) or 'all'} in {namespace}",
            )
            deadline = time.monotonic() + LIFECYCLE_WAIT_S
            while time.monotonic() < deadline:
                status = job.get_status(refresh=True)
                if status == "finished":
                    result = job.return_value(refresh=True) or {}
                    if "error" in result:
                        error = result["error"]
                        raise Refused(422, error["code"], error["message"], error["hint"])
                    return list(result.get("reports", []))
                if status in ("failed", "stopped", "canceled"):
                    break
                time.sleep(_POLL_S)
        except KredencError:
            raise
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            raise redis_error(self.where, exc) from None
        raise DeadlineExceeded(
            f"no worker finished the lifecycle run within {LIFECYCLE_WAIT_S:.0f} s",
            "is a 'kredenc worker' running against this store's Redis and PostgreSQL?",
        )

    def close(self, timeout: float = 0.0) -> None:
        """Stop queueing. Jobs already queued stay queued: workers run them whether or
        not this server is up."""
        self._stopping = True
        self.client.close()

    # -- helpers -------------------------------------------------------------------
    def _tenant(self, namespace: str) -> list[dict[str, Any]]:
        try:
            return self.book.tenant(namespace)
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            raise redis_error(self.where, exc) from None

    def _job(self, namespace: str, job_id: str) -> dict[str, Any]:
        try:
            record = self.book.load(job_id) if job_id.startswith("job_") else None
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            raise redis_error(self.where, exc) from None
        if record is None or record["namespace"] != namespace:
            raise NotFound(f"no ingest job {job_id!r}", "list the jobs with GET /ingest/jobs")
        return record


def _retry(times: int) -> Any:
    from rq import Retry

    return Retry(max=times) if times > 0 else None


def _on_failure() -> Any:
    from rq import Callback

    return Callback(ON_FAILURE)
