"""Decay: importance fades by ``rate`` per whole elapsed day unless validated.

``importance *= (1 - rate) ** days`` where ``days`` counts whole days since the
memory's importance was last *set*: when it was filed, scored by someone, or last
decayed. Each decay writes a ``score`` record carrying ``decayed_at`` (the base
moved forward by exactly the whole days applied, so fractions of a day carry over
to the next run). Running it twice in a row therefore decays once: the second run
finds no whole day elapsed. Validated and read-only memories are never decayed.

Where the base comes from: the index keeps the current importance but not when it
was set, so the job reads that from the log's ``score`` records. The reading is
incremental: a ledger per open log remembers how far it has read, so after the
first run a run reads only the records appended since.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kredenc.errors import InvalidInput
from kredenc.memory.lifecycle import JobReport, live_memories, score_payload, write_groups
from kredenc.records import now as wall_clock
from kredenc.storage.base import Log
from kredenc.storage.store import records_after

if TYPE_CHECKING:
    from kredenc.storage.store import Store

DAY = 86_400.0
DEFAULT_RATE = 0.02
_FLOOR = 1e-4  # below this importance there is nothing left worth a record


@dataclass
class _Ledger:
    """When each memory's importance was last set, from the log's score records."""

    end: int = 0  # the log's address to read on from (0: its first record)
    base: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def catch_up(self, haystack: Log) -> None:
        with self.lock:
            for rec in records_after(haystack, self.end):
                p = rec.payload
                if p.get("op") == "score" and "importance" in p:
                    rid = str(p["id"])
                    at = float(p.get("decayed_at", p.get("ts", 0.0)))
                    self.base[rid] = max(at, self.base.get(rid, at))
                self.end = rec.end


_LEDGERS: weakref.WeakKeyDictionary[Log, _Ledger] = weakref.WeakKeyDictionary()
_LEDGERS_LOCK = threading.Lock()


def _ledger(haystack: Log) -> _Ledger:
    with _LEDGERS_LOCK:
        ledger = _LEDGERS.get(haystack)
        if ledger is None:
            ledger = _LEDGERS[haystack] = _Ledger()
    ledger.catch_up(haystack)
    return ledger


def decayed(importance: float, days: int, rate: float) -> float:
    return importance * (1.0 - rate) ** days


def run_decay(
    store: Store, ns: str, *, now: float | None = None, rate: float = DEFAULT_RATE
) -> JobReport:
    """Decay the importance of every live, unvalidated, writable memory."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= rate < 1.0:
        raise InvalidInput(f"decay rate must be a number in [0, 1), not {rate!r}")
    at = wall_clock() if now is None else float(now)
    report = JobReport("decay")
    rows = live_memories(store, ns, not_status="validated", writable_only=True)
    report.examined = len(rows)
    if rate == 0.0 or not rows:
        return report.done()
    ledger = _ledger(store.haystack)
    groups = []
    for row in rows:
        base = max(row.created_at, ledger.base.get(row.id, row.created_at))
        days = math.floor((at - base) / DAY)
        if days < 1 or row.importance <= _FLOOR:
            continue
        value = decayed(row.importance, days, rate)
        payload = score_payload(
            ns,
            row.id,
            {"importance": value},
            reason=f"decay: {days} day(s) at rate {rate}",
            by="decay",
            extra={"decayed_at": base + days * DAY},
        )
        groups.append([payload])
        report.note({"id": row.id, "days": days, "from": row.importance, "to": round(value, 6)})
    report.changed = len(groups)
    report.records = write_groups(store, groups)
    return report.done()
