"""Lifecycle jobs: decay, episode grouping, contradiction detection, reflection.

Each job is a function ``run_<name>(store, ns, *, now=None, ...) -> JobReport`` on
the open :class:`~kredenc.storage.store.Store` and a namespace. Jobs read through
the index's named queries (``live_memory_rows`` and the edge reads) and write only
log records through the housekeeper: a job that changes many memories
writes them as a few atomic batches (:func:`write_groups`), never one fsync each.
The scheduler and the registry of jobs live in :mod:`.scheduler`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kredenc.fields import validate_fields
from kredenc.records import now as wall_clock

if TYPE_CHECKING:
    from kredenc.storage.store import Store

__all__ = [
    "BATCH_RECORDS",
    "DETAILS_MAX",
    "JobReport",
    "MemoryRow",
    "live_memories",
    "score_payload",
    "write_groups",
]

BATCH_RECORDS = 1000  # records per atomic batch a job writes
DETAILS_MAX = 100  # per-item details a report keeps (the counts stay exact)


@dataclass
class JobReport:
    """What one run of a job looked at and changed."""

    job: str
    examined: int = 0
    changed: int = 0
    records: int = 0  # log records written
    details: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter, repr=False)

    def note(self, detail: dict[str, Any]) -> None:
        """Keep a per-item detail (the first ``DETAILS_MAX`` of them)."""
        if len(self.details) < DETAILS_MAX:
            self.details.append(detail)

    def done(self) -> JobReport:
        self.seconds = round(time.perf_counter() - self.started, 4)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "examined": self.examined,
            "changed": self.changed,
            "records": self.records,
            "seconds": self.seconds,
            "details": self.details,
        }

    def summary(self) -> str:
        return (
            f"{self.job}: {self.changed} changed of {self.examined} examined, "
            f"{self.records} records in {self.seconds} s"
        )


@dataclass(frozen=True)
class MemoryRow:
    """A live memory as the index holds it now."""

    rowid: int
    id: str
    offset: int
    created_at: float
    kind: str
    drawer: str
    importance: float
    status: str
    source: str
    episode_id: str | None
    read_only: bool


def live_memories(
    store: Store,
    ns: str,
    *,
    not_status: str | None = None,
    reflections: bool | None = None,
    writable_only: bool = False,
    in_episode: bool = False,
    episode_id: str | None = None,
) -> list[MemoryRow]:
    """Live memories of ``ns`` in filing order, narrowed as
    ``SqliteIndex.live_memory_rows`` describes."""
    rows = store.index.live_memory_rows(
        ns,
        not_status=not_status,
        reflections=reflections,
        writable_only=writable_only,
        in_episode=in_episode,
        episode_id=episode_id,
    )
    return [
        MemoryRow(
            int(r[0]),
            str(r[1]),
            int(r[2]),
            float(r[3]),
            str(r[4]),
            str(r[5]),
            float(r[6]),
            str(r[7]),
            str(r[8]),
            None if r[9] is None else str(r[9]),
            bool(r[10]),
        )
        for r in rows
    ]


def score_payload(
    ns: str,
    record_id: str,
    fields: Mapping[str, Any],
    *,
    reason: str | None = None,
    by: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``score`` record built exactly as ``memory.writes.score`` builds it.

    The caller has already checked that the record is a live, writable memory (the
    jobs select only those in the index). ``by`` names the job that writes it (a
    memory's history shows it); ``extra`` adds job bookkeeping to the log record (e.g.
    ``decayed_at``); the index ignores keys it does not keep.
    """
    values = validate_fields(fields, strict=True, partial=True)
    payload: dict[str, Any] = {"op": "score", "ns": ns, "id": record_id}
    payload.update(values)
    payload["ts"] = wall_clock()
    if reason:
        payload["reason"] = reason
    if by:
        payload["by"] = by
    if extra:
        payload.update(extra)
    return payload


def write_groups(store: Store, groups: Sequence[list[dict[str, Any]]]) -> int:
    """Write groups of records; each group lands whole, groups share batches.

    Groups are packed into atomic batches of about ``BATCH_RECORDS`` records (one
    fsync each); a group is never split, so a pair's edge and its status change
    land together. Returns the number of records written.
    """
    written = 0
    pending: list[dict[str, Any]] = []
    for group in groups:
        if pending and len(pending) + len(group) > BATCH_RECORDS:
            store.write(pending, batch=len(pending) > 1)
            written += len(pending)
            pending = []
        pending.extend(group)
    if pending:
        store.write(pending, batch=len(pending) > 1)
        written += len(pending)
    return written
