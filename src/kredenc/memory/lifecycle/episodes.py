"""Episodes: memories filed close together in time belong together.

Memories are walked in filing order; a gap longer than ``gap_s`` (4 h) starts a new
run. A run of at least ``min_size`` (3) memories none of which has an episode yet
becomes episode ``e<id of its first memory>``, a stable id. Memories that already
carry an episode keep it (the job never renumbers, nor overrides an episode set by
a person or an agent); an unassigned memory joins the episode of the nearest
earlier assigned memory of its run, or the first later one. So a re-run adds new
memories to the episode they continue. Reflections are the episode's summaries,
not its members, and are left out; read-only memories count for the timing but
cannot be assigned. Assignments are ``score`` records with ``episode_id``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kredenc.errors import InvalidInput
from kredenc.memory.lifecycle import (
    JobReport,
    MemoryRow,
    live_memories,
    score_payload,
    write_groups,
)

if TYPE_CHECKING:
    from kredenc.storage.store import Store

GAP_S = 4 * 3600.0
MIN_SIZE = 3


def episode_id_for(first_memory_id: str) -> str:
    return f"e{first_memory_id}"


def runs(rows: list[MemoryRow], gap_s: float) -> list[list[MemoryRow]]:
    """Split memories (in filing order) where the time gap exceeds ``gap_s``."""
    out: list[list[MemoryRow]] = []
    for row in rows:
        if out and row.created_at - out[-1][-1].created_at <= gap_s:
            out[-1].append(row)
        else:
            out.append([row])
    return out


def assign(run: list[MemoryRow], min_size: int) -> dict[str, str]:
    """Episode ids for the unassigned, writable memories of one run."""
    known = [r.episode_id for r in run if r.episode_id]
    out: dict[str, str] = {}
    if not known:
        if len(run) < min_size:
            return out
        fresh = episode_id_for(run[0].id)
        return {r.id: fresh for r in run if not r.read_only}
    current: str | None = None
    for row in run:
        if row.episode_id:
            current = row.episode_id
        elif not row.read_only:
            out[row.id] = current or known[0]
    return out


def run_episodes(
    store: Store,
    ns: str,
    *,
    now: float | None = None,
    gap_s: float = GAP_S,
    min_size: int = MIN_SIZE,
) -> JobReport:
    """Group memories into episodes; write an ``episode_id`` for each new member.

    ``now`` is accepted for a uniform job signature; grouping depends only on the
    memories' filing times.
    """
    if not gap_s > 0 or min_size < 1:
        raise InvalidInput("the episode gap must be positive and the minimum size at least 1")
    report = JobReport("episodes")
    rows = live_memories(store, ns, reflections=False)
    report.examined = len(rows)
    groups = []
    for run in runs(rows, gap_s):
        for rid, episode in assign(run, min_size).items():
            groups.append(
                [score_payload(ns, rid, {"episode_id": episode}, reason="episodes", by="episodes")]
            )
            report.note({"id": rid, "episode_id": episode})
    report.changed = len(groups)
    report.records = write_groups(store, groups)
    return report.done()
