"""The jobs' records in Redis, shared by the servers that queue them and the workers
that run them (``jobs_queue = "rq"``; docs/workers.md).

A job is the thread queue's :class:`~kredenc.interfaces.server.jobs.Job`, kept as one
JSON value, with its events in a list beside it, so any server process answers
``GET /ingest/jobs/{id}`` and replays the event stream of a job another process
queued and a worker anywhere runs. Keys, all under the deployment's prefix ``P``
(``jobs_redis_prefix``, which also names the RQ queue):

- ``P job:<id>``: the record (the wire Job plus its namespace, inputs, names, drawer,
  uploads and attempts);
- ``P events:<id>``: its events, one JSON ``{name, data}`` each, in order;
- ``P tenant:<namespace>``: the tenant's job ids, scored by creation time (listing,
  the waiting limit, pruning);
- ``P upload:<id>:<n>``: the bytes of the job's ``n``-th upload until the job is over.

A record and the event it adds are written in one MULTI, so a reader never sees an
event whose state is not yet there. Finished jobs expire after :data:`FINISHED_TTL_S`
and at most ``max_finished`` are kept per tenant; uploads expire after
:data:`UPLOAD_TTL_S` even when no worker ever takes the job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kredenc.errors import StoreError
from kredenc.interfaces.server.jobs import Event

#: How long a finished job's record and events stay (seconds).
FINISHED_TTL_S = 7 * 86400
#: How long an upload waits for a worker (seconds).
UPLOAD_TTL_S = 86400
FINISHED = ("done", "failed")


def redis_error(where: str, exc: BaseException) -> StoreError:
    """A Redis failure as the one line the interfaces print or answer."""
    return StoreError(
        f"the job queue's Redis at {where} failed ({type(exc).__name__}: {exc})",
        "check that Redis runs there (jobs_redis_url, else redis_url, else opcache_redis_url)",
    )


def public(record: dict[str, Any]) -> dict[str, Any]:
    """The record's wire form (the REST contract's Job)."""
    return {
        "id": record["id"],
        "state": record["state"],
        "sources": list(record["sources"]),
        "progress": {k: dict(v) for k, v in record["progress"].items()},
        "report": record["report"],
        "error": record["error"],
        "created_at": record["created_at"],
        "finished_at": record["finished_at"],
    }


class JobBook:
    """The records of one deployment (``prefix``) in Redis (``client``: redis-py)."""

    def __init__(self, client: Any, prefix: str, *, where: str = "Redis") -> None:
        self.client = client
        self.prefix = prefix
        self.where = where

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def upload_key(self, job_id: str, n: int) -> str:
        return self._key("upload", job_id, str(n))

    # -- writing ------------------------------------------------------------------
    def create(self, record: dict[str, Any], uploads: Sequence[bytes] = ()) -> None:
        """Store a new job (and its uploads' bytes) and list it under its tenant."""
        try:
            with self.client.pipeline(transaction=True) as pipe:
                for n, data in enumerate(uploads):
                    pipe.set(self.upload_key(record["id"], n), data, ex=UPLOAD_TTL_S)
                pipe.set(self._key("job", record["id"]), _dumps(record))
                pipe.zadd(
                    self._key("tenant", record["namespace"]), {record["id"]: record["created_at"]}
                )
                pipe.execute()
        except Exception as exc:  # noqa: BLE001 - redis-py raises RedisError and OSError
            raise redis_error(self.where, exc) from None

    def save(self, record: dict[str, Any], event: Event | None = None) -> None:
        """Write the record, and append ``event`` in the same transaction."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.set(self._key("job", record["id"]), _dumps(record))
            if event is not None:
                pipe.rpush(self._key("events", record["id"]), _dumps(event.__dict__))
            pipe.execute()

    def finish(self, record: dict[str, Any], event: Event, *, max_finished: int) -> None:
        """Write the finished record and its last event; drop its uploads; let it expire;
        prune the tenant's oldest finished jobs beyond ``max_finished``."""
        job_id = record["id"]
        with self.client.pipeline(transaction=True) as pipe:
            pipe.set(self._key("job", job_id), _dumps(record), ex=FINISHED_TTL_S)
            pipe.rpush(self._key("events", job_id), _dumps(event.__dict__))
            pipe.expire(self._key("events", job_id), FINISHED_TTL_S)
            for n in range(int(record.get("uploads", 0))):
                pipe.delete(self.upload_key(job_id, n))
            pipe.execute()
        self._prune(record["namespace"], max_finished)

    def _prune(self, namespace: str, max_finished: int) -> None:
        finished = [r["id"] for r in reversed(self.tenant(namespace)) if r["state"] in FINISHED]
        drop = finished[: max(0, len(finished) - max_finished)]
        if drop:
            with self.client.pipeline(transaction=True) as pipe:
                for job_id in drop:
                    pipe.delete(self._key("job", job_id), self._key("events", job_id))
                pipe.zrem(self._key("tenant", namespace), *drop)
                pipe.execute()

    # -- reading ------------------------------------------------------------------
    def load(self, job_id: str) -> dict[str, Any] | None:
        raw = self.client.get(self._key("job", job_id))
        return None if raw is None else _loads(raw)

    def upload(self, job_id: str, n: int) -> bytes | None:
        raw = self.client.get(self.upload_key(job_id, n))
        return None if raw is None else bytes(raw)

    def events(self, job_id: str, after: int) -> list[Event]:
        raw = self.client.lrange(self._key("events", job_id), after, -1)
        return [Event(**_loads(item)) for item in raw]

    def tenant(self, namespace: str) -> list[dict[str, Any]]:
        """The tenant's records, the newest first (ids whose record expired are dropped)."""
        key = self._key("tenant", namespace)
        ids = [
            i.decode() if isinstance(i, bytes) else str(i) for i in self.client.zrange(key, 0, -1)
        ]
        if not ids:
            return []
        raws = self.client.mget([self._key("job", i) for i in ids])
        gone = [i for i, raw in zip(ids, raws, strict=True) if raw is None]
        if gone:
            self.client.zrem(key, *gone)
        found = [_loads(raw) for raw in raws if raw is not None]
        return list(reversed(found))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _loads(raw: Any) -> Any:
    return json.loads(bytes(raw))
